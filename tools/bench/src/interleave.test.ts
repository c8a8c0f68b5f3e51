import { interleave, roundOrder } from './interleave.js';

const FOUR = ['agent', 'peer', 'floor', 'lib'] as const;

describe('roundOrder', () => {
  it('runs the rows of a Williams square: agent, peer, lib, floor first', () => {
    expect([0, 1, 2, 3, 4].map((r) => roundOrder(FOUR, r).join(' '))).toEqual([
      'agent peer lib floor',
      'peer floor agent lib',
      'floor lib peer agent',
      'lib agent floor peer',
      'agent peer lib floor',
    ]);
  });

  it('puts every contender in every position once, and after every other once, over n rounds', () => {
    for (const n of [2, 4, 6]) {
      const items = Array.from({ length: n }, (_, i) => i);
      const rows = items.map((r) => roundOrder(items, r));
      for (let position = 0; position < n; position++)
        expect(new Set(rows.map((row) => row[position])).size).toBe(n);
      const follows = rows.flatMap((row) => row.slice(1).map((x, i) => `${row[i]}>${x}`));
      expect(new Set(follows).size).toBe(n * (n - 1));
      expect(follows).toHaveLength(n * (n - 1));
    }
  });

  it('balances an odd number over 2n rounds with the mirrored rows', () => {
    const items = [0, 1, 2];
    const rows = Array.from({ length: 6 }, (_, r) => roundOrder(items, r));
    expect(rows.map((row) => row.join(''))).toEqual(['012', '120', '201', '210', '021', '102']);
    const follows = rows.flatMap((row) => row.slice(1).map((x, i) => `${row[i]}>${x}`));
    for (const pair of ['0>1', '1>0', '0>2', '2>0', '1>2', '2>1'])
      expect(follows.filter((f) => f === pair)).toHaveLength(2);
  });

  it('alternates two contenders, and refuses a round that is not a whole number from 0', () => {
    expect([0, 1, 2].map((r) => roundOrder(['direct', 'agent'], r).join(' '))).toEqual([
      'direct agent',
      'agent direct',
      'direct agent',
    ]);
    expect(() => roundOrder(FOUR, -1)).toThrow('round -1 is not a whole number from 0');
    expect(() => roundOrder(FOUR, 1.5)).toThrow('round 1.5 is not a whole number from 0');
  });
});

describe('interleave', () => {
  it('gives allocation i of every contender in round i, operation by operation', () => {
    expect(interleave(['a', 'b'], 3).map((t) => `${t.contender}${t.index}`)).toEqual([
      'a0',
      'b0',
      'b1',
      'a1',
      'a2',
      'b2',
    ]);
    expect(interleave(['a', 'b'], 1, 1).map((t) => `${t.contender}${t.index}`)).toEqual([
      'b0',
      'a0',
    ]);
  });
});
