// Long CPU work in slices, so that a process serving requests keeps answering while it runs (a
// reap of thousands of leaked allocations plans over tens of thousands of rules: issue 28).
//
// The work is written once, as a generator that `yield`s at points where it may be paused (every
// few hundred rules: a yield costs a generator step, a pause a turn of the event loop). Two
// drivers run it: `runWhole` to the end at once (pure callers, unit tests), and `runSliced`, which
// gives the event loop a turn (`setImmediate`: after pending I/O and timers) whenever the
// current slice has run `sliceMs`. The work is the same either way; only where it may be paused
// differs, so the result is too.
//
// Why slices and not a worker thread: the work's results (parsed rules, plans) are used on this
// thread, and a worker would hand tens of thousands of objects back through a structured clone,
// itself one long block here; slices keep one code path and cost a few percent (docs/architecture.md).

/** Work that may be paused at each `yield`; its return value is the result. */
export type Sliceable<T> = Generator<void, T, void>;

/** The longest a slice runs before the event loop gets a turn, by default. */
export const SLICE_MS = 3;

/** Runs `work` to its end at once. */
export function runWhole<T>(work: Sliceable<T>): T {
  for (;;) {
    const step = work.next();
    if (step.done === true) return step.value;
  }
}

/** A turn of the event loop: pending I/O callbacks and timers run first. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => {
    setImmediate(resolve);
  });
}

/**
 * A pause point for async code that loops over much work: `await pause()` gives the event loop a
 * turn once `sliceMs` have passed since the last turn it gave, and costs a clock read otherwise.
 */
export function createPause(sliceMs: number = SLICE_MS): () => Promise<void> | undefined {
  let since = performance.now();
  return () => {
    if (performance.now() - since < sliceMs) return undefined;
    return nextTurn().then(() => {
      since = performance.now();
    });
  };
}

/**
 * Runs `work`, giving the event loop a turn whenever a slice has run `sliceMs` (default
 * `SLICE_MS`); `pause` (from `createPause`) shares its clock with other loops of the same task.
 */
export async function runSliced<T>(
  work: Sliceable<T>,
  pause: () => Promise<void> | undefined = createPause(),
): Promise<T> {
  for (;;) {
    const step = work.next();
    if (step.done === true) return step.value;
    const turn = pause();
    if (turn !== undefined) await turn;
  }
}
