import pLimit from 'p-limit';
import { RunnerError } from './errors.js';

/**
 * The runner's concurrency rules, in one place:
 * - operations on one allocation run one at a time, in the order they were called (a promise
 *   chain per allocation id);
 * - operations on different allocations run in parallel, at most `maxConcurrent` at once (one
 *   p-limit shared by all; FIFO); the restore after a start runs in a lane of its own, with a
 *   p-limit of the same size, so that a thousand allocations being restored never make a new
 *   allocation's setup wait (an operation on an allocation being restored waits for that one
 *   restore only: it is behind it in the allocation's chain);
 * - before an operation starts, `beforeStart(id)` may hold it (the reap guard, reap-guard.ts,
 *   holds operations on allocations a reap under way did not count as known), outside the limit
 *   so that a held operation takes no slot;
 * - an operation whose signal aborts before it starts never runs and rejects with `aborted` at
 *   once; once started, the signal is the operation's to honour.
 */
/** Which p-limit an operation takes a slot of: `restore` for the restore after a start. */
export type QueueLane = 'operations' | 'restore';

export interface AllocQueue {
  run<T>(allocId: string, fn: () => Promise<T>, signal?: AbortSignal, lane?: QueueLane): Promise<T>;
  /** Ids with an operation queued or running. */
  activeIds(): string[];
  /** Operations running now / waiting for their turn. */
  readonly running: number;
  readonly waiting: number;
  /** Resolves when no operation is queued or running (including ones queued meanwhile). */
  idle(): Promise<void>;
}

export interface AllocQueueOptions {
  readonly maxConcurrent: number;
  readonly beforeStart?: (allocId: string) => Promise<void>;
}

export function abortedError(allocId: string, signal: AbortSignal): RunnerError {
  return new RunnerError(`the operation on allocation "${allocId}" was aborted`, {
    code: 'aborted',
    allocId,
    cause: signal.reason,
  });
}

export function createAllocQueue(options: AllocQueueOptions): AllocQueue {
  const limits: Readonly<Record<QueueLane, ReturnType<typeof pLimit>>> = {
    operations: pLimit(options.maxConcurrent),
    restore: pLimit(options.maxConcurrent),
  };
  const tails = new Map<string, Promise<void>>();
  const active = new Map<string, number>();
  const inFlight = new Set<Promise<void>>();
  let queued = 0;

  return {
    run<T>(
      allocId: string,
      fn: () => Promise<T>,
      signal?: AbortSignal,
      lane: QueueLane = 'operations',
    ): Promise<T> {
      active.set(allocId, (active.get(allocId) ?? 0) + 1);
      queued++;
      let started = false;
      const prev = tails.get(allocId) ?? Promise.resolve();
      const op = prev.then(async () => {
        if (options.beforeStart !== undefined) await options.beforeStart(allocId);
        return limits[lane](async () => {
          started = true;
          queued--;
          if (signal?.aborted === true) throw abortedError(allocId, signal);
          return fn();
        });
      });
      const tail = op.then(
        () => undefined,
        () => undefined,
      );
      tails.set(allocId, tail);
      inFlight.add(tail);
      void tail.then(() => {
        if (!started) queued--;
        inFlight.delete(tail);
        const left = (active.get(allocId) ?? 1) - 1;
        if (left === 0) active.delete(allocId);
        else active.set(allocId, left);
        if (tails.get(allocId) === tail) tails.delete(allocId);
      });
      if (signal === undefined) return op;
      return new Promise<T>((resolve, reject) => {
        const onAbort = () => {
          if (!started) reject(abortedError(allocId, signal));
        };
        if (signal.aborted) onAbort();
        else signal.addEventListener('abort', onAbort, { once: true });
        op.then(resolve, reject).finally(() => {
          signal.removeEventListener('abort', onAbort);
        });
      });
    },

    activeIds: () => [...active.keys()],
    get running() {
      return limits.operations.activeCount + limits.restore.activeCount;
    },
    get waiting() {
      return queued;
    },

    async idle() {
      while (inFlight.size > 0) await Promise.all([...inFlight]);
    },
  };
}
