// The runner's own life, apart from any allocation: starting (restore, the first reconcile, the
// reconciler's timer), closing (refuse new work, stop the timers, wait for the queue, close the
// store), and the store retry kicked after each operation. runner.ts asks it before each call.
import type { RunnerContext } from './context.js';
import { inTurn } from './context.js';
import { RunnerError } from './errors.js';
import type { RunnerSettings } from './options.js';
import { createReconciler } from './reconciler.js';
import type { ReconcileReport } from './reconciler.js';
import { holdRecorded, restore } from './restore.js';
import type { RestoreReport } from './restore.js';
import { createStoreRetry } from './store-retry.js';

export interface OperationOptions {
  readonly signal?: AbortSignal;
}

/** `startInBackground`'s options. */
export interface BackgroundOptions extends OperationOptions {
  /**
   * The holds of the recorded addresses, then the restore, begin once this settles (the agent:
   * once it answers, so that its first answers do not wait behind a thousand allocations' work).
   * Operations are admitted after the holds all the same.
   */
  readonly after?: Promise<unknown>;
}

export interface StartReport {
  readonly restore: RestoreReport;
  readonly reconcile: ReconcileReport;
}

/** A start whose restore runs in the background (`startInBackground`). */
export interface BackgroundStart {
  /** Allocations to restore: their records, now marked restoring (`isRestoring`). */
  readonly restoring: number;
  /**
   * Settles once the restore and the first reconcile are done (rejects as `start` would; with
   * `aborted` when `close()` stopped it first).
   */
  readonly done: Promise<StartReport>;
}

export interface RunControl {
  /** Throws `shutting-down` once `close()` was called. */
  readonly refuseIfClosing: () => void;
  /** `fn` in the allocation's turn, with its deadline (context.ts `inTurn`), then the retry's kick. */
  readonly inTurn: <T>(
    allocId: string,
    fn: (signal: AbortSignal) => Promise<T>,
    caller: AbortSignal | undefined,
  ) => Promise<T>;
  /** Restore (in the restore lane), then the retry's kick. */
  restore(signal: AbortSignal | undefined): Promise<RestoreReport>;
  /** Restore, the first reconcile, then the timer; once (a second call is a `conflict`). */
  begin(options: BackgroundOptions): BackgroundStart;
  reconcile(signal: AbortSignal | undefined): Promise<ReconcileReport>;
  close(): Promise<void>;
}

function shuttingDown(): RunnerError {
  return new RunnerError('the allocation runner is shutting down', { code: 'shutting-down' });
}

export function createRunControl(ctx: RunnerContext, settings: RunnerSettings): RunControl {
  const { mode, intervalMs, storeRetryMs } = settings;
  let closing = false;
  let closed: Promise<void> | undefined;
  let started = false;
  const reconciler = createReconciler(ctx, { mode, intervalMs, closing: () => closing });
  const storeRetry = createStoreRetry(ctx, { intervalMs: storeRetryMs, closing: () => closing });
  // Aborted by close(): a restore under way stops (what is not restored yet is, next start).
  const closeSignal = new AbortController();
  // Operations are admitted (to the queue) once the recorded addresses are held (`begin`);
  // undefined when they are (or there was nothing to hold), so an operation enters at once.
  let admitted: Promise<void> | undefined;

  /** `run`, then starts the store retry if a write found the data dir full. */
  async function andKick<T>(run: Promise<T>): Promise<T> {
    try {
      return await run;
    } finally {
      storeRetry.kick();
    }
  }

  function refuseIfClosing(): void {
    if (closing) throw shuttingDown();
  }

  function begin(opts: BackgroundOptions): BackgroundStart {
    refuseIfClosing();
    if (started) {
      throw new RunnerError('the allocation runner is already started', { code: 'conflict' });
    }
    started = true;
    const signal =
      opts.signal === undefined
        ? closeSignal.signal
        : AbortSignal.any([opts.signal, closeSignal.signal]);
    const restoring = ctx.store.list().length;
    // Quick (a small file per address), and before any operation: no setup runs an IPAM plugin
    // before every recorded address is held.
    const after = opts.after?.catch(() => undefined) ?? Promise.resolve();
    const holding = after
      .then(() => holdRecorded(ctx, signal))
      .finally(() => {
        if (admitted === holding) admitted = undefined;
      });
    admitted = holding;
    const done = (async () => {
      await holding;
      const restored = await andKick(restore(ctx, signal));
      let reconciled: ReconcileReport;
      try {
        reconciled = await reconciler.reconcile(signal);
      } finally {
        reconciler.schedule();
      }
      return { restore: restored, reconcile: reconciled };
    })();
    return { restoring, done };
  }

  return {
    refuseIfClosing,
    inTurn: (allocId, fn, caller) =>
      andKick(
        admitted === undefined
          ? inTurn(ctx, allocId, fn, caller)
          : admitted.then(() => inTurn(ctx, allocId, fn, caller)),
      ),
    restore: (signal) => andKick(restore(ctx, signal)),
    begin,

    async reconcile(signal) {
      if (signal?.aborted === true) {
        throw new RunnerError('reconcile was aborted', { code: 'aborted', cause: signal.reason });
      }
      return reconciler.reconcile(signal);
    },

    close() {
      if (closed !== undefined) return closed;
      closing = true;
      closeSignal.abort(shuttingDown());
      // Stops the timer now; waits for a running reconcile after the queue is idle.
      const stopped = reconciler.stop();
      const retryStopped = storeRetry.stop();
      closed = (async () => {
        await retryStopped;
        await ctx.queue.idle();
        await stopped;
        await ctx.store.close();
      })();
      return closed;
    },
  };
}
