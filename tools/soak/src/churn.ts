// The churn: `count` setup→teardown cycles, `width` of them in flight. Concurrency: `width`
// workers, each owning one slot (and so one host port, PORT_BASE + slot, never used by two
// cycles at once); each takes the next cycle number until none is left or the signal aborts, and
// runs its setup then its teardown. A failed setup is still torn down, as a scheduler would. The
// counters are only touched between awaits, so the single-threaded loop needs no lock.
import { setMaxListeners } from 'node:events';
import { PORT_BASE } from './args.js';

/** The agent as the churn uses it; the real one is two gRPC calls (soak.ts). */
export interface AllocOps {
  setup(allocId: string, hostPort: number, signal: AbortSignal): Promise<void>;
  teardown(allocId: string, signal: AbortSignal): Promise<void>;
}

export interface ChurnProgress {
  readonly done: number;
  readonly count: number;
  /** Cycles with a failed setup or teardown so far. */
  readonly failures: number;
  readonly elapsedMs: number;
  readonly rssMiB: number;
}

export interface ChurnOptions {
  readonly count: number;
  readonly width: number;
  /** After this many cycles are done, the agent's RSS is read as the warm reading. */
  readonly warmup: number;
  readonly progressEvery: number;
  readonly ops: AllocOps;
  /** The agent's RSS in MiB. */
  readonly rss: () => Promise<number>;
  readonly onProgress: (progress: ChurnProgress) => void;
  /** Stops taking cycles and cancels the calls in flight. */
  readonly signal: AbortSignal;
  /** Milliseconds from an arbitrary origin. Default `performance.now`. */
  readonly now?: () => number;
}

/** The failures kept verbatim; the rest are only counted. */
export const MAX_FAILURES_KEPT = 20;

export interface ChurnResult {
  /** Cycles that ran to their end (passed or failed). */
  readonly done: number;
  /** Cycles with a failed setup or teardown. */
  readonly failures: number;
  /** The first `MAX_FAILURES_KEPT` failures: `<alloc id> <setup|teardown>: <why>`. */
  readonly failureMessages: readonly string[];
  readonly setupMs: readonly number[];
  readonly teardownMs: readonly number[];
  /** Undefined when the churn stopped before the warm-up was over. */
  readonly warmRssMiB: number | undefined;
  readonly elapsedMs: number;
}

/** The allocation id of cycle `n` (0-based); `soak-warmup` is the baseline's. */
export function cycleAllocId(n: number): string {
  return `soak-${String(n).padStart(7, '0')}`;
}

export async function churn(options: ChurnOptions): Promise<ChurnResult> {
  const { count, width, ops } = options;
  // A worker that throws (the agent's RSS could not be read: it is gone) stops the others too.
  const broken = new AbortController();
  const signal = AbortSignal.any([options.signal, broken.signal]);
  // Every call in flight listens to it: `width` listeners are expected, not a leak.
  setMaxListeners(width + 10, signal);
  const now = options.now ?? (() => performance.now());
  const started = now();
  const setupMs: number[] = [];
  const teardownMs: number[] = [];
  const failureMessages: string[] = [];
  let next = 0;
  let done = 0;
  let failures = 0;
  let warmRssMiB: number | undefined;

  const timed = async (
    into: number[],
    what: string,
    allocId: string,
    op: () => Promise<void>,
  ): Promise<boolean> => {
    const t0 = now();
    try {
      await op();
      into.push(now() - t0);
      return true;
    } catch (error) {
      if (failureMessages.length < MAX_FAILURES_KEPT)
        failureMessages.push(`${allocId} ${what}: ${(error as Error).message}`);
      return false;
    }
  };

  const worker = async (slot: number): Promise<void> => {
    const hostPort = PORT_BASE + slot;
    // A function, not the property: it changes while this worker awaits.
    const stopped = () => signal.aborted;
    while (next < count && !stopped()) {
      const allocId = cycleAllocId(next++);
      const setUp = await timed(setupMs, 'setup', allocId, () =>
        ops.setup(allocId, hostPort, signal),
      );
      const tornDown = await timed(teardownMs, 'teardown', allocId, () =>
        ops.teardown(allocId, signal),
      );
      // A cycle cancelled by the signal is neither done nor failed: the soak stops here.
      if (stopped()) return;
      // This cycle's number among the done ones: `done` moves on while this worker awaits.
      const nth = ++done;
      if (!setUp || !tornDown) failures++;
      if (nth === options.warmup) warmRssMiB = await options.rss();
      if (nth % options.progressEvery === 0 || nth === count)
        options.onProgress({
          done: nth,
          count,
          failures,
          elapsedMs: now() - started,
          rssMiB: await options.rss(),
        });
    }
  };
  const workers = await Promise.allSettled(
    Array.from({ length: Math.min(width, count) }, (_, slot) =>
      worker(slot).catch((error: unknown) => {
        broken.abort();
        throw error;
      }),
    ),
  );
  for (const w of workers) if (w.status === 'rejected') throw w.reason;
  return {
    done,
    failures,
    failureMessages,
    setupMs,
    teardownMs,
    warmRssMiB,
    elapsedMs: now() - started,
  };
}
