import { IptablesError } from '@allocnet/iptables-node';
import type { Iptables, Rule } from '@allocnet/iptables-node';
import { batchedChainReader } from './chain-reader.js';

/** A few turns of the event loop: enough for a queued read to start. */
async function tick() {
  for (let i = 0; i < 3; i++) await new Promise<void>((r) => setImmediate(r));
}

/** An Iptables whose `listRules` calls wait until the test settles them. */
function pendingIptables() {
  const calls: {
    chain: string;
    resolve: (rules: Rule[]) => void;
    reject: (e: Error) => void;
  }[] = [];
  const listRules = (_table: string, chain: string) =>
    new Promise<Rule[]>((resolve, reject) => calls.push({ chain, resolve, reject }));
  const iptables = { listRules } as unknown as Iptables;
  return { calls, iptables: { ipv4: iptables, ipv6: iptables } };
}

const rule = (chain: string, n: number): Rule => ({
  table: 'nat',
  chain,
  spec: ['-j', `T${n}`],
  matches: [],
  comment: undefined,
  target: { name: `T${n}`, goto: false, options: [] },
});

describe('the batched chain reader', () => {
  it('gives callers that ask together one read, and callers that ask during it the next one', async () => {
    const { calls, iptables } = pendingIptables();
    const read = batchedChainReader(iptables);
    const first = [read('ipv4', 'nat', 'X'), read('ipv4', 'nat', 'X'), read('ipv4', 'nat', 'X')];
    await tick();
    expect(calls.map((c) => c.chain)).toEqual(['X']);
    // Asked while the first read runs: it may have read the chain before this caller asked.
    const later = [read('ipv4', 'nat', 'X'), read('ipv4', 'nat', 'X')];
    await tick();
    expect(calls).toHaveLength(1);
    calls[0]?.resolve([rule('X', 1)]);
    expect(await Promise.all(first)).toEqual([[rule('X', 1)], [rule('X', 1)], [rule('X', 1)]]);
    await tick();
    expect(calls).toHaveLength(2);
    calls[1]?.resolve([rule('X', 2)]);
    expect(await Promise.all(later)).toEqual([[rule('X', 2)], [rule('X', 2)]]);
  });

  it('reads different chains and families apart, and says undefined for a chain that is not there', async () => {
    const { calls, iptables } = pendingIptables();
    const read = batchedChainReader(iptables);
    const a = read('ipv4', 'nat', 'A');
    const b = read('ipv4', 'filter', 'A');
    const c = read('ipv6', 'nat', 'A');
    await tick();
    expect(calls).toHaveLength(3);
    calls[0]?.resolve([]);
    calls[1]?.reject(new IptablesError('no chain', { code: 'not-found' }));
    calls[2]?.resolve([rule('A', 6)]);
    expect(await Promise.all([a, b, c])).toEqual([[], undefined, [rule('A', 6)]]);
  });

  it('fails every caller of a read that failed, and the next caller gets a new read', async () => {
    const { calls, iptables } = pendingIptables();
    const read = batchedChainReader(iptables);
    const both = [read('ipv4', 'nat', 'X'), read('ipv4', 'nat', 'X')];
    await tick();
    calls[0]?.reject(new IptablesError('iptables is not there', { code: 'spawn' }));
    for (const p of both) await expect(p).rejects.toThrow('iptables is not there');
    const again = read('ipv4', 'nat', 'X');
    await tick();
    expect(calls).toHaveLength(2);
    calls[1]?.resolve([]);
    await expect(again).resolves.toEqual([]);
  });

  it('lets a caller whose signal aborts go at once, and the others still get the read', async () => {
    const { calls, iptables } = pendingIptables();
    const read = batchedChainReader(iptables);
    const abort = new AbortController();
    const leaving = read('ipv4', 'nat', 'X', { signal: abort.signal });
    const staying = read('ipv4', 'nat', 'X');
    await tick();
    abort.abort(new Error('the caller gave up'));
    await expect(leaving).rejects.toThrow('the caller gave up');
    calls[0]?.resolve([rule('X', 3)]);
    await expect(staying).resolves.toEqual([rule('X', 3)]);
  });
});
