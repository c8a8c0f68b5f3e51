// The ruleset read over nf_tables netlink (`Iptables.readAt`) against iptables-save, on the real
// kernel and iptables-nft, inside a throwaway node namespace: rule for rule what iptables-save
// prints, both families; and a leak search that reads over netlink finds what one that reads
// with iptables-save finds, in the shapes the Debian plugins leave and the odd ones a crash does.
// Needs root and iptables (nf_tables).
import { writeFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { createCniRuntime } from '@allocnet/cni';
import { allocChains, createCniConfigurator } from '@allocnet/cni-configurator';
import type { CniConfigurator } from '@allocnet/cni-configurator';
import { addPluginShapes, sharedChains } from '@allocnet/cni-configurator/testing';
import { IptablesError, createBatch, createIptables, openNftLink } from '@allocnet/iptables-node';
import type { Family, Iptables, Rule, SavedTable } from '@allocnet/iptables-node';
import { plainRules } from '@allocnet/iptables-node/testing';
import { requireNetworkTestHost } from '@allocnet/testns';
import { labPerTest } from './fixtures/lab-per-test.js';

const t = labPerTest({ node: true });

beforeAll(async () => {
  await requireNetworkTestHost(['iptables', 'ip6tables', 'nsenter']);
});

/** Rules in every shape the reader prints, and some it leaves opaque (`OPAQUE`), per family. */
const RULES: Record<Family, string> = {
  ipv4: `*nat
:CNI-HOSTPORT-DNAT - [0:0]
:CNI-HOSTPORT-SETMARK - [0:0]
:CNI-HOSTPORT-MASQ - [0:0]
:CNI-0123456789abcdef01234567 - [0:0]
:CNI-DN-0123456789abcdef01234 - [0:0]
-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
-A PREROUTING -m addrtype --src-type LOCAL,UNICAST ! --dst-type MULTICAST --limit-iface-in -j ACCEPT
-A OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
-A POSTROUTING -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ
-A POSTROUTING -s 10.88.0.5/32 -m comment --comment "name: \\"bridge\\" id: \\"a1\\"" -j CNI-0123456789abcdef01234567
-A POSTROUTING -p tcp -j MASQUERADE --to-ports 1000
-A POSTROUTING -j MASQUERADE --random
-A CNI-HOSTPORT-MASQ -m mark --mark 0x2000/0x2000 -j MASQUERADE
-A CNI-HOSTPORT-MASQ -m mark ! --mark 0x1 -j RETURN
-A CNI-HOSTPORT-SETMARK -m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark 0x2000/0x2000
-A CNI-HOSTPORT-SETMARK -j MARK --set-mark 0x5
-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"bridge\\" id: \\"a1\\"" -m multiport --dports 8080,9090 -j CNI-DN-0123456789abcdef01234
-A CNI-HOSTPORT-DNAT -p udp -m comment --comment "dnat name: \\"bridge\\" id: \\"a1\\"" -m multiport ! --ports 5:10,20 -j CNI-DN-0123456789abcdef01234
-A CNI-0123456789abcdef01234567 -d 10.88.0.0/16 -m comment --comment "name: \\"bridge\\" id: \\"a1\\"" -j ACCEPT
-A CNI-0123456789abcdef01234567 ! -d 224.0.0.0/4 -m comment --comment "name: \\"bridge\\" id: \\"a1\\"" -j MASQUERADE
-A CNI-DN-0123456789abcdef01234 -s 10.88.0.0/16 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK
-A CNI-DN-0123456789abcdef01234 -s 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK
-A CNI-DN-0123456789abcdef01234 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.88.0.5:80
-A CNI-DN-0123456789abcdef01234 -d 192.168.1.1/32 -p udp -m udp ! --sport 53 -j DNAT --to-destination 10.88.0.5
-A CNI-DN-0123456789abcdef01234 -p tcp -j DNAT --to-destination 1.2.3.4:80-90
COMMIT
*filter
:CNI-FORWARD - [0:0]
:CNI-ADMIN - [0:0]
-A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD
-A FORWARD -s 10.1.0.0/20 ! -d 1.2.3.4/31 -j DROP
-A FORWARD ! -p tcp -m conntrack ! --ctstate INVALID,NEW -g CNI-ADMIN
-A FORWARD -m conntrack --ctstate DNAT -j ACCEPT
-A FORWARD -p tcp -m tcp --sport 1 --dport 2 -j ACCEPT
-A FORWARD -i eth0 -j ACCEPT
-A FORWARD -m limit --limit 5/sec -m comment --comment "x" -j LOG
-A FORWARD -m comment --comment "a \\"b\\" c \\\\ d é" -m comment --comment "-x" -j ACCEPT
-A CNI-FORWARD -m comment --comment "CNI firewall plugin admin overrides" -j CNI-ADMIN
-A CNI-FORWARD -d 10.88.0.5/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A CNI-FORWARD -s 10.88.0.5/32 -j ACCEPT
-A CNI-ADMIN -j RETURN
COMMIT
`,
  ipv6: `*nat
:CNI-0123456789abcdef01234567 - [0:0]
:CNI-DN-0123456789abcdef01234 - [0:0]
-A POSTROUTING -s fd00::5/128 -m comment --comment "name: \\"bridge\\" id: \\"a1\\"" -j CNI-0123456789abcdef01234567
-A POSTROUTING -d ::ffff:1.2.3.4/128 -j RETURN
-A POSTROUTING -d 1:0:0:1::1/128 -j RETURN
-A POSTROUTING -s 2001:db8::/32 ! -d fd00::/63 -j RETURN
-A POSTROUTING -p udp -j MASQUERADE --to-ports 5
-A CNI-0123456789abcdef01234567 -d fd00::/64 -m comment --comment "name: \\"bridge\\" id: \\"a1\\"" -j ACCEPT
-A CNI-0123456789abcdef01234567 ! -d ff00::/8 -m comment --comment "name: \\"bridge\\" id: \\"a1\\"" -j MASQUERADE
-A CNI-DN-0123456789abcdef01234 -s ::1/128 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK
-A CNI-DN-0123456789abcdef01234 -p tcp -m tcp --dport 8080 -j DNAT --to-destination [fd00::5]:80
-A CNI-DN-0123456789abcdef01234 -p udp -j DNAT --to-destination fd00::5
COMMIT
*filter
:CNI-FORWARD - [0:0]
-A CNI-FORWARD -d fd00::5/128 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A CNI-FORWARD -s fd00::5/128 -j ACCEPT
COMMIT
`,
};
// ip6tables has no CNI-HOSTPORT-SETMARK above: made first, so that the jump to it resolves.
const IPV6_FIRST = '*nat\n:CNI-HOSTPORT-SETMARK - [0:0]\nCOMMIT\n';

/** The rules of the fixture the reader leaves opaque, as iptables-save prints them. */
const OPAQUE: Record<Family, string[]> = {
  ipv4: [
    'POSTROUTING -p tcp -j MASQUERADE --to-ports 1000',
    'POSTROUTING -j MASQUERADE --random',
    'CNI-DN-0123456789abcdef01234 -p tcp -j DNAT --to-destination 1.2.3.4:80-90',
    'FORWARD -m conntrack --ctstate DNAT -j ACCEPT',
    'FORWARD -p tcp -m tcp --sport 1 --dport 2 -j ACCEPT',
    'FORWARD -i eth0 -j ACCEPT',
    'FORWARD -m limit --limit 5/sec -m comment --comment x -j LOG',
  ],
  ipv6: [
    'POSTROUTING -p udp -j MASQUERADE --to-ports 5',
    'CNI-DN-0123456789abcdef01234 -p udp -j DNAT --to-destination fd00::5',
  ],
};

const line = (r: { chain: string; spec: readonly string[] }) => `${r.chain} ${r.spec.join(' ')}`;

/** The rules of a table by `<chain>#<place>`. */
function byPlace(table: SavedTable) {
  const out = new Map<string, Rule>();
  plainRules(table.rules).forEach((r, i) => out.set(`${r.chain}#${table.places?.positions[i]}`, r));
  return out;
}

describe('Iptables.readAt', () => {
  it.each(['ipv4', 'ipv6'] as const)(
    'reads back %s rule for rule as iptables-save prints it, and names the rules it cannot',
    async (family) => {
      const ipt = createIptables({ family, netns: t.node.path });
      const restore = family === 'ipv4' ? 'iptables-restore' : 'ip6tables-restore';
      if (family === 'ipv6') await t.node.exec([restore], { input: IPV6_FIRST });
      await t.node.exec([restore, '--noflush'], { input: RULES[family] });

      const saved = await ipt.save();
      const read = await ipt.readAt?.();
      if (read === undefined) throw new Error('readAt read nothing');
      expect(read.tables.map((x) => x.name)).toEqual(saved.map((x) => x.name));
      const opaque: string[] = [];
      for (const s of saved) {
        const r = read.tables.find((x) => x.name === s.name) as SavedTable;
        expect(r.chains).toEqual(s.chains);
        const want = byPlace(s);
        for (const [place, rule] of byPlace(r)) expect(rule).toEqual(want.get(place));
        for (const o of read.opaque.filter((x) => x.table === s.name)) {
          const rule = want.get(`${o.chain}#${o.position}`);
          if (rule === undefined) throw new Error(`no rule at ${o.chain}#${o.position}`);
          expect([o.comment, o.target]).toEqual([rule.comment, rule.target?.name]);
          opaque.push(line(rule));
        }
        // Every rule of the save is read back or named opaque.
        expect(r.rules.length + read.opaque.filter((x) => x.table === s.name).length).toBe(
          s.rules.length,
        );
        // A chain with no rule has no size in a save.
        const sized = (x: SavedTable) =>
          new Map([...(x.places?.sizes ?? [])].filter(([, size]) => size > 0));
        expect(sized(r)).toEqual(sized(s));
      }
      expect(opaque.sort()).toEqual([...OPAQUE[family]].sort());
    },
  );
});

describe('a leak search read over netlink', () => {
  /** The node's iptables, counting `readAt` and `saveAt`; `readAt` off for `overNetlink: false`. */
  /** A logger that keeps its debug messages in `debug`. */
  function keeping(debug: string[]) {
    const logger = {
      debug: (message: string, meta?: unknown) => {
        debug.push(message);
        if (process.env.DEBUG_META) console.log(message, JSON.stringify(meta));
      },
      info: () => undefined,
      warn: () => undefined,
      error: () => undefined,
      child: () => logger,
    };
    return logger;
  }

  /** `requestsHere`: the link's requests on the calling thread, as the CLI's `--local` opens it. */
  function iptables(
    family: Family,
    overNetlink: boolean | 'failing',
    debug: string[],
    requestsHere = false,
  ) {
    const logger = keeping(debug);
    const real = createIptables({
      family,
      netns: t.node.path,
      logger,
      ...(requestsHere
        ? { nft: (f, at) => openNftLink(f, at, { requestsOnCallingThread: true }) }
        : {}),
    });
    const calls = { readAt: 0, saveAt: 0 };
    const ipt: Iptables = {
      ...real,
      saveAt: (options) => {
        calls.saveAt++;
        return (real.saveAt as NonNullable<Iptables['saveAt']>)(options);
      },
      ...(overNetlink === false
        ? {}
        : {
            readAt: (options, call) => {
              calls.readAt++;
              // As when a table goes between the chains' dump and its rules'.
              if (overNetlink === 'failing')
                return Promise.reject(
                  new IptablesError('nf_tables GETRULE nat X failed (errno 2)', {
                    code: 'not-found',
                  }),
                );
              return (real.readAt as NonNullable<Iptables['readAt']>)(options, call);
            },
          }),
    };
    if (!overNetlink) delete (ipt as { readAt?: unknown }).readAt;
    return { ipt, calls };
  }

  async function configurator(
    overNetlink: boolean | 'failing',
    debug: string[] = [],
    requestsHere = false,
  ) {
    const v4 = iptables('ipv4', overNetlink, debug, requestsHere);
    const v6 = iptables('ipv6', overNetlink, debug, requestsHere);
    const c = await createCniConfigurator({
      runtime: createCniRuntime({ cacheDir: join(t.tmp.path, 'cache') }),
      iptables: { ipv4: v4.ipt, ipv6: v6.ipt },
      defaultNetwork: { ipamDataDir: join(t.tmp.path, 'ipam'), ipv6Subnet: 'fd00:a:b::/64' },
      logger: keeping(debug),
    });
    return { c, calls: [v4.calls, v6.calls] };
  }

  /** Leaks in the plugins' shapes and in the odd ones a crash leaves, and one live allocation. */
  async function leaks() {
    const ipt = createIptables({ netns: t.node.path });
    const ip6t = createIptables({ family: 'ipv6', netns: t.node.path });
    await ipt.restore(sharedChains());
    const ipamDir = join(t.tmp.path, 'ipam', 'nomad');
    await mkdir(ipamDir, { recursive: true });
    const batch = createBatch();
    const shape = (allocId: string, ip: string, extra: { ports?: boolean; firewall?: boolean }) =>
      addPluginShapes(batch, {
        network: 'nomad',
        allocId,
        ip,
        ...(extra.ports === true ? { ports: [{ host: 20000, container: 8080 }] } : {}),
        ...(extra.firewall === true ? { firewall: true } : {}),
      });
    // A full leak with its reservation; a netns-deleted one; a live allocation.
    shape('full', '172.26.64.2', { ports: true, firewall: true });
    await writeFile(join(ipamDir, '172.26.64.2'), 'full\r\neth0');
    shape('netns-deleted', '172.26.64.3', {});
    shape('live', '172.26.64.4', { ports: true, firewall: true });
    await writeFile(join(ipamDir, '172.26.64.4'), 'live\r\neth0');
    await ipt.restore(batch);

    const odd = createBatch();
    /** One allocation's shapes without the rules and chains `drop` names. */
    const without = (shapes: Parameters<typeof addPluginShapes>[1], drop: string) => {
      for (const op of addPluginShapes(createBatch(), shapes).ops) {
        if (op.kind === 'newChain' && op.chain !== drop) odd.newChain(op.table, op.chain);
        else if (op.kind === 'append' && op.chain !== drop && !op.spec.includes(drop))
          odd.append(op.table, op.chain, op.spec);
      }
    };
    // Portmap and the firewall, no masquerade (ipMasq off), no reservation: the firewall's address
    // is known only from the DNAT's destination, inside the CNI-DN chain.
    without(
      {
        network: 'nomad',
        allocId: 'no-masquerade',
        ip: '172.26.64.5',
        ports: [{ host: 20001, container: 8080 }],
        firewall: true,
      },
      allocChains('nomad', 'no-masquerade').masq,
    );
    // A masquerade chain whose jump is gone (its own rules carry the tag), and a DNAT chain whose
    // jump is gone (its rules carry none: an orphan).
    const jumpless = { network: 'nomad', allocId: 'jumpless', ip: '172.26.64.6' };
    for (const op of addPluginShapes(createBatch(), jumpless).ops)
      if (op.kind === 'newChain') odd.newChain(op.table, op.chain);
      else if (op.kind === 'append' && op.chain !== 'POSTROUTING')
        odd.append(op.table, op.chain, op.spec);
    const orphan = allocChains('nomad', 'orphan').dnat;
    odd.newChain('nat', orphan);
    odd.append('nat', orphan, ['-p', 'tcp', '-m', 'tcp', '--dport', '20002', '-j', 'DNAT', '--to-destination', '172.26.64.7:80']); // prettier-ignore
    // The firewall's accepts of an address no one holds.
    odd.append('filter', 'CNI-FORWARD', ['-s', '172.26.64.8/32', '-j', 'ACCEPT']);
    await ipt.restore(odd);
    // IPv6: a masquerade jump and chain, and the firewall's accepts.
    const v6 = createBatch()
      .newChain('filter', 'CNI-FORWARD')
      .newChain('nat', allocChains('nomad', 'six').masq);
    const tag = 'name: "nomad" id: "six"';
    const six = allocChains('nomad', 'six').masq;
    v6.append('nat', 'POSTROUTING', ['-s', 'fd00:a:b::9/128', '-m', 'comment', '--comment', tag, '-j', six]); // prettier-ignore
    v6.append('nat', six, ['-d', 'fd00:a:b::/64', '-m', 'comment', '--comment', tag, '-j', 'ACCEPT']); // prettier-ignore
    v6.append('filter', 'CNI-FORWARD', ['-s', 'fd00:a:b::9/128', '-j', 'ACCEPT']);
    await ip6t.restore(v6);
  }

  let made: CniConfigurator[] = [];
  afterEach(async () => {
    for (const c of made) await c.close();
    made = [];
  });

  it.each([
    ['a worker thread', false],
    ['the calling thread', true],
  ])(
    'finds what a search with iptables-save finds, without it, and reaps it all by handle (requests on %s)',
    async (_, requestsHere) => {
      await leaks();
      const debug: string[] = [];
      const overNetlink = await configurator(true, debug, requestsHere);
      const withSave = await configurator(false);
      made = [overNetlink.c, withSave.c];

      const found = await overNetlink.c.findLeaks(['live']);
      expect(found).toEqual(await withSave.c.findLeaks(['live']));
      expect(found.leaks.map((l) => l.allocId)).toEqual([
        'full',
        'jumpless',
        'netns-deleted',
        'no-masquerade',
        'six',
      ]);
      // The DNAT's destination gave the firewall's accepts their owner.
      const noMasq = found.leaks.find((l) => l.allocId === 'no-masquerade');
      expect(noMasq?.state.rules.map((r) => r.line)).toContain(
        '-A CNI-FORWARD -s 172.26.64.5/32 -j ACCEPT',
      );
      expect(found.orphans.chains.map((c) => c.chain)).toEqual([
        allocChains('nomad', 'orphan').dnat,
      ]);
      expect(found.orphans.rules.map((r) => r.line)).toEqual([
        '-A CNI-FORWARD -s 172.26.64.8/32 -j ACCEPT',
      ]);
      expect(overNetlink.calls).toEqual([
        { readAt: 1, saveAt: 0 },
        { readAt: 1, saveAt: 0 },
      ]);

      const reaped = await overNetlink.c.reapLeaks(['live']);
      expect(reaped.failed).toEqual([]);
      expect(reaped.reaped.map((l) => l.allocId)).toEqual(found.leaks.map((l) => l.allocId));
      expect(await withSave.c.findLeaks(['live'])).toEqual({
        leaks: [],
        orphans: { rules: [], chains: [], reservations: [], cacheFiles: [] },
      });
      // The live allocation's state stays.
      expect((await withSave.c.findLeaks([])).leaks.map((l) => l.allocId)).toEqual(['live']);
      // Read and removed over netlink throughout: nothing fell back to iptables-save or -restore.
      expect(debug.filter((m) => /iptables-(save|restore)/.test(m))).toEqual([]);
    },
  );

  it('reads with iptables-save when the read over netlink fails', async () => {
    await leaks();
    const debug: string[] = [];
    const failing = await configurator('failing', debug);
    const withSave = await configurator(false);
    made = [failing.c, withSave.c];

    expect(await failing.c.findLeaks(['live'])).toEqual(await withSave.c.findLeaks(['live']));
    expect(failing.calls).toEqual([
      { readAt: 1, saveAt: 1 },
      { readAt: 1, saveAt: 1 },
    ]);
    expect(debug).toContain('sweep: the read over netlink failed; using iptables-save');
  });

  it('reads with iptables-save when a rule it cannot read back is about an allocation', async () => {
    await leaks();
    // A tagged rule with an interface match, which the reader does not print.
    await createIptables({ netns: t.node.path }).append('nat', 'POSTROUTING', [
      '-o', 'eth9', '-m', 'comment', '--comment', 'name: "nomad" id: "odd"', '-j', 'ACCEPT',
    ]); // prettier-ignore
    const debug: string[] = [];
    const overNetlink = await configurator(true, debug);
    const withSave = await configurator(false);
    made = [overNetlink.c, withSave.c];

    const found = await overNetlink.c.findLeaks(['live']);
    expect(found).toEqual(await withSave.c.findLeaks(['live']));
    expect(found.leaks.map((l) => l.allocId)).toContain('odd');
    expect(overNetlink.calls[0]).toEqual({ readAt: 1, saveAt: 1 });
    expect(debug).toContain(
      'sweep: a rule read over netlink could not be read back; using iptables-save',
    );
  });
});
