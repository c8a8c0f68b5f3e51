import type { Rule } from '@allocnet/iptables-node';
import { inChainOrder } from './leaks.js';
import { EMPTY_PLAN } from './plan.js';
import type { Plan, PlannedRule } from './plan.js';

/** A leak's part of a plan: rules in chains of the given sizes, at the given positions. */
function part(...places: { chain: string; position: number; chainSize: number }[]): Plan {
  const rules: PlannedRule[] = places.map(({ chain, position, chainSize }) => ({
    family: 'ipv4',
    rule: { table: 'nat', chain, spec: [], matches: [], comment: undefined, target: undefined },
    owner: undefined,
    place: { position, chainSize },
  }));
  return { ...EMPTY_PLAN, rules };
}

const UNPLACED: Plan = {
  ...EMPTY_PLAN,
  rules: [
    {
      family: 'ipv4',
      rule: { table: 'nat', chain: 'POSTROUTING' } as Rule,
      owner: undefined,
    },
  ],
};

describe('inChainOrder', () => {
  it('orders leaks by their first rule’s place in the shared chains, as a share of each chain', () => {
    // Random ids, made in the order c, a, b: the chains hold them in that order.
    const groups = new Map<string | undefined, Plan>([
      ['a', part({ chain: 'POSTROUTING', position: 1, chainSize: 3 }, { chain: 'CNI-FORWARD', position: 2, chainSize: 6 })],
      ['b', part({ chain: 'CNI-FORWARD', position: 4, chainSize: 6 })],
      ['c', part({ chain: 'POSTROUTING', position: 0, chainSize: 3 }, { chain: 'CNI-FORWARD', position: 1, chainSize: 6 })],
    ]); // prettier-ignore
    expect(inChainOrder(['a', 'b', 'c'], groups)).toEqual(['c', 'a', 'b']);
  });

  it('puts leaks with no placed rule last, in the order given, and keeps ties in that order', () => {
    const groups = new Map<string | undefined, Plan>([
      ['x', UNPLACED],
      ['y', part({ chain: 'POSTROUTING', position: 2, chainSize: 4 })],
      ['z', part({ chain: 'CNI-FORWARD', position: 4, chainSize: 8 })],
    ]);
    expect(inChainOrder(['x', 'w', 'z', 'y'], groups)).toEqual(['z', 'y', 'x', 'w']);
    expect(inChainOrder(['y', 'z'], groups)).toEqual(['y', 'z']);
  });
});
