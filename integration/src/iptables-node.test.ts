// @allocnet/iptables-node against real iptables (nf_tables backend) inside throwaway namespaces.
// Needs root. Every test makes its own node namespace and removes it; nothing runs in the root
// namespace (the test command checks that the root iptables-save output did not change).
import { readlink } from 'node:fs/promises';
import {
  createBatch,
  createIptables,
  createSpawnExec,
  isIptablesError,
  openNftLink,
} from '@allocnet/iptables-node';
import type {
  CommandExec,
  Iptables,
  IptablesBatch,
  IptablesError,
  NftOp,
  PlacedRule,
  Rule,
  RuleHandles,
  SavedTable,
} from '@allocnet/iptables-node';
import { addBridgeMasquerade, bridgeChainName, plainRules } from '@allocnet/iptables-node/testing';
import { createNetnsLab, requireNetworkTestHost } from '@allocnet/testns';
import type { NetnsLab, TestNetns } from '@allocnet/testns';

const ID = '6b235529-8111-4bbe-520b-d639b1d2a94e';
const OTHER_ID = '0f0e0d0c-0000-4000-8000-00000000abcd';
const COMMENT = `name: "nomad" id: "${ID}"`;
// The bridge plugin's masquerade chain for network "nomad" and this id (sha512 of "nomad" + id).
const CHAIN = 'CNI-50e58ea77dc52e0c731e3799';

let lab: NetnsLab;
let node: TestNetns;

beforeAll(async () => {
  await requireNetworkTestHost();
});

beforeEach(async () => {
  lab = createNetnsLab();
  node = await lab.node();
});

afterEach(async () => {
  await lab.dispose();
});

/** A real exec that also records the argv of every process it starts. */
function countingExec(): CommandExec & { readonly argv: string[][] } {
  const real = createSpawnExec();
  const argv: string[][] = [];
  return {
    argv,
    run(spec) {
      argv.push([spec.file, ...spec.args]);
      return real.run(spec);
    },
  };
}

/**
 * The whole ruleset of the node namespace, without header lines and counters, and without tables
 * that hold nothing: iptables-nft makes a table's built-in chains the first time anything touches
 * the table and cannot remove them again, and such a table (no rules, no user chains, every
 * policy ACCEPT) filters exactly like no table.
 */
async function ruleset(ns: TestNetns = node): Promise<string> {
  const v4 = (await ns.exec(['iptables-save'])).stdout;
  const v6 = (await ns.exec(['ip6tables-save'])).stdout;
  const blocks = `${v4}${v6}`
    .split('\n')
    .filter((line) => !line.startsWith('#'))
    .map((line) => line.replace(/\[\d+:\d+\]/, '[0:0]'))
    .join('\n')
    .split(/(?<=^COMMIT)\n/m);
  const empty = (block: string) =>
    block
      .split('\n')
      .filter((l) => l !== '' && l !== 'COMMIT' && !l.startsWith('*'))
      .every((l) => /^:\S+ ACCEPT \[0:0\]$/.test(l));
  return blocks.filter((block) => !empty(block)).join('\n');
}

async function caught(promise: Promise<unknown>): Promise<IptablesError> {
  try {
    await promise;
  } catch (error) {
    if (isIptablesError(error)) return error;
    throw error;
  }
  throw new Error('expected an IptablesError');
}

/** What the bridge plugin (ipMasq) leaves for one allocation: a jump with the comment, and a chain. */
async function addMasquerade(ipt: Iptables, ip: string, id: string): Promise<void> {
  await ipt.restore(addBridgeMasquerade(createBatch(), { network: 'nomad', id, ip }));
}

describe('rules in the shape the bridge plugin writes', () => {
  it('are written, parsed from iptables-save, and deleted by one batch, leaving the neighbour alone', async () => {
    const ipt = createIptables({ netns: node.path });
    await addMasquerade(ipt, '172.26.64.2', ID);
    await addMasquerade(ipt, '172.26.64.3', OTHER_ID);
    const otherChain = bridgeChainName('nomad', OTHER_ID);

    const saved = (await node.exec(['iptables-save', '-t', 'nat'])).stdout;
    expect(saved).toContain(
      `-A POSTROUTING -s 172.26.64.2/32 -m comment --comment "name: \\"nomad\\" id: \\"${ID}\\"" -j ${CHAIN}\n`,
    );

    const [nat] = await ipt.save({ table: 'nat' });
    const tagged = nat?.rules.filter((r) => r.comment === COMMENT) ?? [];
    expect(tagged.map((r) => r.chain)).toEqual(['POSTROUTING', CHAIN, CHAIN]);
    expect(plainRules(tagged[0])).toEqual({
      table: 'nat',
      chain: 'POSTROUTING',
      spec: ['-s', '172.26.64.2/32', '-m', 'comment', '--comment', COMMENT, '-j', CHAIN],
      matches: [
        {
          module: undefined,
          options: [{ option: '-s', negated: false, values: ['172.26.64.2/32'] }],
        },
        {
          module: 'comment',
          options: [{ option: '--comment', negated: false, values: [COMMENT] }],
        },
      ],
      comment: COMMENT,
      target: { name: CHAIN, goto: false, options: [] },
    });
    expect(tagged[2]?.matches[0]?.options[0]).toEqual({
      option: '-d',
      negated: true,
      values: ['224.0.0.0/4'],
    });

    const jump = tagged[0] as Rule;
    await ipt.restore(
      createBatch().deleteRule(jump).clearChain('nat', CHAIN).deleteChain('nat', CHAIN),
    );

    const after = (await node.exec(['iptables-save', '-t', 'nat'])).stdout;
    expect(after).not.toContain(ID);
    expect(after).not.toContain(CHAIN);
    expect(after.split('\n').filter((l) => l.includes(OTHER_ID))).toHaveLength(3);
    await expect(ipt.chainExists('nat', CHAIN)).resolves.toBe(false);
    await expect(ipt.chainExists('nat', otherChain)).resolves.toBe(true);
  });

  it('a parsed rule given back deletes exactly that rule, whatever its comment holds', async () => {
    const ipt = createIptables({ netns: node.path });
    const comments = [
      COMMENT,
      `dnat ${COMMENT}`,
      "it's a \\back 'q' -t x",
      '',
      '-test',
      'tab\there',
      'uni ñ $x `y` ;&|',
      '"',
      '\\',
    ];
    await ipt.newChain('filter', 'T');
    for (const comment of comments) {
      await ipt.append('filter', 'T', ['-m', 'comment', '--comment', comment, '-j', 'ACCEPT']);
    }
    const original = (await ipt.listRules('filter', 'T')).map((r) => r.comment);
    expect(original).toEqual(comments);

    for (const [i, comment] of comments.entries()) {
      const rules = await ipt.listRules('filter', 'T');
      const rule = rules.find((r) => r.comment === comment) as Rule;
      // Alternate the two ways a parsed rule goes back: a restore batch and one iptables -D.
      if (i % 2 === 0) await ipt.restore(createBatch().deleteRule(rule));
      else await ipt.delete(rule.table, rule.chain, rule.spec);
      expect((await ipt.listRules('filter', 'T')).map((r) => r.comment)).toEqual(
        comments.slice(i + 1),
      );
    }
  });

  it('a comment with a line break reads back whole and goes with Iptables.delete', async () => {
    const ipt = createIptables({ netns: node.path });
    await ipt.newChain('filter', 'T');
    await ipt.append('filter', 'T', ['-m', 'comment', '--comment', 'a\nb', '-j', 'ACCEPT']);
    await ipt.append('filter', 'T', ['-j', 'DROP']);
    const [filter] = await ipt.save({ table: 'filter' });
    const rule = filter?.rules.find((r) => r.comment === 'a\nb') as Rule;
    expect(rule.spec).toEqual(['-m', 'comment', '--comment', 'a\nb', '-j', 'ACCEPT']);
    expect(() => createBatch().deleteRule(rule)).toThrow('spec[3] holds a line break');
    await ipt.delete(rule.table, rule.chain, rule.spec);
    expect((await ipt.listRules('filter', 'T')).map((r) => r.spec)).toEqual([['-j', 'DROP']]);
  });
});

describe('restore batches', () => {
  it('applies 500 rules in one iptables-restore, and removes them all in another', async () => {
    const exec = countingExec();
    const ipt = createIptables({ netns: node.path, exec });
    const before = await ruleset();

    const add = createBatch();
    const remove = createBatch();
    for (let i = 0; i < 100; i++) {
      const chain = `CNI-${i.toString(16).padStart(24, '0')}`;
      const id = `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`;
      const comment = `name: "nomad" id: "${id}"`;
      const ip = `172.26.${64 + Math.floor(i / 250)}.${(i % 250) + 2}/32`;
      add.newChain('nat', chain);
      add.append('nat', chain, [
        '-d',
        '172.26.64.0/20',
        '-m',
        'comment',
        '--comment',
        comment,
        '-j',
        'ACCEPT',
      ]);
      add.append('nat', chain, [
        '!',
        '-d',
        '224.0.0.0/4',
        '-m',
        'comment',
        '--comment',
        comment,
        '-j',
        'MASQUERADE',
      ]);
      add.append('nat', 'POSTROUTING', [
        '-s',
        ip,
        '-m',
        'comment',
        '--comment',
        comment,
        '-j',
        chain,
      ]);
      remove.delete('nat', 'POSTROUTING', [
        '-s',
        ip,
        '-m',
        'comment',
        '--comment',
        comment,
        '-j',
        chain,
      ]);
      remove.clearChain('nat', chain).deleteChain('nat', chain);
      add.append('filter', 'FORWARD', [
        '-d',
        ip,
        '-m',
        'conntrack',
        '--ctstate',
        'RELATED,ESTABLISHED',
        '-j',
        'ACCEPT',
      ]);
      add.append('filter', 'FORWARD', ['-s', ip, '-j', 'ACCEPT']);
      remove.delete('filter', 'FORWARD', [
        '-d',
        ip,
        '-m',
        'conntrack',
        '--ctstate',
        'RELATED,ESTABLISHED',
        '-j',
        'ACCEPT',
      ]);
      remove.delete('filter', 'FORWARD', ['-s', ip, '-j', 'ACCEPT']);
    }
    await ipt.restore(add);
    // One restore for all 500 rules (and 100 chains), after one iptables-save per table: the
    // snapshot that would put a committed table back if a later one failed.
    expect(exec.argv.map((a) => a.slice(3).join(' '))).toEqual([
      'iptables-save -t nat',
      'iptables-save -t filter',
      'iptables-restore --noflush --wait',
    ]);

    const tables = await ipt.save();
    const count = (name: string) => tables.find((t) => t.name === name)?.rules.length;
    expect(count('nat')).toBe(300);
    expect(count('filter')).toBe(200);

    exec.argv.length = 0;
    await ipt.restore(remove);
    expect(exec.argv.filter((a) => a[3] === 'iptables-restore')).toHaveLength(1);
    expect(await ruleset()).toBe(before);
  });

  describe('a batch with one bad line leaves every table exactly as before', () => {
    // A node that already holds some state: the firewall and portmap base chains, one allocation.
    async function populated() {
      const ipt = createIptables({ netns: node.path });
      await ipt.newChain('filter', 'CNI-FORWARD');
      await ipt.append('filter', 'FORWARD', [
        '-m',
        'comment',
        '--comment',
        'CNI firewall plugin rules',
        '-j',
        'CNI-FORWARD',
      ]);
      await ipt.append('filter', 'CNI-FORWARD', ['-d', '172.26.64.2/32', '-j', 'ACCEPT']);
      await ipt.append('filter', 'CNI-FORWARD', ['-s', '172.26.64.2/32', '-j', 'ACCEPT']);
      await ipt.append('filter', 'CNI-FORWARD', ['-j', 'RETURN']);
      await addMasquerade(ipt, '172.26.64.2', ID);
      return ipt;
    }

    const cases: [string, (b: IptablesBatch) => IptablesBatch, IptablesError['code'], number][] = [
      [
        'filter changes commit, then a nat line names a rule that is not there',
        (b) =>
          b
            .newChain('filter', 'NOMAD-ADMIN')
            .insert('filter', 'FORWARD', ['-j', 'NOMAD-ADMIN'], 1)
            .delete('filter', 'CNI-FORWARD', ['-s', '172.26.64.2/32', '-j', 'ACCEPT'])
            .delete('nat', 'POSTROUTING', ['-s', '9.9.9.9/32', '-j', 'ACCEPT']),
        'not-found',
        7,
      ],
      [
        'filter loses a chain and its jump, then nat fails in the kernel (chain still referenced)',
        (b) =>
          b
            .delete('filter', 'FORWARD', [
              '-m',
              'comment',
              '--comment',
              'CNI firewall plugin rules',
              '-j',
              'CNI-FORWARD',
            ])
            .clearChain('filter', 'CNI-FORWARD')
            .deleteChain('filter', 'CNI-FORWARD')
            .clearChain('nat', CHAIN)
            .deleteChain('nat', CHAIN),
        'in-use',
        8,
      ],
      [
        'the bad line is the first of the first table',
        (b) => b.newChain('nat', CHAIN).append('filter', 'FORWARD', ['-j', 'ACCEPT']),
        'already-exists',
        2,
      ],
      [
        'three tables, a rule iptables refuses in the last',
        (b) =>
          b
            .append('nat', 'POSTROUTING', ['-s', '172.26.64.9/32', '-j', 'MASQUERADE'])
            .append('mangle', 'PREROUTING', ['-j', 'ACCEPT'])
            .append('filter', 'INPUT', ['-s', '300.1.1.1', '-j', 'ACCEPT']),
        'bad-rule',
        8,
      ],
    ];

    it.each(cases)('%s', async (_name, build, code, line) => {
      const ipt = await populated();
      const before = await ruleset();
      const error = await caught(ipt.restore(build(createBatch())));
      expect(error.code).toBe(code);
      expect(error.line).toBe(line);
      expect(error.message).toMatch(
        /^iptables-restore --noflush --wait at line \d+ \(-t \w+ .*\) \(in netns \/run\/netns\/ant-|^iptables-restore --noflush --wait \(in netns /,
      );
      expect(await ruleset()).toBe(before);
    });
  });
});

describe('commands against real iptables', () => {
  it('lists, checks, inserts at a position, and reports each kind of failure', async () => {
    const ipt = createIptables({ netns: node.path });
    await ipt.newChain('filter', 'A');
    await ipt.append('filter', 'A', ['-s', '10.0.0.1/32', '-j', 'ACCEPT']);
    await ipt.append('filter', 'A', ['-s', '10.0.0.3/32', '-j', 'ACCEPT']);
    await ipt.insert('filter', 'A', ['-s', '10.0.0.2/32', '-j', 'ACCEPT'], { position: 2 });
    await ipt.insert('filter', 'INPUT', ['-j', 'A']);
    expect((await ipt.listRules('filter', 'A')).map((r) => r.spec[1])).toEqual([
      '10.0.0.1/32',
      '10.0.0.2/32',
      '10.0.0.3/32',
    ]);
    expect((await ipt.listChains('filter')).map((c) => [c.name, c.policy])).toEqual([
      ['INPUT', 'ACCEPT'],
      ['FORWARD', 'ACCEPT'],
      ['OUTPUT', 'ACCEPT'],
      ['A', undefined],
    ]);
    await expect(
      ipt.ruleExists('filter', 'A', ['-s', '10.0.0.2/32', '-j', 'ACCEPT']),
    ).resolves.toBe(true);
    await expect(
      ipt.ruleExists('filter', 'A', ['-s', '10.0.0.9/32', '-j', 'ACCEPT']),
    ).resolves.toBe(false);
    await expect(ipt.ruleExists('filter', 'MISSING', ['-j', 'ACCEPT'])).resolves.toBe(false);
    await expect(ipt.chainExists('filter', 'A')).resolves.toBe(true);
    await expect(ipt.chainExists('filter', 'MISSING')).resolves.toBe(false);

    const where = `(in netns ${node.path})`;
    expect(await caught(ipt.newChain('filter', 'A'))).toMatchObject({
      code: 'already-exists',
      exitCode: 1,
      message: `iptables --wait -t filter -N A ${where} failed (exit status 1): iptables: Chain already exists.`,
    });
    expect(
      await caught(ipt.delete('filter', 'A', ['-s', '10.0.0.9/32', '-j', 'ACCEPT'])),
    ).toMatchObject({
      code: 'not-found',
      message: `iptables --wait -t filter -D A -s 10.0.0.9/32 -j ACCEPT ${where} failed (exit status 1): iptables: Bad rule (does a matching rule exist in that chain?).`,
    });
    expect(await caught(ipt.clearChain('filter', 'MISSING'))).toMatchObject({
      code: 'not-found',
      message: `iptables --wait -t filter -F MISSING ${where} failed (exit status 1): iptables: No chain/target/match by that name.`,
    });
    expect(await caught(ipt.deleteChain('filter', 'A'))).toMatchObject({
      code: 'in-use',
      exitCode: 4,
      message: `iptables --wait -t filter -X A ${where} failed (exit status 4): iptables v1.8.9 (nf_tables):  CHAIN_DEL failed (Device or resource busy): chain A`,
    });
    expect(await caught(ipt.append('filter', 'A', ['--bogus']))).toMatchObject({
      code: 'bad-rule',
      exitCode: 2,
    });
    expect(
      await caught(ipt.insert('filter', 'A', ['-j', 'ACCEPT'], { position: 9 })),
    ).toMatchObject({ code: 'bad-rule' });

    await ipt.delete('filter', 'INPUT', ['-j', 'A']);
    await expect(ipt.clearAndDeleteChain('filter', 'A')).resolves.toBe(true);
    await expect(ipt.clearAndDeleteChain('filter', 'A')).resolves.toBe(false);
  });

  it('reports a missing permission as permission', async () => {
    const real = createSpawnExec();
    const unprivileged: CommandExec = {
      run: (spec) =>
        real.run({
          ...spec,
          file: 'setpriv',
          args: ['--reuid=65534', '--regid=65534', '--clear-groups', '--', spec.file, ...spec.args],
        }),
    };
    const ipt = createIptables({ netns: node.path, exec: unprivileged });
    expect(await caught(ipt.listChains('filter'))).toMatchObject({ code: 'permission' });
  });

  it('does the same for IPv6 with ip6tables, leaving IPv4 alone', async () => {
    const ip6 = createIptables({ netns: node.path, family: 'ipv6' });
    const ip4 = createIptables({ netns: node.path });
    const comment = `name: "nomad" id: "${ID}"`;
    await ip6.newChain('nat', CHAIN);
    await ip6.append('nat', CHAIN, [
      '-d',
      'fd00:a:b::/64',
      '-m',
      'comment',
      '--comment',
      comment,
      '-j',
      'ACCEPT',
    ]);
    await ip6.append('nat', 'POSTROUTING', [
      '-s',
      'fd00:a:b::2/128',
      '-m',
      'comment',
      '--comment',
      comment,
      '-j',
      CHAIN,
    ]);
    const v4before = (await node.exec(['iptables-save'])).stdout.replace(/^#.*\n/gm, '');

    const [nat] = await ip6.save({ table: 'nat' });
    const tagged = nat?.rules.filter((r) => r.comment === comment) ?? [];
    expect(tagged.map((r) => [r.chain, r.spec[1]])).toEqual([
      ['POSTROUTING', 'fd00:a:b::2/128'],
      [CHAIN, 'fd00:a:b::/64'],
    ]);
    await ip6.restore(
      createBatch()
        .deleteRule(tagged[0] as Rule)
        .clearChain('nat', CHAIN)
        .deleteChain('nat', CHAIN),
    );
    expect((await node.exec(['ip6tables-save', '-t', 'nat'])).stdout).not.toContain(ID);
    await expect(ip4.chainExists('nat', CHAIN)).resolves.toBe(false);
    expect((await node.exec(['iptables-save'])).stdout.replace(/^#.*\n/gm, '')).toBe(v4before);
  });
});

describe('removal by rule handle (nf_tables, nft.ts)', () => {
  const THIRD_ID = '0f0e0d0c-0000-4000-8000-00000000ef01';

  /** The POSTROUTING jump of `id`, with its place, out of a saveAt of nat. */
  function jumpOf(nat: SavedTable | undefined, id: string): PlacedRule {
    const i = nat?.rules.findIndex((r) => r.chain === 'POSTROUTING' && r.comment?.includes(id));
    const rule = i === undefined || i < 0 ? undefined : nat?.rules[i];
    const position = i === undefined ? undefined : nat?.places?.positions[i];
    const chainSize = nat?.places?.sizes.get('POSTROUTING');
    if (rule === undefined || position === undefined || chainSize === undefined)
      throw new Error(`no placed POSTROUTING jump for ${id}`);
    return { rule, position, chainSize };
  }

  it('removes placed rules and chains in one transaction, and a second removal out of the same save goes on from the first', async () => {
    const ipt = createIptables({ netns: node.path });
    await addMasquerade(ipt, '172.26.64.2', ID);
    await addMasquerade(ipt, '172.26.64.3', OTHER_ID);
    await addMasquerade(ipt, '172.26.64.4', THIRD_ID);
    const saved = await ipt.saveAt?.({ table: 'nat' });
    const generation = saved?.generation;
    if (generation === undefined) throw new Error('saveAt read no generation on nf_tables');
    const nat = saved?.tables[0];

    const next = await ipt.removeAt?.(
      { generation, lists: new Map() },
      { rules: [jumpOf(nat, ID)], chains: [{ table: 'nat', chain: CHAIN }] },
    );
    expect(next?.generation).toBe(generation + 1);
    let now = (await node.exec(['iptables-save', '-t', 'nat'])).stdout;
    expect(now).not.toContain(ID);
    expect(now).not.toContain(CHAIN);
    expect(now).toContain(THIRD_ID);

    // The third's jump is at its place in the save (third of three), not in today's chain.
    const third = bridgeChainName('nomad', THIRD_ID);
    await ipt.removeAt?.(next as RuleHandles, {
      rules: [jumpOf(nat, THIRD_ID)],
      chains: [{ table: 'nat', chain: third }],
    });
    now = (await node.exec(['iptables-save', '-t', 'nat'])).stdout;
    expect(now).not.toContain(THIRD_ID);
    expect(now.split('\n').filter((l) => l.includes(OTHER_ID))).toHaveLength(3);
  });

  it('searchRules says a chain that is not there is not there, and an empty one is (the kernel dumps both as empty)', async () => {
    const ipt = createIptables({ netns: node.path });
    await addMasquerade(ipt, '172.26.64.2', ID);
    await ipt.newChain('nat', 'CNI-EMPTY-ONE');
    expect(
      await ipt.searchRules?.([
        { table: 'nat', chain: 'POSTROUTING', needles: [Buffer.from(ID), Buffer.from('nowhere')] },
        { table: 'nat', chain: 'CNI-NOT-THERE', needles: [Buffer.from(ID)] },
        { table: 'nat', chain: 'CNI-EMPTY-ONE', needles: [Buffer.from(ID)] },
        { table: 'mangle', chain: 'CNI-NOT-THERE', needles: [] },
      ]),
    ).toEqual([
      { exists: true, found: [true, false] },
      { exists: false },
      { exists: true, found: [false] },
      { exists: false },
    ]);
  });

  it('searchRules reads a chain again only after a change that is not a write of its own', async () => {
    let dumps = 0;
    const ipt = createIptables({
      netns: node.path,
      nft: (family, netns) => {
        const link = openNftLink(family, netns);
        const rules: typeof link.rules = (...args) => {
          dumps++;
          return link.rules(...args);
        };
        return {
          ...link,
          rules,
          generation: () => link.generation(),
          chainExists: (table, chain) => link.chainExists(table, chain),
          close: () => {
            link.close();
          },
        };
      },
    });
    const bytes = (ip: string) => Buffer.from(ip.split('.').map(Number));
    const needleOf = (spec: readonly string[]) => bytes((spec[1] ?? '').split('/')[0] ?? '');
    await ipt.restore(
      createBatch()
        .declareChain('filter', 'CNI-FORWARD')
        .append('filter', 'CNI-FORWARD', ['-s', '10.0.0.2/32', '-j', 'ACCEPT']),
    );
    const search = [
      { table: 'filter' as const, chain: 'CNI-FORWARD', needles: [bytes('10.0.0.2'), bytes('10.0.0.7')] },
    ]; // prettier-ignore
    expect(await ipt.searchRules?.(search)).toEqual([{ exists: true, found: [true, false] }]);
    expect(dumps).toBe(1);

    // A write over two tables: iptables-restore commits each, and nothing else ran.
    const batch = createBatch()
      .append('filter', 'CNI-FORWARD', ['-s', '10.0.0.7/32', '-j', 'ACCEPT'])
      .append('nat', 'POSTROUTING', ['-s', '10.0.0.7/32', '-j', 'ACCEPT']);
    await ipt.writeKeepingSearches?.(batch, needleOf, () => ipt.restore(batch, { perTable: true }));
    expect(await ipt.searchRules?.(search)).toEqual([{ exists: true, found: [true, true] }]);
    expect(dumps).toBe(1);
    // What a fresh reader finds.
    expect(await createIptables({ netns: node.path }).searchRules?.(search)).toEqual([
      { exists: true, found: [true, true] },
    ]);

    // Someone else's change: read again.
    await node.exec(['iptables', '-D', 'CNI-FORWARD', '-s', '10.0.0.7/32', '-j', 'ACCEPT']);
    expect(await ipt.searchRules?.(search)).toEqual([{ exists: true, found: [true, false] }]);
    expect(dumps).toBe(2);
  });

  it('removeJumped removes the jumps to a chain and the chain in one transaction, and leaves a chain no jump leads to and its neighbours alone', async () => {
    const ipt = createIptables({ netns: node.path });
    await addMasquerade(ipt, '172.26.64.2', ID);
    await addMasquerade(ipt, '172.26.64.3', OTHER_ID);
    await ipt.newChain('nat', 'CNI-DN-NO-JUMP');
    const before = await node.exec(['iptables-save', '-t', 'nat']);
    expect(before.stdout).toContain(`-j ${CHAIN}`);
    expect(
      await ipt.removeJumped?.([
        { table: 'nat', from: 'POSTROUTING', chain: CHAIN },
        { table: 'nat', from: 'CNI-HOSTPORT-DNAT', chain: 'CNI-DN-NO-JUMP' },
      ]),
    ).toEqual([CHAIN]);
    const now = (await node.exec(['iptables-save', '-t', 'nat'])).stdout;
    expect(now).not.toContain(ID);
    expect(now).not.toContain(CHAIN);
    expect(now).toContain(':CNI-DN-NO-JUMP');
    expect(now.split('\n').filter((l) => l.includes(OTHER_ID))).toHaveLength(3);
    // Nothing left to find: nothing removed, nothing committed.
    expect(await ipt.removeJumped?.([{ table: 'nat', from: 'POSTROUTING', chain: CHAIN }])).toEqual(
      [],
    );
  });

  /** The firewall plugin's two accepts of an address (`host`: with its /32 or /128). */
  const accepts = (host: string) => [
    ['-d', host, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', 'ACCEPT'],
    ['-s', host, '-j', 'ACCEPT'],
  ];

  it('removeAccepts removes the first of each of an address’s two firewall accepts, in both families, and leaves every other rule alone', async () => {
    const families = [
      { ipt: createIptables({ netns: node.path }), mine: '10.9.0.2', other: '10.9.0.20', bits: 32 },
      { ipt: createIptables({ netns: node.path, family: 'ipv6' }), mine: 'fd00::2', other: 'fd00::20', bits: 128 },
    ]; // prettier-ignore
    for (const { ipt, mine, other, bits } of families) {
      await ipt.newChain('filter', 'CNI-FORWARD');
      await ipt.newChain('filter', 'CNI-ADMIN');
      await ipt.append('filter', 'CNI-FORWARD', ['-j', 'CNI-ADMIN']);
      for (const spec of [...accepts(`${other}/${bits}`), ...accepts(`${mine}/${bits}`)])
        await ipt.append('filter', 'CNI-FORWARD', spec);
      // A second copy of one: `iptables -D` removes the first only.
      await ipt.append('filter', 'CNI-FORWARD', ['-s', `${mine}/${bits}`, '-j', 'ACCEPT']);
    }
    const bytes = (a: string) =>
      Buffer.from(a.includes(':') ? [0xfd, ...Array<number>(14).fill(0), 2] : [10, 9, 0, 2]);
    for (const { ipt, mine } of families)
      expect(
        await ipt.removeAccepts?.({
          table: 'filter',
          chain: 'CNI-FORWARD',
          addresses: [bytes(mine)],
        }),
      ).toEqual({ removed: 2, left: 1 }); // the copy stays
    for (const [save, mine, other, bits] of [
      ['iptables-save', '10.9.0.2', '10.9.0.20', 32],
      ['ip6tables-save', 'fd00::2', 'fd00::20', 128],
    ] as const) {
      const forward = (await node.exec([save, '-t', 'filter'])).stdout
        .split('\n')
        .filter((l) => l.startsWith('-A CNI-FORWARD'));
      expect(forward).toEqual([
        '-A CNI-FORWARD -j CNI-ADMIN',
        ...accepts(`${other}/${bits}`).map((spec) => `-A CNI-FORWARD ${spec.join(' ')}`),
        `-A CNI-FORWARD -s ${mine}/${bits} -j ACCEPT`,
      ]);
    }
    // The copy goes next; then nothing is left to remove.
    const v4 = families[0]?.ipt;
    const removal = {
      table: 'filter' as const,
      chain: 'CNI-FORWARD',
      addresses: [bytes('10.9.0.2')],
    };
    expect(await v4?.removeAccepts?.(removal)).toEqual({ removed: 1, left: 0 });
    expect(await v4?.removeAccepts?.(removal)).toEqual({ removed: 0, left: 0 });
  });

  it('removeAccepts removes nothing and is undefined when a rule holding the address is not one of the accepts', async () => {
    const ipt = createIptables({ netns: node.path });
    const removal = {
      table: 'filter' as const,
      chain: 'CNI-FORWARD',
      addresses: [Buffer.from([10, 9, 0, 2])],
    };
    // No chain, no table: nothing to remove.
    expect(await ipt.removeAccepts?.(removal)).toEqual({ removed: 0, left: 0 });
    await ipt.newChain('filter', 'CNI-FORWARD');
    for (const spec of accepts('10.9.0.2/32')) await ipt.append('filter', 'CNI-FORWARD', spec);
    const lookalikes = [
      ['-s', '10.9.0.2/32', '-p', 'tcp', '-j', 'ACCEPT'],
      ['-s', '10.9.0.2/32', '-j', 'DROP'],
      ['-s', '10.9.0.2/32', '-m', 'comment', '--comment', 'mine', '-j', 'ACCEPT'],
      ['-d', '10.9.0.2/32', '-m', 'conntrack', '--ctstate', 'ESTABLISHED', '-j', 'ACCEPT'],
      ['-s', '10.9.0.2/32', '-d', '10.9.0.3/32', '-j', 'ACCEPT'],
    ]; // prettier-ignore
    for (const spec of lookalikes) {
      await ipt.append('filter', 'CNI-FORWARD', spec);
      const before = await ruleset();
      expect([spec.join(' '), await ipt.removeAccepts?.(removal)]).toEqual([
        spec.join(' '),
        undefined,
      ]);
      expect(await ruleset()).toBe(before);
      await ipt.delete('filter', 'CNI-FORWARD', spec);
    }
    // A plain accept of the destination is an accept, not one of the firewall's: it stays.
    await ipt.append('filter', 'CNI-FORWARD', ['-d', '10.9.0.2/32', '-j', 'ACCEPT']);
    expect(await ipt.removeAccepts?.(removal)).toEqual({ removed: 2, left: 1 });
    const forward = (await node.exec(['iptables-save', '-t', 'filter'])).stdout
      .split('\n')
      .filter((l) => l.startsWith('-A CNI-FORWARD'));
    expect(forward).toEqual(['-A CNI-FORWARD -d 10.9.0.2/32 -j ACCEPT']);
  });

  it('removes nothing and says changed when the ruleset moved on after the save', async () => {
    const ipt = createIptables({ netns: node.path });
    await addMasquerade(ipt, '172.26.64.2', ID);
    const saved = await ipt.saveAt?.({ table: 'nat' });
    // Someone else's rule, in another table: any commit moves the generation on.
    await ipt.append('filter', 'INPUT', ['-s', '10.1.2.3/32', '-j', 'ACCEPT']);
    const before = await ruleset();
    const error = await caught(
      ipt.removeAt?.(
        { generation: saved?.generation ?? -1, lists: new Map() },
        { rules: [jumpOf(saved?.tables[0], ID)], chains: [{ table: 'nat', chain: CHAIN }] },
      ) ?? Promise.resolve(),
    );
    expect(error.code).toBe('changed');
    expect(await ruleset()).toBe(before);
  });

  it('removes nothing and says changed when the rule at the place is not the saved one', async () => {
    const ipt = createIptables({ netns: node.path });
    await addMasquerade(ipt, '172.26.64.2', ID);
    await addMasquerade(ipt, '172.26.64.3', OTHER_ID);
    const saved = await ipt.saveAt?.({ table: 'nat' });
    const nat = saved?.tables[0];
    const before = await ruleset();
    // ID's rule at OTHER_ID's place.
    const error = await caught(
      ipt.removeAt?.(
        { generation: saved?.generation ?? -1, lists: new Map() },
        { rules: [{ ...jumpOf(nat, ID), position: jumpOf(nat, OTHER_ID).position }], chains: [] },
      ) ?? Promise.resolve(),
    );
    expect(error.code).toBe('changed');
    expect(error.message).toContain('is not the saved one');
    expect(await ruleset()).toBe(before);
  });

  it('the kernel refuses a batch of a past generation (ERESTART), or with a change it cannot make wherever it is, whole; the thread stays in its own namespace', async () => {
    const ipt = createIptables({ netns: node.path });
    await addMasquerade(ipt, '172.26.64.2', ID);
    const home = await readlink('/proc/thread-self/ns/net');
    const link = openNftLink('ipv4', node.path);
    try {
      expect(await readlink('/proc/thread-self/ns/net')).toBe(home);
      const past = await link.generation();
      const [jump] = await link.rules('nat', 'POSTROUTING');
      await ipt.append('filter', 'INPUT', ['-s', '10.1.2.3/32', '-j', 'ACCEPT']);
      const before = await ruleset();
      const ops: NftOp[] = [
        { kind: 'deleteRule', table: 'nat', chain: 'POSTROUTING', handle: jump ?? -1n },
        { kind: 'flushChain', table: 'nat', chain: CHAIN },
        { kind: 'deleteChain', table: 'nat', chain: CHAIN },
      ];
      let refused: unknown;
      try {
        await link.commit(past, ops);
      } catch (error) {
        refused = error;
      }
      expect(isIptablesError(refused) && refused.code).toBe('changed');
      expect(await ruleset()).toBe(before);
      // The same batch at today's generation goes through.
      const now = await link.generation();
      expect(await link.commit(now, ops)).toBe(now + 1);
      expect(await ruleset()).not.toContain(ID);
      // A change the kernel refuses (a chain that is not there) takes the whole batch back.
      await addMasquerade(ipt, '172.26.64.2', ID);
      const whole = await ruleset();
      const [again] = await link.rules('nat', 'POSTROUTING');
      let missing: unknown;
      try {
        await link.commit(await link.generation(), [
          { kind: 'deleteRule', table: 'nat', chain: 'POSTROUTING', handle: again ?? -1n },
          { kind: 'deleteChain', table: 'nat', chain: 'CNI-NOT-THERE' },
        ]);
      } catch (error) {
        missing = error;
      }
      expect(isIptablesError(missing) && missing.code).toBe('not-found');
      expect(await ruleset()).toBe(whole);
      // Refused in the middle: the kernel still answers the last change (no wait for the
      // receive timeout), names the one it refused, and applies nothing.
      const started = performance.now();
      missing = undefined;
      try {
        await link.commit(await link.generation(), [
          { kind: 'deleteChain', table: 'nat', chain: 'CNI-NOT-THERE' },
          { kind: 'deleteRule', table: 'nat', chain: 'POSTROUTING', handle: again ?? -1n },
        ]);
      } catch (error) {
        missing = error;
      }
      expect(isIptablesError(missing) && missing.code).toBe('not-found');
      expect(isIptablesError(missing) && missing.message).toContain('batch change 1 failed');
      expect(performance.now() - started).toBeLessThan(5_000);
      expect(await ruleset()).toBe(whole);
    } finally {
      link.close();
    }
  });
});
