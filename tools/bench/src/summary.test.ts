import {
  coldReapRatio,
  restoreRatio,
  scaleWindowList,
  servingRatio,
  setupWindow,
  teardownWindow,
  warmReapRatio,
} from './summary.js';
import type { ScaleRun } from './summary.js';

describe('scaleWindowList', () => {
  it('gives 1–20, 1–W, 91–110, 231–250 and the last W, in order', () => {
    expect(scaleWindowList(1000, 50)).toEqual([
      { from: 1, to: 20 },
      { from: 1, to: 50 },
      { from: 91, to: 110 },
      { from: 231, to: 250 },
      { from: 951, to: 1000 },
    ]);
  });

  it('keeps only the windows that fit, each once', () => {
    expect(scaleWindowList(250, 20)).toEqual([
      { from: 1, to: 20 },
      { from: 91, to: 110 },
      { from: 231, to: 250 },
    ]);
    expect(scaleWindowList(100, 20)).toEqual([
      { from: 1, to: 20 },
      { from: 81, to: 100 },
    ]);
  });
});

describe('windows of a climb', () => {
  // Setup i (0-based) made i + 1 live; teardown j was made with 10 - j live.
  const setups = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
  const teardowns = [10, 9, 8, 7, 6, 5, 4, 3, 2, 1];

  it('takes the setups that made `from`…`to` live', () => {
    expect(setupWindow(setups, { from: 1, to: 3 })).toEqual([1, 2, 3]);
    expect(setupWindow(setups, { from: 8, to: 10 })).toEqual([8, 9, 10]);
  });

  it('takes the teardowns made with `to` down to `from` live', () => {
    expect(teardownWindow(teardowns, 10, { from: 1, to: 3 })).toEqual([3, 2, 1]);
    expect(teardownWindow(teardowns, 10, { from: 8, to: 10 })).toEqual([10, 9, 8]);
  });
});

describe('ratios to this run’s comparators', () => {
  it('divides a warm reap by its own save read, pair by pair', () => {
    // Each reap is twice its save read under a drift: the paired interval is the ratio itself.
    const r = warmReapRatio({ method: 'allocnet', shape: 'full', allocs: 1000, runsMs: [200, 400, 300, 260], saveMs: [100, 200, 150, 130] }); // prettier-ignore
    expect(r).toEqual({ ratio: 2, lo: 2, hi: 2 });
  });

  it('divides a cold reap by the sum of its save read and node -e 0 of the same round', () => {
    const r = coldReapRatio({
      leaks: 1000,
      cliMs: [600, 900],
      saveMs: [100, 200],
      nodeMs: [100, 100],
    });
    expect(r).toEqual({ ratio: 3, lo: 3, hi: 3 });
  });

  it('divides one restore by M × the floor’s CHECK, its interval over the CHECKs', () => {
    const s = {
      live: 100,
      restart: { restoreMs: 500 },
      floor: { full: { checkMs: [40, 50, 60, 50, 50] } },
    } as unknown as ScaleRun;
    const r = restoreRatio(s);
    expect(r.ratio).toBe(0.1);
    expect(r.lo).toBeGreaterThanOrEqual(500 / 6000 - 1e-9);
    expect(r.hi).toBeLessThanOrEqual(500 / 4000 + 1e-9);
    expect(r.lo).toBeLessThan(r.hi);
  });

  it('divides serving with M by the median of the agents holding nothing', () => {
    const s = {
      restart: { spawnToFirstAnswerMs: 900 },
      servingEmptyMs: [500, 600, 700],
    } as unknown as ScaleRun;
    expect(servingRatio(s).ratio).toBe(1.5);
  });
});
