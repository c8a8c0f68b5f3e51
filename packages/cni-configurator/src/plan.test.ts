import { EMPTY_PLAN, EMPTY_STATE, counts, describePlan, isEmpty } from './plan.js';
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
