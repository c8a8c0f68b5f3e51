// The reap guard: keeps a reap of leaked state away from state that is being made.
//
// A reap lists the allocations it must spare (`known`), then scans the host and removes whatever
// is tagged with any other id. A setup whose id is not in `known` and that runs while the reap
// scans would have its fresh rules, reservations and cache files removed under it. The rule:
//
//   no operation on an allocation runs while a reap that did not count it is under way.
//
// The two sides:
// - shared: every operation of the allocation queue (setup, check, teardown, forceCleanup, a
//   restore's step, a stray namespace's removal) is on it from the moment it is queued until it
//   ends. The queue asks `admit(id)` before the operation starts (after the operations queued
//   before it on the same allocation, outside the `maxConcurrent` limit so that a held operation
//   takes no slot): it passes at once unless a reap is under way whose `known` lacks `id`, and
//   then after that reap. Setups never wait for one another here. A door needs nothing of its
//   own: calling the runner is enough.
// - exclusive: `reap(fn)` runs one reap at a time (a second waits for the first, in call order).
//   A reap waiting for another one leaves at once when its caller's signal aborts.
//   Its `known` is taken when it starts: every record, and every allocation with an operation
//   queued or running (`live()`), i.e. everything on the shared side then. The reaper gives
//   `known` to the configurator, so an operation that was already on the shared side is spared
//   rather than waited for; one queued later waits. Nothing on the exclusive side waits for the
//   shared side, so a reap never waits behind a slow setup and there is no deadlock with the
//   queue: work that needs a queue turn (removing a stray namespace) runs after `fn` returns.
//
// This is the readers–writer rule (setups shared, reaps exclusive, a setup arriving during a reap
// goes after it) with one change: the readers already in when a reap starts are counted as known
// instead of waited for. Both keep the same invariant, that a reap's `known` covers every
// allocation whose state can change while it runs.

import { RunnerError } from './errors.js';

/** The guard that the queue and the reapers share (context.ts builds one per runner). */
export interface ReapGuard {
  /** Waits while a reap that did not count `allocId` as known is under way. */
  admit(allocId: string): Promise<void>;
  /**
   * Runs `fn` as the only reap, with the ids it must spare; the next reap waits for it. A
   * `signal` that aborts while this reap waits for an earlier one rejects it at once with
   * `aborted` and `fn` never runs; once it has started, the signal is `fn`'s to honour.
   */
  reap<T>(fn: (known: ReadonlySet<string>) => Promise<T>, signal?: AbortSignal): Promise<T>;
}

function abortedReap(signal: AbortSignal): RunnerError {
  return new RunnerError('the reap of leaked state was aborted before its turn', {
    code: 'aborted',
    cause: signal.reason,
  });
}

/** `live()`: the ids a reap must spare when it starts (every record, every queued operation). */
export function createReapGuard(live: () => Iterable<string>): ReapGuard {
  let current: { readonly known: ReadonlySet<string>; readonly done: Promise<void> } | undefined;
  // The end of the last reap asked for: reaps run one after the other in call order.
  let tail: Promise<void> = Promise.resolve();

  async function run<T>(fn: (known: ReadonlySet<string>) => Promise<T>): Promise<T> {
    const known = new Set(live());
    let release = () => {
      // Replaced below.
    };
    current = { known, done: new Promise<void>((resolve) => (release = resolve)) };
    try {
      return await fn(known);
    } finally {
      current = undefined;
      release();
    }
  }

  return {
    async admit(allocId) {
      while (current !== undefined && !current.known.has(allocId)) await current.done;
    },

    reap(fn, signal) {
      let started = false;
      const result = tail.then(() => {
        if (signal?.aborted === true) throw abortedReap(signal);
        started = true;
        return run(fn);
      });
      tail = result.then(
        () => undefined,
        () => undefined,
      );
      if (signal === undefined) return result;
      return new Promise((resolve, reject) => {
        const onAbort = () => {
          if (!started) reject(abortedReap(signal));
        };
        if (signal.aborted) onAbort();
        else signal.addEventListener('abort', onAbort, { once: true });
        result.then(resolve, reject).finally(() => {
          signal.removeEventListener('abort', onAbort);
        });
      });
    },
  };
}
