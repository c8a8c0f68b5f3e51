import { createPause, runSliced, runWhole } from './slices.js';
import type { Sliceable } from './slices.js';

/** Counts to `n`, yielding after each step, and records the steps. */
function* counting(n: number, steps: number[]): Sliceable<number> {
  for (let i = 0; i < n; i++) {
    steps.push(i);
    yield;
  }
  return n;
}

describe('slices', () => {
  it('runWhole runs the work to its end at once', () => {
    const steps: number[] = [];
    expect(runWhole(counting(5, steps))).toBe(5);
    expect(steps).toEqual([0, 1, 2, 3, 4]);
  });

  it('runSliced gives the event loop a turn when a slice has run its time, with the same result', async () => {
    const steps: number[] = [];
    const turns: number[] = [];
    // A pause that asks for a turn after every second step: an immediate queued meanwhile runs
    // between the slices.
    let calls = 0;
    const pause = () => {
      calls++;
      if (calls % 2 !== 0) return undefined;
      return new Promise<void>((resolve) => {
        setImmediate(() => {
          turns.push(steps.length);
          resolve();
        });
      });
    };
    expect(await runSliced(counting(5, steps), pause)).toBe(5);
    expect(steps).toEqual([0, 1, 2, 3, 4]);
    expect(turns).toEqual([2, 4]);
  });

  it("createPause asks for a turn only once its slice's time has passed", async () => {
    const pause = createPause(60_000);
    expect(pause()).toBeUndefined();
    const always = createPause(0);
    let ran = false;
    setImmediate(() => (ran = true));
    await always();
    expect(ran).toBe(true);
  });
});
