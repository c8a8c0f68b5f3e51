import { createCniCache } from '@allocnet/cni';
import { createIptables, parseIptablesSave } from '@allocnet/iptables-node';
import { createRecordingExec, exit, ok } from '@allocnet/iptables-node/testing';
import type { RecordingExec } from '@allocnet/iptables-node/testing';
import type { Family, NftLink, NftOp, SavedTable } from '@allocnet/iptables-node';
import { networkFacts } from './facts.js';
import { defaultNetworkConfig, defaultNetworkSettings } from './networks.js';
import { allocChains, linesNotAbout } from './marks.js';
import { EMPTY_PLAN, EMPTY_STATE, describePlan, planOwnedBy } from './plan.js';
import type { CacheFile } from './plan.js';
import { plan } from './planner.js';
import type { Scan, Selection } from './planner.js';
import { sweep } from './sweep.js';
import type { FoundReservation } from './types.js';

const A = '6b235529-8111-4bbe-520b-d639b1d2a94e';
const B = 'a0e7a1d4-0b1c-4a51-9c5e-7f3a2b1c0d9e';
const tag = (id: string, net = 'nomad') => `"name: \\"${net}\\" id: \\"${id}\\""`;
const dtag = (id: string, net = 'nomad') => `"dnat name: \\"${net}\\" id: \\"${id}\\""`;

/** What the plugins leave for allocation `id` at `ip` with host port `port` (nat table lines). */
function natOf(id: string, ip: string, port: number, net = 'nomad') {
  const { masq, dnat } = allocChains(net, id);
  return {
    chains: [`:${masq} - [0:0]`, `:${dnat} - [0:0]`],
    rules: [
      `-A POSTROUTING -s ${ip}/32 -m comment --comment ${tag(id, net)} -j ${masq}`,
      `-A ${masq} -d 172.26.64.0/20 -m comment --comment ${tag(id, net)} -j ACCEPT`,
      `-A ${masq} ! -d 224.0.0.0/4 -m comment --comment ${tag(id, net)} -j MASQUERADE`,
      `-A ${dnat} -s 172.26.64.0/20 -p tcp -m tcp --dport ${port} -j CNI-HOSTPORT-SETMARK`,
      `-A ${dnat} -p tcp -m tcp --dport ${port} -j DNAT --to-destination ${ip}:80`,
      `-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment ${dtag(id, net)} -m multiport --dports ${port} -j ${dnat}`,
    ],
  };
}

function save(
  natParts: { chains: string[]; rules: string[] }[],
  forward: string[] = [],
): SavedTable[] {
  return parseIptablesSave(
    [
      '*filter',
      ':INPUT ACCEPT [0:0]',
      ':FORWARD ACCEPT [0:0]',
      ':OUTPUT ACCEPT [0:0]',
      ':CNI-FORWARD - [0:0]',
      ':NOMAD-ADMIN - [0:0]',
      '-A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD',
      '-A CNI-FORWARD -m comment --comment "CNI firewall plugin admin overrides" -j NOMAD-ADMIN',
      '-A NOMAD-ADMIN -d 172.26.64.0/20 -o nomad -j ACCEPT',
      ...forward,
      'COMMIT',
      '*nat',
      ':PREROUTING ACCEPT [0:0]',
      ':INPUT ACCEPT [0:0]',
      ':OUTPUT ACCEPT [0:0]',
      ':POSTROUTING ACCEPT [0:0]',
      ':CNI-HOSTPORT-DNAT - [0:0]',
      ':CNI-HOSTPORT-SETMARK - [0:0]',
      ...natParts.flatMap((p) => p.chains),
      '-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT',
      ...natParts.flatMap((p) => p.rules),
      'COMMIT',
      '',
    ].join('\n'),
  );
}

const fw = (ip: string) => [
  `-A CNI-FORWARD -d ${ip}/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
  `-A CNI-FORWARD -s ${ip}/32 -j ACCEPT`,
];

function scanOf(
  v4: SavedTable[],
  reservations: FoundReservation[] = [],
  cache: CacheFile[] = [],
): Scan {
  return {
    tables: new Map<Family, SavedTable[]>([
      ['ipv4', v4],
      ['ipv6', []],
    ]),
    reservations,
    cache,
  };
}

const reservation = (ip: string, id: string): FoundReservation => ({
  hold: false,
  network: 'nomad',
  address: ip,
  path: `/ipam/nomad/${ip}`,
  allocId: id,
});

const lines = (scan: Scan, ids: string[], extra: Partial<Selection> = {}) =>
  describePlan(
    plan(scan, { allocIds: new Set(ids), networks: ['nomad'], addresses: [], ...extra }),
  );

describe('plan', () => {
  it('finds one allocation’s masquerade and DNAT state and leaves the other allocation’s alone', () => {
    const scan = scanOf(save([natOf(A, '172.26.64.2', 8080), natOf(B, '172.26.64.3', 8081)]));
    const { masq, dnat } = allocChains('nomad', A);
    expect(lines(scan, [A])).toEqual({
      rules: [
        {
          family: 'ipv4',
          table: 'nat',
          chain: 'POSTROUTING',
          line: `-A POSTROUTING -s 172.26.64.2/32 -m comment --comment ${tag(A)} -j ${masq}`,
        },
        {
          family: 'ipv4',
          table: 'nat',
          chain: 'CNI-HOSTPORT-DNAT',
          line: `-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment ${dtag(A)} -m multiport --dports 8080 -j ${dnat}`,
        },
      ],
      chains: [
        { family: 'ipv4', table: 'nat', chain: masq },
        { family: 'ipv4', table: 'nat', chain: dnat },
      ],
      reservations: [],
      cacheFiles: [],
    });
  });

  it('finds the chains by name even when nothing tagged points at them any more', () => {
    const { masq } = allocChains('nomad', A);
    const scan = scanOf(save([{ chains: [`:${masq} - [0:0]`], rules: [] }]));
    expect(lines(scan, [A]).chains).toEqual([{ family: 'ipv4', table: 'nat', chain: masq }]);
  });

  it('works for any network name, and only for the one asked for when asked', () => {
    const scan = scanOf(save([natOf(A, '10.1.0.2', 8080, 'custom-net')]));
    expect(lines(scan, [A]).chains.map((c) => c.chain)).toEqual([
      allocChains('custom-net', A).masq,
      allocChains('custom-net', A).dnat,
    ]);
    expect(lines(scan, [A], { network: 'nomad' }).rules).toEqual([]);
  });

  it('removes the firewall rules of the allocation’s addresses, keeping one copy for a live owner', () => {
    // A leaked (its rules doubled B's: host-local gave B the same address after A's netns vanished).
    const scan = scanOf(
      save([], [...fw('172.26.64.2'), ...fw('172.26.64.2'), ...fw('172.26.64.9')]),
      [reservation('172.26.64.2', B)],
    );
    expect(lines(scan, [A], { addresses: ['172.26.64.2'] }).rules.map((r) => r.line)).toEqual([
      '-A CNI-FORWARD -d 172.26.64.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
      '-A CNI-FORWARD -s 172.26.64.2/32 -j ACCEPT',
    ]);
    // Nobody holds .9: both of its rules go when it is the allocation's.
    expect(lines(scan, [A], { addresses: ['172.26.64.9'] }).rules).toHaveLength(2);
  });

  it('takes the addresses from the allocation’s reservations, masquerade rules and DNAT targets', () => {
    const scan = scanOf(
      save([natOf(A, '172.26.64.2', 8080)], [...fw('172.26.64.2'), ...fw('172.26.64.5')]),
      [reservation('172.26.64.5', A), reservation('172.26.64.6', B)],
    );
    const found = lines(scan, [A]);
    expect(found.rules.filter((r) => r.chain === 'CNI-FORWARD')).toHaveLength(4);
    expect(found.reservations).toEqual([reservation('172.26.64.5', A)]);
  });

  it('never touches NOMAD-ADMIN, the shared chains or their jumps', () => {
    const scan = scanOf(save([natOf(A, '172.26.64.2', 8080)], fw('172.26.64.2')), [
      reservation('172.26.64.2', A),
    ]);
    const found = lines(scan, [A]);
    const touched = [...found.rules.map((r) => r.line), ...found.chains.map((c) => c.chain)].join(
      '\n',
    );
    expect(touched).not.toMatch(
      /NOMAD-ADMIN|CNI-HOSTPORT-SETMARK -j|-j CNI-FORWARD|-j CNI-HOSTPORT-DNAT/,
    );
  });

  it('finds orphans: unreferenced allocation chains and accept rules of unreserved addresses', () => {
    const { masq: orphanChain } = allocChains('nomad', 'gone');
    const { masq: liveChain } = allocChains('nomad', B);
    const facts = networkFacts(defaultNetworkConfig(defaultNetworkSettings()));
    const scan = scanOf(
      save(
        [{ chains: [`:${orphanChain} - [0:0]`, `:${liveChain} - [0:0]`], rules: [] }],
        [...fw('172.26.64.7'), ...fw('172.26.64.8'), ...fw('10.9.9.9')],
      ),
      [reservation('172.26.64.8', B)],
    );
    const planned = plan(scan, {
      allocIds: new Set(),
      networks: ['nomad'],
      addresses: [],
      orphansOf: [facts],
      known: new Set([B]),
    });
    const orphans = describePlan(planOwnedBy(planned, new Set([undefined])));
    expect(orphans.chains.map((c) => c.chain)).toEqual([orphanChain]);
    // .8 is reserved, 10.9.9.9 is not in a managed subnet: only .7's rules are orphans.
    expect(orphans.rules.map((r) => r.line)).toEqual([
      '-A CNI-FORWARD -d 172.26.64.7/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
      '-A CNI-FORWARD -s 172.26.64.7/32 -j ACCEPT',
    ]);
  });

  it('attributes every item to its allocation, so leaks can be reported and reaped one by one', () => {
    const scan = scanOf(
      save(
        [natOf(A, '172.26.64.2', 8080), natOf(B, '172.26.64.3', 8081)],
        [...fw('172.26.64.2'), ...fw('172.26.64.3')],
      ),
    );
    const planned = plan(scan, { allocIds: new Set([A, B]), networks: ['nomad'], addresses: [] });
    const onlyB = describePlan(planOwnedBy(planned, new Set([B])));
    expect(onlyB.chains.map((c) => c.chain)).toEqual([
      allocChains('nomad', B).masq,
      allocChains('nomad', B).dnat,
    ]);
    expect(onlyB.rules.map((r) => r.line).filter((l) => l.includes('CNI-FORWARD'))).toEqual(
      fw('172.26.64.3'),
    );
    expect(onlyB.rules.some((r) => r.line.includes('172.26.64.2'))).toBe(false);
  });

  it('selects cache files and reservations by allocation (and network)', () => {
    const cache: CacheFile[] = [
      {
        kind: 'result',
        network: 'nomad',
        allocId: A,
        ifName: 'eth0',
        path: `/c/results/nomad-${A}-eth0`,
      },
      {
        kind: 'adding',
        network: 'other',
        allocId: A,
        ifName: 'eth0',
        path: `/c/allocnet/adding/other-${A}-eth0`,
      },
      {
        kind: 'result',
        network: 'nomad',
        allocId: B,
        ifName: 'eth0',
        path: `/c/results/nomad-${B}-eth0`,
      },
    ];
    const scan = scanOf(save([]), [reservation('172.26.64.2', A)], cache);
    expect(lines(scan, [A]).cacheFiles).toEqual([
      `/c/results/nomad-${A}-eth0`,
      `/c/allocnet/adding/other-${A}-eth0`,
    ]);
    expect(lines(scan, [A], { network: 'other' })).toMatchObject({
      cacheFiles: [`/c/allocnet/adding/other-${A}-eth0`],
      reservations: [],
    });
  });
});

describe('linesNotAbout', () => {
  it('drops the lines of live allocations and keeps the rest, the firewall’s included', () => {
    const a = natOf(A, '172.26.64.2', 8080);
    const b = natOf(B, '172.26.64.3', 8081);
    const keep = linesNotAbout(new Set([A]), ['nomad']);
    expect([...a.chains, ...a.rules].filter(keep)).toEqual([]);
    expect([...b.chains, ...b.rules].filter(keep)).toEqual([...b.chains, ...b.rules]);
    for (const line of [
      ...fw('172.26.64.2'),
      '-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT',
      '*nat',
      'COMMIT',
    ])
      expect(keep(line)).toBe(true);
  });

  it('leaves a scan that finds the same leaks as a full one', () => {
    const raw = [
      '*nat', ':POSTROUTING ACCEPT [0:0]', ':CNI-HOSTPORT-DNAT - [0:0]', ':CNI-HOSTPORT-SETMARK - [0:0]',
      ...natOf(A, '172.26.64.2', 8080).chains, ...natOf(B, '172.26.64.3', 8081).chains,
      ...natOf(A, '172.26.64.2', 8080).rules, ...natOf(B, '172.26.64.3', 8081).rules, 'COMMIT', '',
    ].join('\n'); // prettier-ignore
    const full = scanOf(parseIptablesSave(raw));
    const filtered = scanOf(parseIptablesSave(raw, linesNotAbout(new Set([A]), ['nomad'])));
    const selection = {
      allocIds: new Set([B]),
      networks: ['nomad'],
      addresses: [],
      known: new Set([A]),
    };
    expect(describePlan(plan(filtered, selection))).toEqual(describePlan(plan(full, selection)));
    expect(filtered.tables.get('ipv4')?.[0]?.rules.length).toBeLessThan(
      full.tables.get('ipv4')?.[0]?.rules.length ?? 0,
    );
  });
});

describe('sweep', () => {
  const busy = exit(4, 'iptables-restore v1.8.9 (nf_tables): line 2 failed');
  const planOfA = () =>
    plan(scanOf(save([natOf(A, '172.26.64.2', 8080)])), {
      allocIds: new Set([A]),
      networks: ['nomad'],
      addresses: [],
    });

  /** Sweep deps over a recording ipv4 exec; the cache is never read (plans hold no files). */
  function depsOver(v4: RecordingExec, nft?: NftLink) {
    const warnings: string[] = [];
    const debugs: string[] = [];
    const deps = {
      iptables: {
        ipv4: createIptables({ exec: v4, ...(nft === undefined ? {} : { nft: () => nft }) }),
        ipv6: createIptables({ family: 'ipv6', exec: createRecordingExec() }),
      },
      cache: createCniCache('/nonexistent/allocnet-sweep-test'),
      logger: {
        debug: (message: string) => {
          debugs.push(message);
        },
        warn: (message: string) => {
          warnings.push(message);
        },
      },
    };
    return { deps, warnings, debugs };
  }

  it('plans again when a restore fails because iptables changed, and reports what went', async () => {
    const v4 = createRecordingExec().reply(busy, ok());
    const { deps, warnings } = depsOver(v4);
    const asked: number[] = [];
    const outcome = await sweep(
      deps,
      (attempt) => {
        asked.push(attempt);
        return Promise.resolve(planOfA());
      },
      {},
    );
    expect(asked).toEqual([1, 2]);
    expect(v4.calls.map((c) => c.argv[0])).toEqual(['iptables-restore', 'iptables-restore']);
    expect(outcome).toEqual({
      removed: describePlan(planOfA()),
      last: planOfA(),
      error: undefined,
    });
    expect(warnings).toEqual(['sweep: iptables changed under the batch; scanning again']);
  });

  it('reports, rather than throws, what stayed after the last attempt', async () => {
    const v4 = createRecordingExec().reply(busy, busy, busy);
    const { deps } = depsOver(v4);
    const outcome = await sweep(deps, () => Promise.resolve(planOfA()), {});
    expect(v4.calls).toHaveLength(3);
    expect(outcome.removed).toEqual(EMPTY_STATE);
    expect(outcome.last).toEqual(planOfA());
    const { masq } = allocChains('nomad', A);
    expect(outcome.error?.message).toBe(
      `iptables-restore --noflush --wait at line 2 (-t nat -D POSTROUTING -s 172.26.64.2/32 -m comment --comment ${tag(A)} -j ${masq}) failed (exit status 4): iptables-restore v1.8.9 (nf_tables): line 2 failed`,
    );
  });

  it('applies nothing with dryRun, nor for an empty plan', async () => {
    const v4 = createRecordingExec();
    const { deps } = depsOver(v4);
    const dry = await sweep(deps, () => Promise.resolve(planOfA()), { dryRun: true });
    expect(dry.removed).toEqual(describePlan(planOfA()));
    const none = await sweep(deps, () => Promise.resolve(EMPTY_PLAN), {});
    expect(none).toEqual({ removed: EMPTY_STATE, last: EMPTY_PLAN, error: undefined });
    expect(v4.calls).toEqual([]);
  });

  describe('by rule handle, when the scan read its generation', () => {
    /** A scan of A's and B's state whose IPv4 save was read at generation 41. */
    const placedPlanOfA = () => {
      const found: Scan = {
        ...scanOf(save([natOf(B, '172.26.64.3', 8081), natOf(A, '172.26.64.2', 8080)])),
        generations: new Map([['ipv4', { generation: 41, lists: new Map() }]]),
      };
      return plan(found, { allocIds: new Set([A]), networks: ['nomad'], addresses: [] });
    };

    /** An nf_tables link whose chains list `sizes` rules (handles 100, 101, …) each. */
    function fakeLink(sizes: Record<string, number>, generation = 41) {
      const commits: NftOp[][] = [];
      const link: NftLink = {
        generation: () => Promise.resolve(generation),
        chains: () => Promise.resolve([]),
        chainExists: (_table, chain) => Promise.resolve(sizes[chain] !== undefined),
        rules: (table, chain, inspect) =>
          Promise.resolve(
            Array.from({ length: sizes[chain] ?? 0 }, (_, i) => {
              // Every message holds the texts a rule of A is checked for: the sizes are what is
              // checked here.
              const { masq, dnat } = allocChains('nomad', A);
              inspect?.(i, Buffer.from(`dnat name: "nomad" id: "${A}" ${masq} ${dnat}`));
              return BigInt(100 + i);
            }),
          ),
        commit: (at, ops) => {
          commits.push([...ops]);
          return Promise.resolve(at + 1);
        },
        close: () => undefined,
      };
      return { link, commits };
    }

    it('places each rule in its chain, and the plan carries the scan’s generations', () => {
      const planned = placedPlanOfA();
      expect(planned.rules.map((r) => [r.rule.chain, r.place])).toEqual([
        ['POSTROUTING', { position: 1, chainSize: 2 }],
        ['CNI-HOSTPORT-DNAT', { position: 1, chainSize: 2 }],
      ]);
      expect(planned.generations?.get('ipv4')?.generation).toBe(41);
    });

    it('removes the plan in one nf_tables transaction, no iptables-restore, and moves the generation on', async () => {
      const v4 = createRecordingExec();
      const { link, commits } = fakeLink({ POSTROUTING: 2, 'CNI-HOSTPORT-DNAT': 2 });
      const { deps } = depsOver(v4, link);
      const planned = placedPlanOfA();
      const outcome = await sweep(deps, () => Promise.resolve(planned), {});
      expect(outcome.error).toBeUndefined();
      expect(v4.calls).toEqual([]);
      const { masq, dnat } = allocChains('nomad', A);
      expect(commits).toEqual([
        [
          { kind: 'deleteRule', table: 'nat', chain: 'POSTROUTING', handle: 101n },
          { kind: 'deleteRule', table: 'nat', chain: 'CNI-HOSTPORT-DNAT', handle: 101n },
          { kind: 'flushChain', table: 'nat', chain: masq },
          { kind: 'flushChain', table: 'nat', chain: dnat },
          { kind: 'deleteChain', table: 'nat', chain: masq },
          { kind: 'deleteChain', table: 'nat', chain: dnat },
        ],
      ]);
      expect(planned.generations?.get('ipv4')?.generation).toBe(42);
    });

    it('falls back to iptables-restore when the ruleset changed, and gives the generation up', async () => {
      const v4 = createRecordingExec();
      // A third rule in POSTROUTING since the save.
      const { link, commits } = fakeLink({ POSTROUTING: 3, 'CNI-HOSTPORT-DNAT': 2 });
      const { deps, debugs } = depsOver(v4, link);
      const planned = placedPlanOfA();
      const outcome = await sweep(deps, () => Promise.resolve(planned), {});
      expect(outcome.error).toBeUndefined();
      expect(commits).toEqual([]);
      expect(v4.calls.map((c) => c.argv[0])).toEqual(['iptables-restore']);
      expect(planned.generations?.has('ipv4')).toBe(false);
      expect(debugs).toEqual(['sweep: removal by handle not taken; using iptables-restore']);
    });
  });
});
