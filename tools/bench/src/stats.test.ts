import { percentile, phaseStats, ratio, summarize } from './stats.js';

describe('summarize', () => {
  it('takes the middle run, or the mean of the two middle runs', () => {
    expect(summarize([30, 10, 20])).toEqual({ runs: [30, 10, 20], median: 20, min: 10, max: 30 });
    expect(summarize([4, 1, 3, 2]).median).toBe(2.5);
  });

  it('refuses no runs', () => {
    expect(() => summarize([])).toThrow('no runs to summarize');
  });
});

describe('ratio', () => {
  it('divides medians', () => {
    expect(ratio(summarize([100, 300, 200]), summarize([4, 5, 6]))).toBe(40);
  });
});

describe('percentile', () => {
  it('uses the nearest rank, as the go-cni peer does', () => {
    const values = [5, 1, 4, 2, 3];
    expect(percentile(values, 50)).toBe(3);
    expect(percentile(values, 95)).toBe(5);
    expect(percentile([1, 2, 3, 4], 50)).toBe(2);
    expect(percentile([7], 95)).toBe(7);
  });
});

describe('phaseStats', () => {
  it('counts failures by message and summarises the successful latencies', () => {
    expect(phaseStats([10, 30, 20], ['x', 'x'], 99)).toEqual({
      ok: 3,
      failed: 2,
      p50Ms: 20,
      p95Ms: 30,
      meanMs: 20,
      totalMs: 99,
      errors: { x: 2 },
    });
  });
});
