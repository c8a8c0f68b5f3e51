// The allocation runner: one allocation's network lifecycle on this node, with durable records,
// restore after a restart and a reconciler. This file is the facade: it checks the options, opens
// the store, builds the shared context (context.ts) and puts every operation in its
// allocation's turn of the queue; the work is in lifecycle.ts (setup / check / teardown),
// restore.ts (settling what a restart left) and reconciler.ts (host state against the records).
import { silentLogger } from '@allocnet/base';
import type { AllocNetworkStatus, AllocNetworking, LeakSweeper } from '@allocnet/cni-configurator';
import { createRunnerContext, inTurn as runInTurn, systemClock } from './context.js';
import type { Logger } from '@allocnet/base';
import type { Clock } from './context.js';
import { crashPointsFromEnv } from './crash.js';
import {
  DEFAULT_MAX_CONCURRENT,
  DEFAULT_NETNS_PREFIX,
  DEFAULT_OPERATION_TIMEOUT_MS,
  DEFAULT_RECONCILE_INTERVAL_MS,
  DEFAULT_RECONCILE_MODE,
  DEFAULT_STORE_RETRY_MS,
} from './defaults.js';
import type { CrashPoints } from './crash.js';
import { RunnerError } from './errors.js';
import { check, setup, teardown } from './lifecycle.js';
import type { CheckReport, RunnerTeardownReport } from './lifecycle.js';
import { checkNetnsName, createIpNetnsManager } from './netns.js';
import type { NetnsManager } from './netns.js';
import { createReconciler, findLeaks, reapLeaks } from './reconciler.js';
import type {
  ReapOptions,
  ReconcileMode,
  ReconcileReport,
  RunnerLeakReport,
  RunnerReapReport,
} from './reconciler.js';
import type { AllocPhase, AllocRecord } from './record.js';
import { restore, settle } from './restore.js';
import type { RestoreReport } from './restore.js';
import { checkAllocId, decodeSpec } from './spec.js';
import type { RunnerSpec } from './spec.js';
import { createStoreRetry } from './store-retry.js';
import { openRunnerStore } from './store.js';
import type { RunnerStore, StoreHealth } from './store.js';

export interface ReconcileOptions {
  /** `reap` removes what belongs to no allocation; `report` only counts it. Default `report` (defaults.ts). */
  readonly mode?: ReconcileMode;
  /** Between the end of one reconcile and the start of the next; 0 turns it off. Default 300 000. */
  readonly intervalMs?: number;
}

export interface AllocRunnerOptions {
  /**
   * The agent's configurator, seen through the runner's two seams: the allocation-level
   * operations and the leak sweeper. The runner never closes it.
   */
  readonly configurator: AllocNetworking & LeakSweeper;
  /** The agent's data directory; the store is LMDB at `<dataDir>/state`. */
  readonly dataDir: string;
  /**
   * The store seam: one already opened (with `openRunnerStore`, possibly wrapped by a test). The
   * runner owns it from here and closes it on `close()`. Default: `openRunnerStore({ dataDir })`.
   */
  readonly store?: RunnerStore;
  /** Default `createIpNetnsManager()` (`ip netns` on this host). */
  readonly netns?: NetnsManager;
  /**
   * Namespaces the runner makes are `<netnsPrefix><allocId>`, and the reconciler treats every
   * namespace named `<netnsPrefix><a valid allocation id>` that no record has as its own leak.
   * No other program's namespaces may start with it. Default `alloc-`.
   */
  readonly netnsPrefix?: string;
  /** Operations on different allocations at once. Default 8. */
  readonly maxConcurrent?: number;
  /**
   * After a write found the data dir full: how often to probe it for space, and then remove the
   * records it kept (store-retry.ts); 0 turns the timer off (the next operation still retries).
   * Default 5 000.
   */
  readonly storeRetryMs?: number;
  /**
   * The deadline of one operation from the start of its turn: its signal aborts then (a setup
   * rolls back, `timed-out`), so that nothing holds an allocation's queue for ever. Every seam
   * honours the signal (plugins and host commands are killed). Default 600 000 (10 minutes).
   */
  readonly operationTimeoutMs?: number;
  readonly reconcile?: ReconcileOptions;
  readonly logger?: Logger;
  readonly clock?: Clock;
  /** Default `crashPointsFromEnv()`: `ALLOCNET_CRASH_AT`, read once, here. Only tests set it. */
  readonly crashPoints?: CrashPoints;
}

export interface OperationOptions {
  readonly signal?: AbortSignal;
}

export interface StartReport {
  readonly restore: RestoreReport;
  readonly reconcile: ReconcileReport;
}

/** Counters for the agent's metrics; monotonic unless said otherwise. */
export interface RunnerStats {
  /** Records by phase, now. */
  readonly allocations: Readonly<Record<AllocPhase, number>>;
  /** Ready allocations, now. */
  readonly live: number;
  /** Operations running / waiting for their turn, now. */
  readonly running: number;
  readonly waiting: number;
  /** Allocations the restore after the start has not settled yet, now. */
  readonly restoring: number;
  readonly setups: number;
  readonly setupFailures: number;
  readonly teardowns: number;
  readonly teardownFailures: number;
  readonly checks: number;
  readonly checkFailures: number;
  readonly restored: number;
  readonly recreated: number;
  readonly restoreFailures: number;
  readonly reconciles: number;
  readonly reconcileFailures: number;
  readonly leaksFound: number;
  readonly leaksReaped: number;
  readonly orphanNamespacesFound: number;
  readonly orphanNamespacesReaped: number;
  /**
   * Not monotonic: leaked allocations and stray namespaces the last reconcile pass left on the
   * node (in `report` mode all it found; in `reap` mode those it could not remove).
   */
  readonly leakedLeft: number;
  readonly strayNamespacesLeft: number;
  /** The state store, now: writable, or full since when and why; failed writes so far. */
  readonly store: StoreHealth;
  /** Allocations whose network is gone but whose record a full data dir kept, now. */
  readonly unremovedRecords: number;
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

export interface AllocRunner {
  /** Restore, then one reconcile, then the reconciler every `intervalMs`. Call it once. */
  start(options?: OperationOptions): Promise<StartReport>;
  /**
   * `start`, without waiting: operations are served at once. Each record is restored in its
   * allocation's turn, in a lane of the queue of its own (queue.ts), so that an operation on an
   * allocation being restored waits for that one restore only and a new allocation does not
   * wait at all. The first reconcile follows the restore. `close()` aborts a restore under way.
   * Call it, or `start`, once.
   */
  startInBackground(options?: OperationOptions): BackgroundStart;
  /** Whether the restore after the start has not settled this allocation yet. */
  isRestoring(allocId: string): boolean;
  /** Settles every record left by the last run (see `RestoreResult`). `start` calls it. */
  restore(options?: OperationOptions): Promise<RestoreReport>;
  /**
   * Gives the allocation its network; the spec is decoded first (`invalid-argument` naming the
   * field). Repeated with an equal spec it returns the stored status without running anything;
   * with a different one it fails with `conflict`.
   */
  setup(spec: RunnerSpec, options?: OperationOptions): Promise<AllocNetworkStatus>;
  /** CHECK of a ready allocation with exactly what its ADD used. */
  check(allocId: string, options?: OperationOptions): Promise<CheckReport>;
  /**
   * Removes the allocation's network and record. An unknown allocation is not an error: the
   * configurator's sweep runs for its id, and a namespace `<netnsPrefix><id>` is removed.
   */
  teardown(allocId: string, options?: OperationOptions): Promise<RunnerTeardownReport>;
  /** The allocation's record, as last committed. */
  get(allocId: string): AllocRecord | undefined;
  /** Every record, by allocation id. */
  list(): AllocRecord[];
  /**
   * Leaks now, for an operator (the configurator's `findLeaks` with every record as known; an
   * allocation that got its record while the scan ran is left out), and the namespaces named
   * `<netnsPrefix><id>` that no allocation has. Counted in `leaksFound`, `orphanNamespacesFound`.
   */
  findLeaks(options?: OperationOptions): Promise<RunnerLeakReport>;
  /**
   * Removes them (the configurator's `reapLeaks`, then each stray namespace in its allocation's
   * turn of the queue, unless an allocation has it by then); counted in `leaksFound`,
   * `leaksReaped`, `orphanNamespacesFound` and `orphanNamespacesReaped`.
   */
  reapLeaks(options?: ReapOptions): Promise<RunnerReapReport>;
  /** Compares host state with the records now (a running reconcile is joined, not repeated). */
  reconcile(options?: OperationOptions): Promise<ReconcileReport>;
  stats(): RunnerStats;
  /** Refuses new operations, waits for the running and queued ones, stops the reconciler, closes the store. */
  close(): Promise<void>;
}

/**
 * Opens the store at `<dataDir>/state` (creating or migrating it) and returns the runner. Nothing
 * else runs until `start()` or `restore()` is called: call `start()` before serving requests.
 */
export async function createAllocRunner(options: AllocRunnerOptions): Promise<AllocRunner> {
  const prefix = options.netnsPrefix ?? DEFAULT_NETNS_PREFIX;
  const maxConcurrent = options.maxConcurrent ?? DEFAULT_MAX_CONCURRENT;
  const mode = options.reconcile?.mode ?? DEFAULT_RECONCILE_MODE;
  const intervalMs = options.reconcile?.intervalMs ?? DEFAULT_RECONCILE_INTERVAL_MS;
  const storeRetryMs = options.storeRetryMs ?? DEFAULT_STORE_RETRY_MS;
  const operationTimeoutMs = options.operationTimeoutMs ?? DEFAULT_OPERATION_TIMEOUT_MS;
  if (prefix === '') {
    // Every namespace on the host would look like the runner's to the reconciler.
    throw new RunnerError('netnsPrefix is empty; the runner needs a prefix of its own', {
      code: 'invalid-argument',
      path: ['netnsPrefix'],
    });
  }
  checkNetnsName(prefix);
  if (!Number.isInteger(maxConcurrent) || maxConcurrent < 1) {
    throw new RunnerError(`maxConcurrent ${maxConcurrent} is not a positive whole number`, {
      code: 'invalid-argument',
      path: ['maxConcurrent'],
    });
  }
  if (!Number.isInteger(intervalMs) || intervalMs < 0) {
    throw new RunnerError(`reconcile.intervalMs ${intervalMs} is not a whole number >= 0`, {
      code: 'invalid-argument',
      path: ['reconcile', 'intervalMs'],
    });
  }
  if (!Number.isInteger(operationTimeoutMs) || operationTimeoutMs < 1) {
    throw new RunnerError(
      `operationTimeoutMs ${operationTimeoutMs} is not a positive whole number`,
      {
        code: 'invalid-argument',
        path: ['operationTimeoutMs'],
      },
    );
  }
  if (!Number.isInteger(storeRetryMs) || storeRetryMs < 0) {
    throw new RunnerError(`storeRetryMs ${storeRetryMs} is not a whole number >= 0`, {
      code: 'invalid-argument',
      path: ['storeRetryMs'],
    });
  }
  const ctx = createRunnerContext({
    networking: options.configurator,
    leaks: options.configurator,
    store: options.store ?? (await openRunnerStore({ dataDir: options.dataDir })),
    netns: options.netns ?? createIpNetnsManager(),
    maxConcurrent,
    clock: options.clock ?? systemClock,
    log: options.logger ?? silentLogger,
    prefix,
    operationTimeoutMs,
    crashPoints: options.crashPoints ?? crashPointsFromEnv(),
  });
  const { store, queue } = ctx;

  let closing = false;
  let closed: Promise<void> | undefined;
  let started = false;
  const reconciler = createReconciler(ctx, { mode, intervalMs, closing: () => closing });
  const storeRetry = createStoreRetry(ctx, { intervalMs: storeRetryMs, closing: () => closing });

  /** `run`, then starts the store retry if a write found the data dir full. */
  async function andKick<T>(run: Promise<T>): Promise<T> {
    try {
      return await run;
    } finally {
      storeRetry.kick();
    }
  }

  /** `fn` in the allocation's turn, with its deadline (context.ts `inTurn`); then `andKick`. */
  function inTurn<T>(
    allocId: string,
    fn: (signal: AbortSignal) => Promise<T>,
    caller: AbortSignal | undefined,
  ): Promise<T> {
    return andKick(runInTurn(ctx, allocId, fn, caller));
  }

  function refuseIfClosing(): void {
    if (closing) {
      throw new RunnerError('the allocation runner is shutting down', { code: 'shutting-down' });
    }
  }

  // Aborted by close(): a restore under way stops (what is not restored yet is, next start).
  const closeSignal = new AbortController();

  function begin(opts: OperationOptions): BackgroundStart {
    refuseIfClosing();
    if (started) {
      throw new RunnerError('the allocation runner is already started', { code: 'conflict' });
    }
    started = true;
    const signal =
      opts.signal === undefined
        ? closeSignal.signal
        : AbortSignal.any([opts.signal, closeSignal.signal]);
    const restoring = store.list().length;
    const done = (async () => {
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
    async start(opts = {}) {
      return begin(opts).done;
    },

    startInBackground(opts = {}) {
      const background = begin(opts);
      // The caller may never look at `done`; its failure is theirs to read, not unhandled.
      background.done.catch(() => undefined);
      return background;
    },

    isRestoring: (allocId) => ctx.restoring.has(allocId),

    restore(opts = {}) {
      refuseIfClosing();
      return andKick(restore(ctx, opts.signal));
    },

    async setup(input, opts = {}) {
      refuseIfClosing();
      const spec = decodeSpec(input);
      return inTurn(
        spec.allocId,
        async (signal) => setup(ctx, spec, await settle(ctx, spec.allocId, signal), signal),
        opts.signal,
      );
    },

    async check(input, opts = {}) {
      refuseIfClosing();
      const allocId = checkAllocId(input);
      return inTurn(
        allocId,
        async (signal) => check(ctx, allocId, await settle(ctx, allocId, signal), signal),
        opts.signal,
      );
    },

    async teardown(input, opts = {}) {
      refuseIfClosing();
      const allocId = checkAllocId(input);
      return inTurn(allocId, (signal) => teardown(ctx, allocId, signal), opts.signal);
    },

    findLeaks(opts = {}) {
      refuseIfClosing();
      return findLeaks(ctx, opts.signal);
    },

    reapLeaks(opts = {}) {
      refuseIfClosing();
      return reapLeaks(ctx, opts);
    },

    get: (allocId) => store.get(allocId),
    list: () => store.list(),

    async reconcile(opts = {}) {
      refuseIfClosing();
      if (opts.signal?.aborted === true) {
        throw new RunnerError('reconcile was aborted', {
          code: 'aborted',
          cause: opts.signal.reason,
        });
      }
      return reconciler.reconcile(opts.signal);
    },

    stats() {
      const allocations: Record<AllocPhase, number> = {
        'setting-up': 0,
        ready: 0,
        'tearing-down': 0,
        failed: 0,
      };
      for (const rec of store.list()) allocations[rec.phase]++;
      return {
        allocations,
        live: allocations.ready,
        running: queue.running,
        waiting: queue.waiting,
        restoring: ctx.restoring.size,
        ...ctx.counters,
        store: store.health(),
        unremovedRecords: ctx.unremoved.size,
      };
    },

    close() {
      if (closed !== undefined) return closed;
      closing = true;
      closeSignal.abort(
        new RunnerError('the allocation runner is shutting down', { code: 'shutting-down' }),
      );
      // Stops the timer now; waits for a running reconcile after the queue is idle.
      const stopped = reconciler.stop();
      const retryStopped = storeRetry.stop();
      closed = (async () => {
        await retryStopped;
        await queue.idle();
        await stopped;
        await store.close();
      })();
      return closed;
    },
  };
}
