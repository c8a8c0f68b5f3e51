import {
  bootstrapMedian,
  bootstrapRatio,
  median,
  percentile,
  phaseStats,
  ratio,
  summarize,
  verdict,
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

describe('bootstrapRatio, paired', () => {
  // Two contenders measured side by side while the machine drifts: b is a steady 10% faster
  // than a at every moment, but the drift moves both by far more than 10%.
  const drift = Array.from({ length: 60 }, (_, i) => 100 + 80 * Math.sin(i / 5) + (i % 7));
  const a = drift.map((x) => x * 1.1);
  const b = drift;

  it('sees a steady difference under a drift that hides it from independent resampling', () => {
    const paired = bootstrapRatio(a, b, { paired: true });
    const unpaired = bootstrapRatio(a, b);
    expect(paired.ratio).toBeCloseTo(1.1, 6);
    expect(unpaired.ratio).toBeCloseTo(1.1, 6);
    expect(paired.lo).toBeGreaterThan(1.05);
    expect(paired.hi).toBeLessThan(1.15);
    expect(unpaired.lo).toBeLessThan(1);
    expect(paired).toEqual(bootstrapRatio(a, b, { paired: true }));
  });

  it('leaves out the pairs where either side failed (NaN), and refuses unequal lengths', () => {
    const withFailure = bootstrapRatio([10, Number.NaN, 30, 50], [5, 7, Number.NaN, 25], {
      paired: true,
    });
    expect(withFailure.ratio).toBe(median([10, 50]) / median([5, 25]));
    expect(() => bootstrapRatio([1, 2], [1], { paired: true })).toThrow(
      'paired samples differ in length: 2 and 1',
    );
    expect(() => bootstrapRatio([Number.NaN], [1], { paired: true })).toThrow('no samples');
  });
});

describe('median', () => {
  it('is the middle sample, or the mean of the two middle ones, NaN ignored', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([Number.NaN, 5, 7])).toBe(6);
    expect(median([])).toBeNaN();
  });
});

describe('verdict', () => {
  const atMost = { at: 'most', limit: 0.95 } as const;
  const atLeast = { at: 'least', limit: 1.1 } as const;

  it('is met only when the whole interval is on the goal’s side', () => {
    expect(verdict({ lo: 0.9, hi: 0.95 }, atMost)).toBe('met');
    expect(verdict({ lo: 0.9, hi: 0.951 }, atMost)).toBe('undecided');
    expect(verdict({ lo: 0.96, hi: 1.2 }, atMost)).toBe('missed');
    expect(verdict({ lo: 1.1, hi: 1.3 }, atLeast)).toBe('met');
    expect(verdict({ lo: 1.09, hi: 1.3 }, atLeast)).toBe('undecided');
    expect(verdict({ lo: 0.8, hi: 1.0 }, atLeast)).toBe('missed');
  });

  it('judges one measurement on its value, and nothing on NaN', () => {
    expect(verdict({ lo: 150, hi: 150 }, { at: 'most', limit: 150 })).toBe('met');
    expect(verdict({ lo: 182.5, hi: 182.5 }, { at: 'most', limit: 150 })).toBe('missed');
    expect(verdict({ lo: Number.NaN, hi: Number.NaN }, atMost)).toBe('undecided');
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
