import { ratio, summarize } from './stats.js';

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
