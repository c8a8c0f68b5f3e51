import { EMPTY_PLAN, EMPTY_STATE, counts, describePlan, isEmpty } from './plan.js';
import { parseIptablesSave } from '@allocnet/iptables-node';
import type { Rule } from '@allocnet/iptables-node';
import type { Plan } from './plan.js';

describe('isEmpty', () => {
  it('says the same of a plan and of the report it makes', () => {
    expect(isEmpty(EMPTY_PLAN)).toBe(true);
    expect(isEmpty(EMPTY_STATE)).toBe(true);
    const cacheOnly: Plan = {
      ...EMPTY_PLAN,
      cache: [
        { kind: 'result', network: 'nomad', allocId: 'a1', ifName: 'eth0', path: '/c/nomad-a1' },
      ],
    };
    expect(isEmpty(cacheOnly)).toBe(false);
    expect(isEmpty(describePlan(cacheOnly))).toBe(false);
    expect(counts(cacheOnly)).toEqual({ rules: 0, chains: 0, reservations: 0, cacheFiles: 1 });
    expect(counts(describePlan(cacheOnly))).toEqual(counts(cacheOnly));
  });
});

describe('describePlan', () => {
  it('reports each rule with its line as iptables-save writes it, in JSON too', () => {
    const line =
      '-A CNI-FORWARD -s 10.88.0.5/32 -m comment --comment "name: \\"n\\" id: \\"a\\"" -j ACCEPT';
    const [filter] = parseIptablesSave(`*filter\n:CNI-FORWARD - [0:0]\n${line}\nCOMMIT\n`);
    const rule = filter?.rules[0] as Rule;
    const state = describePlan({ ...EMPTY_PLAN, rules: [{ family: 'ipv4', rule, owner: 'a' }] });
    expect(state.rules).toEqual([{ family: 'ipv4', table: 'filter', chain: 'CNI-FORWARD', line }]);
    expect((JSON.parse(JSON.stringify(state)) as typeof state).rules).toEqual([
      { family: 'ipv4', table: 'filter', chain: 'CNI-FORWARD', line },
    ]);
  });
});
