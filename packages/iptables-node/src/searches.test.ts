// searchOps (searches.ts) over a fake netlink link: what a search reads from the kernel, and what
// it keeps across this process's writes, by the ruleset's generation.
import { createBatch } from './batch.js';
import type { NftLink } from './nft.js';
import { searchOps } from './searches.js';
import type { Table } from './validate.js';

/** A ruleset of chains of rule messages, its generation, and how many dumps were asked. */
function fakeKernel(chains: Record<string, string[]>) {
  const state = { generation: 10, dumps: 0, chains, duringDump: () => {} };
  const link = {
    generation: () => Promise.resolve(state.generation),
    rules(table: Table, chain: string, inspect?: (i: number, m: Buffer) => void) {
      state.dumps++;
      const rules = state.chains[`${table} ${chain}`];
      if (rules === undefined) return Promise.resolve([]);
      rules.forEach((r, i) => inspect?.(i, Buffer.from(r)));
      state.duringDump();
      return Promise.resolve(rules.map((_, i) => BigInt(i + 1)));
    },
    chainExists: (table: Table, chain: string) =>
      Promise.resolve(state.chains[`${table} ${chain}`] !== undefined),
    close: () => {},
  } as unknown as NftLink;
  const ops = searchOps({
    family: 'ipv4',
    netns: undefined,
    nft: () => link,
    logger: { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} },
  });
  return { state, ops };
}

const FORWARD = { table: 'filter' as const, chain: 'CNI-FORWARD' };
const needle = (text: string) => Buffer.from(text);
/** The needle a test's append of `-s X -j ACCEPT` has: the address's text. */
const needleOf = (spec: readonly string[]) => Buffer.from(spec[1] ?? '');

function appendBatch(...addresses: string[]) {
  const batch = createBatch();
  for (const a of addresses) batch.append('filter', 'CNI-FORWARD', ['-s', a, '-j', 'ACCEPT']);
  return batch;
}

describe('searchRules', () => {
  it('reads a chain again only after the ruleset changed', async () => {
    const { state, ops } = fakeKernel({ 'filter CNI-FORWARD': ['accept 10.0.0.2', 'accept 10.0.0.3'] }); // prettier-ignore
    const search = [{ ...FORWARD, needles: [needle('10.0.0.3'), needle('10.0.0.9')] }];
    expect(await ops.searchRules(search)).toEqual([{ exists: true, found: [true, false] }]);
    expect(await ops.searchRules(search)).toEqual([{ exists: true, found: [true, false] }]);
    expect(state.dumps).toBe(1);
    state.generation++;
    state.chains['filter CNI-FORWARD']?.push('accept 10.0.0.9');
    expect(await ops.searchRules(search)).toEqual([{ exists: true, found: [true, true] }]);
    expect(state.dumps).toBe(2);
  });

  it('keeps nothing read while the ruleset moved, nor a chain that is not there', async () => {
    const { state, ops } = fakeKernel({ 'filter CNI-FORWARD': ['accept 10.0.0.2'] });
    state.duringDump = () => {
      state.generation++;
    };
    const search = [{ ...FORWARD, needles: [needle('10.0.0.2')] }];
    await ops.searchRules(search);
    state.duringDump = () => {};
    await ops.searchRules(search);
    expect(state.dumps).toBe(2);
    const missing = [{ table: 'nat' as const, chain: 'CNI-DN-x', needles: [] }];
    expect(await ops.searchRules(missing)).toEqual([{ exists: false }]);
    expect(await ops.searchRules(missing)).toEqual([{ exists: false }]);
    expect(state.dumps).toBe(4);
  });
});

describe('writeKeepingSearches', () => {
  const search = [{ ...FORWARD, needles: [needle('10.0.0.2'), needle('10.0.0.7')] }];

  it('keeps the reads past a write that was the only change, with its appends', async () => {
    const { state, ops } = fakeKernel({ 'filter CNI-FORWARD': ['accept 10.0.0.2'] });
    await ops.searchRules(search);
    const written = await ops.writeKeepingSearches(appendBatch('10.0.0.7'), needleOf, () => {
      state.generation++; // one table: one commit
      return Promise.resolve('written');
    });
    expect(written).toBe('written');
    expect(await ops.searchRules(search)).toEqual([{ exists: true, found: [true, true] }]);
    expect(state.dumps).toBe(1);
  });

  it('reads again after a write that was not the only change', async () => {
    const { state, ops } = fakeKernel({ 'filter CNI-FORWARD': ['accept 10.0.0.2'] });
    await ops.searchRules(search);
    await ops.writeKeepingSearches(appendBatch('10.0.0.7'), needleOf, () => {
      state.generation += 2; // its commit and someone else's
      state.chains['filter CNI-FORWARD'] = ['accept 10.0.0.7'];
      return Promise.resolve();
    });
    expect(await ops.searchRules(search)).toEqual([{ exists: true, found: [false, true] }]);
    expect(state.dumps).toBe(2);
  });

  it('follows only batches of appends with one in each table, and passes a failure on', async () => {
    const { state, ops } = fakeKernel({ 'filter CNI-FORWARD': ['accept 10.0.0.2'] });
    await ops.searchRules(search);
    // A table with no append may commit nothing: the generation cannot tell then.
    const noAppendInNat = appendBatch('10.0.0.7');
    noAppendInNat.declareChain('nat', 'CNI-x');
    await ops.writeKeepingSearches(noAppendInNat, needleOf, () => {
      state.generation++;
      return Promise.resolve();
    });
    await ops.searchRules(search);
    expect(state.dumps).toBe(2);
    const deleting = appendBatch('10.0.0.8');
    deleting.delete('filter', 'CNI-FORWARD', ['-s', '10.0.0.2', '-j', 'ACCEPT']);
    await ops.writeKeepingSearches(deleting, needleOf, () => {
      state.generation++;
      return Promise.resolve();
    });
    await ops.searchRules(search);
    expect(state.dumps).toBe(3);
    await expect(
      ops.writeKeepingSearches(appendBatch('10.0.0.9'), needleOf, () =>
        Promise.reject(new Error('restore failed')),
      ),
    ).rejects.toThrow('restore failed');
  });

  it('drops a read chain the batch declares', async () => {
    const { state, ops } = fakeKernel({ 'filter CNI-FORWARD': ['accept 10.0.0.2'] });
    await ops.searchRules(search);
    const batch = appendBatch('10.0.0.7');
    batch.declareChain('filter', 'CNI-FORWARD');
    await ops.writeKeepingSearches(batch, needleOf, () => {
      state.generation++;
      return Promise.resolve();
    });
    await ops.searchRules(search);
    expect(state.dumps).toBe(2);
  });
});
