// `Iptables` through `createIptables` against the recording exec: exact argv, stdin and error
// messages for every method, restore's put-back of a multi-table batch included. It reads better
// whole than split by module (iptables, commands, restore): every test goes through the facade
// with the one `setup` below. The parsers and the rollback are tested beside their modules.
import { createBatch } from './batch.js';
import { IptablesError, isIptablesError } from './errors.js';
import { createIptables } from './iptables.js';
import type { IptablesOptions, PlacedRule, RuleHandles } from './iptables.js';
import type { Logger } from './logger.js';
import type { NftLink, NftOp } from './nft.js';
import { removalBatch } from './nft-messages.js';
import type { Rule } from './rule.js';
import type { SavedTable } from './save.js';
import { createRecordingExec, exit, ok } from './testing/index.js';

const COMMENT = 'name: "nomad" id: "6b235529-8111-4bbe-520b-d639b1d2a94e"';
const MASQ = [
  '-s',
  '172.26.64.2/32',
  '-m',
  'comment',
  '--comment',
  COMMENT,
  '-j',
  'CNI-50e58ea77dc52e0c731e3799',
];

function setup(options: Omit<IptablesOptions, 'exec'> = {}) {
  const exec = createRecordingExec();
  return { exec, ipt: createIptables({ ...options, exec }) };
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

describe('argv', () => {
  it('runs each command with --wait and the table, rule spec as separate arguments', async () => {
    const { exec, ipt } = setup();
    await ipt.append('nat', 'POSTROUTING', MASQ);
    await ipt.insert('filter', 'FORWARD', ['-j', 'CNI-FORWARD'], { position: 2 });
    await ipt.insert('filter', 'FORWARD', ['-j', 'CNI-FORWARD']);
    await ipt.delete('nat', 'POSTROUTING', MASQ);
    await ipt.newChain('filter', 'NOMAD-ADMIN');
    await ipt.clearChain('filter', 'NOMAD-ADMIN');
    await ipt.deleteChain('filter', 'NOMAD-ADMIN');
    expect(exec.calls.map((c) => c.argv)).toEqual([
      ['iptables', '--wait', '-t', 'nat', '-A', 'POSTROUTING', ...MASQ],
      ['iptables', '--wait', '-t', 'filter', '-I', 'FORWARD', '2', '-j', 'CNI-FORWARD'],
      ['iptables', '--wait', '-t', 'filter', '-I', 'FORWARD', '-j', 'CNI-FORWARD'],
      ['iptables', '--wait', '-t', 'nat', '-D', 'POSTROUTING', ...MASQ],
      ['iptables', '--wait', '-t', 'filter', '-N', 'NOMAD-ADMIN'],
      ['iptables', '--wait', '-t', 'filter', '-F', 'NOMAD-ADMIN'],
      ['iptables', '--wait', '-t', 'filter', '-X', 'NOMAD-ADMIN'],
    ]);
    expect(exec.calls.every((c) => c.input === undefined)).toBe(true);
  });

  it('uses ip6tables for ipv6, nsenter for a netns name, and a bounded --wait when asked', async () => {
    const { exec, ipt } = setup({ family: 'ipv6', netns: 'node-1', waitSeconds: 5 });
    expect(ipt.netns).toBe('/run/netns/node-1');
    await ipt.append('nat', 'POSTROUTING', ['-s', 'fd00::2/128', '-j', 'MASQUERADE']);
    await ipt.save({ table: 'nat' });
    expect(exec.calls.map((c) => c.argv)).toEqual([
      [
        'nsenter',
        '--net=/run/netns/node-1',
        '--',
        'ip6tables',
        '--wait',
        '5',
        '-t',
        'nat',
        '-A',
        'POSTROUTING',
        '-s',
        'fd00::2/128',
        '-j',
        'MASQUERADE',
      ],
      ['nsenter', '--net=/run/netns/node-1', '--', 'ip6tables-save', '-t', 'nat'],
    ]);
  });

  it('takes a netns path as it is', async () => {
    const { exec, ipt } = setup({ netns: '/proc/4242/ns/net' });
    await ipt.listRules('nat', 'POSTROUTING');
    expect(exec.calls[0]?.argv).toEqual([
      'nsenter',
      '--net=/proc/4242/ns/net',
      '--',
      'iptables',
      '--wait',
      '-t',
      'nat',
      '-S',
      'POSTROUTING',
    ]);
  });
});

describe('queries', () => {
  it('ruleExists is true on exit 0 and false on "Bad rule", and uses -C', async () => {
    const { exec, ipt } = setup();
    exec.reply(ok(), exit(1, 'iptables: Bad rule (does a matching rule exist in that chain?).\n'));
    await expect(ipt.ruleExists('nat', 'POSTROUTING', MASQ)).resolves.toBe(true);
    await expect(ipt.ruleExists('nat', 'POSTROUTING', MASQ)).resolves.toBe(false);
    expect(exec.calls[0]?.argv).toEqual([
      'iptables',
      '--wait',
      '-t',
      'nat',
      '-C',
      'POSTROUTING',
      ...MASQ,
    ]);
  });

  it('ruleExists throws when iptables refuses the rule itself', async () => {
    const { exec, ipt } = setup();
    exec.reply(exit(2, 'iptables v1.8.9 (nf_tables): unknown option "--bogus"\n'));
    const error = await caught(ipt.ruleExists('filter', 'INPUT', ['--bogus']));
    expect(error.code).toBe('bad-rule');
    expect(error.message).toBe(
      'iptables --wait -t filter -C INPUT --bogus failed (exit status 2): iptables v1.8.9 (nf_tables): unknown option "--bogus"',
    );
  });

  it('chainExists asks for at most one rule and reads iptables-nft\'s "incompatible" answer as missing', async () => {
    // Without a netlink link: the exec's way.
    const { exec, ipt } = setup({ nft: false });
    exec.reply(
      ok('-N CNI-X\n'),
      exit(
        1,
        "iptables v1.8.9 (nf_tables): chain `NOPE' in table `filter' is incompatible, use 'nft' tool.\n",
      ),
    );
    await expect(ipt.chainExists('filter', 'CNI-X')).resolves.toBe(true);
    await expect(ipt.chainExists('filter', 'NOPE')).resolves.toBe(false);
    expect(exec.calls.map((c) => c.argv)).toEqual([
      ['iptables', '--wait', '-t', 'filter', '-S', 'CNI-X', '1'],
      ['iptables', '--wait', '-t', 'filter', '-S', 'NOPE', '1'],
    ]);
  });

  it('listChains and listRules parse -S output', async () => {
    const { exec, ipt } = setup();
    const listing = `-P POSTROUTING ACCEPT\n-N CNI-X\n-A POSTROUTING -s 172.26.64.2/32 -m comment --comment "name: \\"nomad\\" id: \\"6b235529-8111-4bbe-520b-d639b1d2a94e\\"" -j CNI-50e58ea77dc52e0c731e3799\n`;
    exec.reply(ok(listing), ok(listing));
    expect(await ipt.listChains('nat')).toEqual([
      { name: 'POSTROUTING', policy: 'ACCEPT' },
      { name: 'CNI-X', policy: undefined },
    ]);
    const rules = await ipt.listRules('nat', 'POSTROUTING');
    expect(rules.map((r) => [r.chain, r.spec, r.comment])).toEqual([
      ['POSTROUTING', MASQ, COMMENT],
    ]);
    expect(exec.calls.map((c) => c.argv)).toEqual([
      ['iptables', '--wait', '-t', 'nat', '-S'],
      ['iptables', '--wait', '-t', 'nat', '-S', 'POSTROUTING'],
    ]);
  });

  it('save parses every table', async () => {
    const { exec, ipt } = setup();
    exec.reply(
      ok('*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n*nat\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n'),
    );
    expect((await ipt.save()).map((t) => t.name)).toEqual(['filter', 'nat']);
    expect(exec.calls[0]?.argv).toEqual(['iptables-save']);
  });

  it('save reports output it cannot read as a parse error naming the command', async () => {
    const { exec, ipt } = setup();
    exec.reply(ok('*nat\n-A X -j ACCEPT\n'));
    const error = await caught(ipt.save({ table: 'nat' }));
    expect(error.code).toBe('parse');
    expect(error.message).toBe(
      'iptables-save -t nat printed what cannot be read: table nat has no COMMIT',
    );
  });
});

describe('errors', () => {
  it.each([
    ['iptables: No chain/target/match by that name.', 1, 'not-found'],
    ['iptables: Bad rule (does a matching rule exist in that chain?).', 1, 'not-found'],
    ['iptables: Chain already exists.', 1, 'already-exists'],
    [
      'iptables v1.8.9 (nf_tables):  CHAIN_USER_ADD failed (File exists): chain CNI-FORWARD',
      4,
      'already-exists',
    ],
    [
      'iptables v1.8.9 (nf_tables):  CHAIN_DEL failed (Device or resource busy): chain TESTA',
      4,
      'in-use',
    ],
    [
      'iptables v1.8.9 (nf_tables): Could not fetch rule set generation id: Permission denied (you must be root)',
      4,
      'permission',
    ],
    ['Another app is currently holding the xtables lock. Stopped waiting after 5s.', 4, 'lock'],
    ["iptables v1.8.9 (nf_tables): host/network `300.1.1.1' not found", 2, 'bad-rule'],
    ['iptables: Index of insertion too big.', 1, 'bad-rule'],
    ['something new', 2, 'bad-rule'],
    ['something new', 1, 'unknown'],
  ] as const)('classifies %j (exit %i) as %s', async (stderr, status, code) => {
    const { exec, ipt } = setup();
    exec.reply(exit(status, `${stderr}\n`));
    const error = await caught(ipt.newChain('filter', 'X'));
    expect(error.code).toBe(code);
    expect(error.exitCode).toBe(status);
    expect(error.stderr).toBe(`${stderr}\n`);
    expect(error.command).toEqual(['iptables', '--wait', '-t', 'filter', '-N', 'X']);
  });

  it('starts the message with the command, names the netns, and says "no error message" for silent failures', async () => {
    const { exec, ipt } = setup({ netns: 'n1' });
    exec.reply(exit(1, ''));
    const error = await caught(ipt.delete('nat', 'POSTROUTING', MASQ));
    expect(error.message).toBe(
      `iptables --wait -t nat -D POSTROUTING -s 172.26.64.2/32 -m comment --comment "name: \\"nomad\\" id: \\"6b235529-8111-4bbe-520b-d639b1d2a94e\\"" -j CNI-50e58ea77dc52e0c731e3799 (in netns /run/netns/n1) failed (exit status 1): no error message`,
    );
  });

  it('reports processes that did not run', async () => {
    const { exec, ipt } = setup();
    exec.reply(
      { kind: 'failed', reason: 'spawn', message: 'spawn iptables ENOENT', stdout: '', stderr: '' },
      {
        kind: 'failed',
        reason: 'timeout',
        message: 'timed out after 30000 ms',
        stdout: '',
        stderr: '',
      },
      { kind: 'failed', reason: 'aborted', message: 'cancelled', stdout: '', stderr: '' },
    );
    expect(await caught(ipt.newChain('filter', 'X'))).toMatchObject({
      code: 'spawn',
      message: 'iptables --wait -t filter -N X failed: spawn iptables ENOENT',
    });
    expect((await caught(ipt.newChain('filter', 'X'))).code).toBe('timeout');
    expect((await caught(ipt.newChain('filter', 'X'))).code).toBe('aborted');
  });

  it.each([
    [
      () => setup().ipt.append('bogus' as 'nat', 'X', ['-j', 'ACCEPT']),
      'table "bogus" is not one of filter, nat, mangle, raw, security',
    ],
    [
      () => setup().ipt.append('nat', '-X', ['-j', 'ACCEPT']),
      'chain "-X" is not a chain name (1-28 characters, no whitespace or quotes, not starting with "-" or "!")',
    ],
    [
      () => setup().ipt.append('nat', 'A'.repeat(29), ['-j', 'ACCEPT']),
      `chain "${'A'.repeat(29)}" is not a chain name (1-28 characters, no whitespace or quotes, not starting with "-" or "!")`,
    ],
    [() => setup().ipt.append('nat', 'X', []), 'spec is empty'],
    [
      () => setup().ipt.append('nat', 'X', ['-t', 'filter', '-j', 'ACCEPT']),
      'spec[0] is -t; pass the table separately',
    ],
    [
      () => setup().ipt.insert('nat', 'X', ['-j', 'ACCEPT'], { position: 0 }),
      'position 0 is not a rule number (1 or more)',
    ],
  ])('refuses bad arguments before running anything (%#)', async (call, message) => {
    const error = await caught(Promise.resolve().then(call));
    expect(error.code).toBe('invalid-argument');
    expect(error.message).toBe(message);
  });

  it('refuses bad options at creation', () => {
    expect(() => createIptables({ waitSeconds: -1 })).toThrow(
      'waitSeconds -1 is not a whole number of at least 0',
    );
    expect(() => createIptables({ timeoutMs: 0.5 })).toThrow(
      'timeoutMs 0.5 is not a whole number of at least 1',
    );
  });

  it('refuses a bad netns at creation, by the rule of @allocnet/netns', () => {
    const refusal = (netns: string) => {
      try {
        createIptables({ netns });
      } catch (error) {
        if (isIptablesError(error)) return [error.code, error.kind, error.message];
        throw error;
      }
      return 'accepted';
    };
    expect(refusal('../x')).toEqual([
      'invalid-argument',
      'invalid',
      'netns "../x" is not an absolute path',
    ]);
    expect(refusal('a b')).toEqual([
      'invalid-argument',
      'invalid',
      'netns "a b" is not 1 to 255 of [A-Za-z0-9_.-] starting with a letter, a digit or "_"',
    ]);
    // A path that is not clean was taken as is before the rule was shared.
    expect(refusal('/run/netns/../x')).toEqual([
      'invalid-argument',
      'invalid',
      'netns "/run/netns/../x" is not a clean absolute path (no "." or ".." segment, no NUL, under 4096 characters)',
    ]);
    expect(createIptables({ netns: '/proc/1/ns/net' }).netns).toBe('/proc/1/ns/net');
  });
});

describe('restore', () => {
  it('sends one iptables-restore --noflush with every op, grouped per table, and quotes like iptables-save', async () => {
    const { exec, ipt } = setup();
    const batch = createBatch()
      .newChain('nat', 'CNI-50e58ea77dc52e0c731e3799')
      .append('nat', 'POSTROUTING', MASQ)
      .insert('filter', 'FORWARD', ['-j', 'ACCEPT'], 1)
      .delete('nat', 'CNI-X', ['-j', 'MASQUERADE'])
      .clearChain('nat', 'CNI-X')
      .deleteChain('nat', 'CNI-X');
    exec.reply(ok('*nat\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n'), ok('*filter\nCOMMIT\n'), ok());
    await ipt.restore(batch);
    expect(exec.calls.map((c) => c.argv)).toEqual([
      ['iptables-save', '-t', 'nat'],
      ['iptables-save', '-t', 'filter'],
      ['iptables-restore', '--noflush', '--wait'],
    ]);
    expect(exec.calls[2]?.input).toBe(
      [
        '*nat',
        '-N CNI-50e58ea77dc52e0c731e3799',
        `-A POSTROUTING -s 172.26.64.2/32 -m comment --comment "name: \\"nomad\\" id: \\"6b235529-8111-4bbe-520b-d639b1d2a94e\\"" -j CNI-50e58ea77dc52e0c731e3799`,
        '-D CNI-X -j MASQUERADE',
        '-F CNI-X',
        '-X CNI-X',
        'COMMIT',
        '*filter',
        '-I FORWARD 1 -j ACCEPT',
        'COMMIT',
        '',
      ].join('\n'),
    );
  });

  it('takes no snapshot for a one-table batch and does nothing for an empty one', async () => {
    const { exec, ipt } = setup();
    await ipt.restore(createBatch());
    await ipt.restore(createBatch().deleteChain('nat', 'CNI-X'));
    expect(exec.calls.map((c) => c.argv)).toEqual([['iptables-restore', '--noflush', '--wait']]);
    expect(exec.calls[0]?.input).toBe('*nat\n-X CNI-X\nCOMMIT\n');
  });

  it('declares a chain with a `:CHAIN` line, which makes it or empties it, only when asked', async () => {
    const { exec, ipt } = setup();
    await ipt.restore(
      createBatch()
        .declareChain('nat', 'CNI-M')
        .append('nat', 'CNI-M', ['-j', 'MASQUERADE'])
        .newChain('nat', 'CNI-N'),
    );
    expect(exec.calls[0]?.input).toBe(
      '*nat\n:CNI-M - [0:0]\n-A CNI-M -j MASQUERADE\n-N CNI-N\nCOMMIT\n',
    );
  });

  it('names the line and op iptables-restore blamed', async () => {
    const { exec, ipt } = setup();
    exec.reply(
      exit(
        4,
        'iptables-restore v1.8.9 (nf_tables): \nline 3: CHAIN_DEL failed (Device or resource busy): chain CNI-X\n',
      ),
    );
    const error = await caught(
      ipt.restore(createBatch().clearChain('nat', 'CNI-X').deleteChain('nat', 'CNI-X')),
    );
    expect(error).toMatchObject({ code: 'in-use', line: 3, exitCode: 4 });
    expect(error.message).toBe(
      'iptables-restore --noflush --wait at line 3 (-t nat -X CNI-X) failed (exit status 4): iptables-restore v1.8.9 (nf_tables): line 3: CHAIN_DEL failed (Device or resource busy): chain CNI-X',
    );
  });

  it('puts back a table that committed before a later table failed, then reports the failure', async () => {
    const logged: string[] = [];
    const logger: Logger = { debug: () => undefined, warn: (m) => logged.push(m) };
    const { exec, ipt } = setup({ logger });
    const before = '*filter\n:FORWARD ACCEPT [0:0]\n-A FORWARD -j OLD\nCOMMIT\n';
    const after =
      '*filter\n:FORWARD ACCEPT [0:0]\n:TESTA - [0:0]\n-A FORWARD -j TESTA\n-A FORWARD -j OLD\nCOMMIT\n';
    exec.reply(
      ok(before),
      ok('*nat\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n'),
      exit(
        1,
        'iptables-restore: line 6 failed: Bad rule (does a matching rule exist in that chain?).\n',
      ),
      ok(after),
      ok(),
    );
    const batch = createBatch()
      .newChain('filter', 'TESTA')
      .insert('filter', 'FORWARD', ['-j', 'TESTA'])
      .delete('nat', 'POSTROUTING', ['-s', '9.9.9.9/32', '-j', 'ACCEPT']);
    const error = await caught(ipt.restore(batch));
    expect(error).toMatchObject({ code: 'not-found', line: 6 });
    expect(error.message).toContain('at line 6 (-t nat -D POSTROUTING -s 9.9.9.9/32 -j ACCEPT)');
    expect(exec.calls.map((c) => c.argv)).toEqual([
      ['iptables-save', '-t', 'filter'],
      ['iptables-save', '-t', 'nat'],
      ['iptables-restore', '--noflush', '--wait'],
      ['iptables-save', '-t', 'filter'],
      ['iptables-restore', '--noflush', '--wait'],
    ]);
    expect(exec.calls[4]?.input).toBe('*filter\n-D FORWARD -j TESTA\n-F TESTA\n-X TESTA\nCOMMIT\n');
    expect(logged).toEqual([
      'iptables-restore failed after a table committed; putting the table back',
    ]);
  });

  it('with perTable, reads no snapshot and leaves a table that committed before a later one failed', async () => {
    const { exec, ipt } = setup();
    exec.reply(
      exit(
        1,
        'iptables-restore: line 6 failed: Bad rule (does a matching rule exist in that chain?).\n',
      ),
    );
    const batch = createBatch()
      .newChain('filter', 'TESTA')
      .insert('filter', 'FORWARD', ['-j', 'TESTA'])
      .delete('nat', 'POSTROUTING', ['-s', '9.9.9.9/32', '-j', 'ACCEPT']);
    const error = await caught(ipt.restore(batch, { perTable: true }));
    expect(error).toMatchObject({ code: 'not-found', line: 6 });
    // One process: no iptables-save before, none to put filter back after.
    expect(exec.calls.map((c) => c.argv)).toEqual([['iptables-restore', '--noflush', '--wait']]);
    expect(exec.calls[0]?.input).toBe(
      '*filter\n-N TESTA\n-I FORWARD -j TESTA\nCOMMIT\n*nat\n-D POSTROUTING -s 9.9.9.9/32 -j ACCEPT\nCOMMIT\n',
    );
  });

  it('does not touch an earlier table when the failure is in the first one', async () => {
    const { exec, ipt } = setup();
    exec.reply(
      ok('*filter\n:FORWARD ACCEPT [0:0]\nCOMMIT\n'),
      ok('*nat\nCOMMIT\n'),
      exit(1, 'iptables-restore: line 2 failed: Chain already exists.\n'),
    );
    const error = await caught(
      ipt.restore(createBatch().newChain('filter', 'A').newChain('nat', 'B')),
    );
    expect(error.code).toBe('already-exists');
    expect(exec.calls).toHaveLength(3);
  });

  it('says so when putting a table back fails too', async () => {
    const { exec, ipt } = setup();
    exec.reply(
      ok('*filter\n:FORWARD ACCEPT [0:0]\nCOMMIT\n'),
      ok('*nat\nCOMMIT\n'),
      exit(1, 'iptables-restore: line 5 failed: Chain already exists.\n'),
      ok('*filter\n:FORWARD ACCEPT [0:0]\n:A - [0:0]\nCOMMIT\n'),
      exit(4, 'iptables-restore: line 3: CHAIN_DEL failed (Device or resource busy): chain A\n'),
    );
    const error = await caught(
      ipt.restore(createBatch().newChain('filter', 'A').newChain('nat', 'B')),
    );
    expect(error.code).toBe('already-exists');
    expect(error.message).toMatch(
      /; and putting table filter back failed: iptables-restore --noflush --wait at line 3 \(-t filter -X A\) failed/,
    );
  });

  it('after an abort, puts back every table, the last one too, even though the signal is aborted', async () => {
    const { exec, ipt } = setup();
    const controller = new AbortController();
    exec.reply(
      ok('*filter\n:FORWARD ACCEPT [0:0]\nCOMMIT\n'),
      ok('*nat\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n'),
      () => {
        controller.abort();
        return { kind: 'failed', reason: 'aborted', message: 'cancelled', stdout: '', stderr: '' };
      },
      ok('*filter\n:FORWARD ACCEPT [0:0]\n:A - [0:0]\nCOMMIT\n'),
      ok('*nat\n:POSTROUTING ACCEPT [0:0]\n:B - [0:0]\nCOMMIT\n'),
    );
    const batch = createBatch().newChain('filter', 'A').newChain('nat', 'B');
    const error = await caught(ipt.restore(batch, { signal: controller.signal }));
    expect(error).toMatchObject({
      code: 'aborted',
      message: 'iptables-restore --noflush --wait failed: cancelled',
    });
    expect(exec.calls.slice(3).map((c) => [c.argv.join(' '), c.input])).toEqual([
      ['iptables-save -t filter', undefined],
      ['iptables-save -t nat', undefined],
      ['iptables-restore --noflush --wait', '*filter\n-F A\n-X A\nCOMMIT\n'],
      ['iptables-restore --noflush --wait', '*nat\n-F B\n-X B\nCOMMIT\n'],
    ]);
  });

  it('clearAndDeleteChain is one transaction and false when the chain is gone', async () => {
    const { exec, ipt } = setup();
    exec.reply(
      ok(),
      exit(1, 'iptables-restore: line 2 failed: No chain/target/match by that name.\n'),
    );
    await expect(ipt.clearAndDeleteChain('nat', 'CNI-X')).resolves.toBe(true);
    await expect(ipt.clearAndDeleteChain('nat', 'CNI-X')).resolves.toBe(false);
    expect(exec.calls.map((c) => c.input)).toEqual([
      '*nat\n-F CNI-X\n-X CNI-X\nCOMMIT\n',
      '*nat\n-F CNI-X\n-X CNI-X\nCOMMIT\n',
    ]);
  });

  it('refuses a spec restore input cannot carry when it is added to a batch', () => {
    expect(() => createBatch().delete('nat', 'X', ['-m', 'comment', '--comment', 'a\nb'])).toThrow(
      'spec[3] holds a line break, which iptables-restore input cannot carry; use Iptables.delete',
    );
  });
});

describe('saveAt and removeAt: removal by rule handle over a fake nf_tables link', () => {
  const HEADER = '# Generated by iptables-save v1.8.9 (nf_tables) on Tue Nov 24 12:00:00 2026\n';
  const CHAIN = 'CNI-50e58ea77dc52e0c731e3799';
  const SAVED = [
    '*nat',
    ':POSTROUTING ACCEPT [0:0]',
    `:${CHAIN} - [0:0]`,
    '-A POSTROUTING -s 10.9.9.9/32 -j MASQUERADE',
    `-A POSTROUTING ${MASQ.map((a) => (a === COMMENT ? JSON.stringify(a) : a)).join(' ')}`,
    `-A ${CHAIN} -j MASQUERADE`,
    'COMMIT',
    '',
  ].join('\n');

  /** The transaction that removes POSTROUTING's jump (handle 8) and the chain it jumps to. */
  const JUMP_AND_CHAIN_OPS: NftOp[] = [
    { kind: 'deleteRule', table: 'nat', chain: 'POSTROUTING', handle: 8n },
    { kind: 'flushChain', table: 'nat', chain: CHAIN },
    { kind: 'deleteChain', table: 'nat', chain: CHAIN },
  ];

  /** A kernel at generation 41 (or `generations`, read by read) whose POSTROUTING has two rules (handles 7 and 8). */
  function fakeLink(options: { generations?: number[]; messages?: string[] } = {}) {
    const generations = [...(options.generations ?? [])];
    const calls: string[] = [];
    const commits: { generation: number; ops: readonly NftOp[] }[] = [];
    let current = 41;
    const link: NftLink = {
      generation: () => Promise.resolve(generations.shift() ?? current),
      chains: () => Promise.resolve([]),
      rules(table, chain, inspect) {
        calls.push(`rules ${table} ${chain}`);
        const messages = options.messages ?? ['masquerade 10.9.9.9', `${COMMENT} ${CHAIN}`];
        messages.forEach((m, i) => inspect?.(i, Buffer.from(m)));
        return Promise.resolve(messages.map((_, i) => BigInt(7 + i)));
      },
      commit(generation, ops) {
        commits.push({ generation, ops });
        current = generation + 1;
        return Promise.resolve(current);
      },
      chainExists(table, chain) {
        calls.push(`chain ${table} ${chain}`);
        return Promise.resolve(chain !== 'GONE');
      },
      close: () => calls.push('close'),
    };
    return { link, calls, commits };
  }

  async function saved(nft: NftLink) {
    const exec = createRecordingExec().reply(ok(HEADER + SAVED));
    const ipt = createIptables({ exec, nft: () => nft });
    const { tables, generation } = await (ipt.saveAt as NonNullable<typeof ipt.saveAt>)();
    const nat = tables[0] as SavedTable;
    const jump = nat.rules[1] as Rule;
    return {
      ipt,
      generation,
      removal: {
        rules: [{ rule: jump, position: nat.places?.positions[1] ?? -1, chainSize: 2 }],
        chains: [{ table: 'nat' as const, chain: CHAIN }],
      },
    };
  }

  it('reads the generation around the save, and removes the placed rule and the chain by handle', async () => {
    const fake = fakeLink();
    const { ipt, generation, removal } = await saved(fake.link);
    expect(generation).toBe(41);
    const next = await ipt.removeAt?.({ generation: 41, lists: new Map() }, removal);
    expect(fake.commits).toEqual([{ generation: 41, ops: JUMP_AND_CHAIN_OPS }]);
    expect(next).toEqual({ generation: 42, lists: new Map([['nat POSTROUTING', [7n, 8n]]]) });
    // A next removal out of the same save reads no chain again: the handles do not change.
    fake.calls.length = 0;
    await ipt.removeAt?.(next as RuleHandles, {
      rules: [{ ...removal.rules[0], position: 0 } as PlacedRule],
      chains: [],
    });
    expect(fake.calls).toEqual(['close']);
    expect(fake.commits[1]?.ops).toEqual([
      { kind: 'deleteRule', table: 'nat', chain: 'POSTROUTING', handle: 7n },
    ]);
  });

  it('reads the handles of the chains asked for beside the save, those the save agrees with', async () => {
    const fake = fakeLink();
    const exec = createRecordingExec().reply(ok(HEADER + SAVED));
    const ipt = createIptables({ exec, nft: () => fake.link });
    const read = await ipt.saveAt?.({
      handlesOf: [
        { table: 'nat', chain: 'POSTROUTING' },
        // One rule in the save, two in the (fake) kernel: left out.
        { table: 'nat', chain: CHAIN },
        // Not in the save at all.
        { table: 'filter', chain: 'CNI-FORWARD' },
      ],
    });
    expect(read?.generation).toBe(41);
    expect(read?.lists).toEqual(new Map([['nat POSTROUTING', [7n, 8n]]]));
    expect(fake.calls.filter((c) => c.startsWith('rules'))).toEqual([
      'rules nat POSTROUTING',
      `rules nat ${CHAIN}`,
      'rules filter CNI-FORWARD',
    ]);
    // A removal from them then reads nothing more.
    const nat = read?.tables[0] as SavedTable;
    fake.calls.length = 0;
    await ipt.removeAt?.(
      { generation: 41, lists: read?.lists ?? new Map() },
      { rules: [{ rule: nat.rules[1] as Rule, position: 1, chainSize: 2 }], chains: [] },
    );
    expect(fake.calls).toEqual(['close']);
    expect(fake.commits[0]?.ops).toEqual([JUMP_AND_CHAIN_OPS[0]]);
    // None when the generation moved meanwhile.
    const moved = fakeLink({ generations: [41, 42] });
    const ipt2 = createIptables({
      exec: createRecordingExec().reply(ok(HEADER + SAVED)),
      nft: () => moved.link,
    });
    const again = await ipt2.saveAt?.({ handlesOf: [{ table: 'nat', chain: 'POSTROUTING' }] });
    expect(again?.generation).toBeUndefined();
    expect(again?.lists.size).toBe(0);
  });

  it('gives no generation when it moved during the save, the backend is legacy, or there is no link', async () => {
    const moved = fakeLink({ generations: [41, 42] });
    expect((await saved(moved.link)).generation).toBeUndefined();

    const legacy = createIptables({
      exec: createRecordingExec().reply(ok(HEADER.replace('nf_tables', 'legacy') + SAVED)),
      nft: () => fakeLink().link,
    });
    expect((await legacy.saveAt?.())?.generation).toBeUndefined();

    const none = createIptables({
      exec: createRecordingExec().reply(ok(HEADER + SAVED)),
      nft: () => {
        throw new Error('no netlink here');
      },
    });
    const read = await none.saveAt?.();
    expect(read?.generation).toBeUndefined();
    expect(read?.tables[0]?.rules).toHaveLength(3);
  });

  it.each([
    ['the generation moved on since the save', { generations: [42] }, 'no longer at generation 41'],
    ['the generation moved on while the chain was read', { generations: [41, 42] }, 'moved on'],
    ['the chain has another size', { messages: ['a', 'b', 'c'] }, 'has 3 rules, the save showed 2'],
    [
      'the rule at the place is another',
      { messages: ['a', `${COMMENT} CNI-other`] },
      'rule 2 of nat POSTROUTING is not the saved one',
    ],
  ])('refuses with changed, committing nothing, when %s', async (_why, link, message) => {
    const fake = fakeLink(link);
    const { removal } = await saved(fakeLink().link);
    const error = await caught(
      createIptables({ exec: createRecordingExec(), nft: () => fake.link }).removeAt?.(
        { generation: 41, lists: new Map() },
        removal,
      ) ?? Promise.resolve(),
    );
    expect(error.code).toBe('changed');
    expect(error.message).toContain(message);
    expect(fake.commits).toEqual([]);
    expect(fake.calls.at(-1)).toBe('close');
  });

  it('warms a removal: reads the generation and the first rule’s chain, builds the batch, sends none', async () => {
    const fake = fakeLink();
    const { removal } = await saved(fakeLink().link);
    const ipt = createIptables({ exec: createRecordingExec(), nft: () => fake.link });
    const bytes = await ipt.warmRemoval?.(removal);
    // The save's POSTROUTING holds two rules: the jump, second, gets the second made-up handle.
    const expected = removalBatch('ipv4', 41, [
      { kind: 'deleteRule', table: 'nat', chain: 'POSTROUTING', handle: 2n },
      { kind: 'flushChain', table: 'nat', chain: CHAIN },
      { kind: 'deleteChain', table: 'nat', chain: CHAIN },
    ]);
    expect(bytes).toBe(expected.bytes.length);
    expect(fake.calls).toEqual(['rules nat POSTROUTING', 'close']);
    expect(fake.commits).toEqual([]);
  });

  it('warms a removal even when the link’s reads fail (the chain is not there)', async () => {
    const fake = fakeLink();
    const { removal } = await saved(fakeLink().link);
    const link: NftLink = {
      ...fake.link,
      rules: () => Promise.reject(new Error('not-found')),
    };
    const ipt = createIptables({ exec: createRecordingExec(), nft: () => link });
    expect(await ipt.warmRemoval?.(removal)).toBeGreaterThan(0);
    expect(fake.calls).toEqual(['close']);
    expect(fake.commits).toEqual([]);
  });

  it('chainExists asks the link (one GETCHAIN, no exec) when there is one, trusts its no under nf_tables only, and asks iptables when the link fails', async () => {
    const fake = fakeLink();
    const exec = createRecordingExec().reply(ok('iptables v1.8.9 (nf_tables)\n'));
    const ipt = createIptables({ exec, nft: () => fake.link });
    await expect(ipt.chainExists('nat', 'CNI-X')).resolves.toBe(true);
    await expect(ipt.chainExists('nat', 'GONE')).resolves.toBe(false);
    await expect(ipt.chainExists('nat', 'GONE')).resolves.toBe(false);
    expect(fake.calls).toEqual([
      'chain nat CNI-X',
      'close',
      'chain nat GONE',
      'close',
      'chain nat GONE',
      'close',
    ]);
    // The backend, asked once.
    expect(exec.calls.map((c) => c.argv)).toEqual([['iptables', '--version']]);
    // Under iptables-legacy a chain nf_tables does not hold may still be there: iptables says.
    const legacyExec = createRecordingExec().reply(
      ok('iptables v1.8.9 (legacy)\n'),
      ok('-N GONE\n'),
    );
    const legacy = createIptables({ exec: legacyExec, nft: () => fake.link });
    await expect(legacy.chainExists('nat', 'GONE')).resolves.toBe(true);
    expect(legacyExec.calls.map((c) => c.argv)).toEqual([
      ['iptables', '--version'],
      ['iptables', '--wait', '-t', 'nat', '-S', 'GONE', '1'],
    ]);
    const exec2 = createRecordingExec().reply(ok('-N CNI-X\n'));
    const broken = createIptables({
      exec: exec2,
      nft: () => ({
        ...fake.link,
        chainExists: () =>
          Promise.reject(new IptablesError('GETCHAIN: EPERM', { code: 'permission' })),
      }),
    });
    await expect(broken.chainExists('nat', 'CNI-X')).resolves.toBe(true);
    expect(exec2.calls.map((c) => c.argv)).toEqual([
      ['iptables', '--wait', '-t', 'nat', '-S', 'CNI-X', '1'],
    ]);
  });

  it('readAt reads while it asks iptables for the backend, and drops a read that is not nf_tables’, failed or not', async () => {
    const fake = fakeLink();
    const exec = createRecordingExec().reply(ok('iptables v1.8.9 (nf_tables)\n'));
    const ipt = createIptables({ exec, nft: () => fake.link });
    const read = await ipt.readAt?.();
    expect(read?.generation).toBe(41);
    expect(exec.calls.map((c) => c.argv)).toEqual([['iptables', '--version']]);
    expect(fake.calls).toEqual(['close']);

    const failing: NftLink = { ...fake.link, chains: () => Promise.reject(new Error('EPERM')) };
    const legacy = (link: NftLink) =>
      createIptables({
        exec: createRecordingExec().reply(ok('iptables v1.8.9 (legacy)\n')),
        nft: () => link,
      });
    await expect(legacy(fake.link).readAt?.()).resolves.toBeUndefined();
    await expect(legacy(failing).readAt?.()).resolves.toBeUndefined();
    // Under nf_tables a failed read fails (the caller reads with iptables-save).
    const nf = createIptables({
      exec: createRecordingExec().reply(ok('iptables v1.8.9 (nf_tables)\n')),
      nft: () => failing,
    });
    await expect(nf.readAt?.()).rejects.toThrow('EPERM');
  });

  it('searches chains for needles over one link, says which chain is not there, and gives nothing without a link', async () => {
    const fake = fakeLink();
    const link: NftLink = {
      ...fake.link,
      // As the kernel answers a dump: a chain that is not there reads as an empty one, a table
      // that is not there is ENOENT.
      rules: (table, chain, inspect) =>
        chain === 'GONE' || chain === 'EMPTY'
          ? Promise.resolve([])
          : table === 'mangle'
            ? Promise.reject(new IptablesError('GETRULE: not there', { code: 'not-found' }))
            : fake.link.rules(table, chain, inspect),
    };
    const ipt = createIptables({ exec: createRecordingExec(), nft: () => link });
    expect(
      await ipt.searchRules?.([
        { table: 'nat', chain: 'POSTROUTING', needles: [Buffer.from(CHAIN), Buffer.from('x.y')] },
        { table: 'nat', chain: 'GONE', needles: [Buffer.from(CHAIN)] },
        { table: 'nat', chain: 'EMPTY', needles: [Buffer.from(CHAIN)] },
        { table: 'mangle', chain: 'PREROUTING', needles: [] },
      ]),
    ).toEqual([
      { exists: true, found: [true, false] },
      { exists: false },
      { exists: true, found: [false] },
      { exists: false },
    ]);
    // Only a chain whose dump came back empty is asked about.
    expect(fake.calls).toEqual([
      'rules nat POSTROUTING',
      'chain nat GONE',
      'chain nat EMPTY',
      'close',
    ]);
    const none = createIptables({ exec: createRecordingExec(), nft: false });
    expect(await none.searchRules?.([{ table: 'nat', chain: 'POSTROUTING', needles: [] }])).toBe(
      undefined,
    );
  });
  it('removeJumped deletes the jumps (by handle) and the chain in one commit, reads again when the ruleset moved on, and is undefined off nf_tables', async () => {
    const DNAT = 'CNI-DN-50e58ea77dc52e0c731e';
    // POSTROUTING: a masquerade, the jump (handle 8); the DNAT chain has no jump in CNI-HOSTPORT-DNAT.
    const fake = fakeLink({ messages: ['masquerade 10.9.9.9', `${COMMENT} ${CHAIN}\0`] });
    const nfTables = () => createRecordingExec().reply(ok('iptables v1.8.9 (nf_tables)\n'));
    const ipt = createIptables({ exec: nfTables(), nft: () => fake.link });
    const targets = [
      { table: 'nat' as const, from: 'POSTROUTING', chain: CHAIN },
      { table: 'nat' as const, from: 'CNI-HOSTPORT-DNAT', chain: DNAT },
    ];
    expect(await ipt.removeJumped?.(targets)).toEqual([CHAIN]);
    expect(fake.commits).toEqual([{ generation: 41, ops: JUMP_AND_CHAIN_OPS }]);
    // Another writer committed between the read and the commit: read and commit again.
    const moving = fakeLink({ messages: [`${COMMENT} ${CHAIN}\0`] });
    let refused = 0;
    const link: NftLink = {
      ...moving.link,
      commit: (generation, ops) =>
        refused++ === 0
          ? Promise.reject(new IptablesError('moved on', { code: 'changed' }))
          : moving.link.commit(generation, ops),
    };
    const again = createIptables({ exec: nfTables(), nft: () => link });
    expect(await again.removeJumped?.(targets.slice(0, 1))).toEqual([CHAIN]);
    expect([refused, moving.calls.filter((c) => c.startsWith('rules')).length]).toEqual([2, 2]);
    // A name that only starts like the chain's is not a jump to it.
    const longer = fakeLink({ messages: [`${COMMENT} ${CHAIN}0\0`] });
    const none = createIptables({ exec: nfTables(), nft: () => longer.link });
    expect(await none.removeJumped?.(targets.slice(0, 1))).toEqual([]);
    expect(longer.commits).toEqual([]);
    // Under iptables-legacy, or without a link: undefined, nothing asked of nf_tables.
    const legacy = fakeLink();
    const onLegacy = createIptables({
      exec: createRecordingExec().reply(ok('iptables v1.8.9 (legacy)\n')),
      nft: () => legacy.link,
    });
    expect(await onLegacy.removeJumped?.(targets)).toBeUndefined();
    expect(legacy.calls).toEqual([]);
    expect(await createIptables({ nft: false }).removeJumped?.(targets)).toBeUndefined();
  });

  it('removeAccepts commits nothing and is undefined when a rule holding the address is not an accept, off nf_tables, or without a link', async () => {
    const removal = {
      table: 'filter' as const,
      chain: 'CNI-FORWARD',
      addresses: [Buffer.from('10.9.9.9')],
    };
    const nfTables = () => createRecordingExec().reply(ok('iptables v1.8.9 (nf_tables)\n'));
    // The fake's messages are no nf_tables rules: one holding the bytes is not an accept.
    const stranger = fakeLink();
    expect(
      await createIptables({ exec: nfTables(), nft: () => stranger.link }).removeAccepts?.(removal),
    ).toBeUndefined();
    expect([stranger.commits, stranger.calls]).toEqual([[], ['rules filter CNI-FORWARD', 'close']]);
    // None holding them: nothing to remove, nothing committed.
    const none = fakeLink({ messages: ['masquerade 10.1.1.1'] });
    expect(
      await createIptables({ exec: nfTables(), nft: () => none.link }).removeAccepts?.(removal),
    ).toEqual({ removed: 0, left: 0 });
    expect(none.commits).toEqual([]);
    const legacy = fakeLink();
    const onLegacy = createIptables({
      exec: createRecordingExec().reply(ok('iptables v1.8.9 (legacy)\n')),
      nft: () => legacy.link,
    });
    expect(await onLegacy.removeAccepts?.(removal)).toBeUndefined();
    expect(legacy.calls).toEqual([]);
    expect(await createIptables({ nft: false }).removeAccepts?.(removal)).toBeUndefined();
  });
});
