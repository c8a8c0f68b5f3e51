import {
  bootstrapMedian,
  bootstrapRatio,
  percentile,
  phaseStats,
  ratio,
  summarize,
} from './stats.js';

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

describe('bootstrapRatio', () => {
  it('gives the ratio of medians inside its interval, the same for the same samples', () => {
    const a = Array.from({ length: 40 }, (_, i) => 100 + (i % 10));
    const b = Array.from({ length: 40 }, (_, i) => 50 + (i % 10));
    const r = bootstrapRatio(a, b);
    expect(r.ratio).toBeCloseTo(104.5 / 54.5, 6);
    expect(r.lo).toBeLessThanOrEqual(r.ratio);
    expect(r.hi).toBeGreaterThanOrEqual(r.ratio);
    expect(r.lo).toBeGreaterThan(1.7);
    expect(r.hi).toBeLessThan(2.2);
    expect(bootstrapRatio(a, b)).toEqual(r);
  });

  it('is wide when the samples spread, and straddles 1 for samples from one distribution', () => {
    const a = [10, 30, 50, 70, 90, 20, 40, 60, 80, 100];
    const r = bootstrapRatio(a, [...a].reverse());
    expect(r.ratio).toBe(1);
    expect(r.lo).toBeLessThan(1);
    expect(r.hi).toBeGreaterThan(1);
  });
});

describe('bootstrapMedian', () => {
  it('brackets the median', () => {
    const r = bootstrapMedian([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(r.median).toBe(5);
    expect(r.lo).toBeLessThanOrEqual(5);
    expect(r.hi).toBeGreaterThanOrEqual(5);
  });
});
