// The allocation runner: one allocation's network lifecycle on this node, with durable records,
// restore after a restart and a reconciler. This file is the facade: it resolves the options
// (options.ts), opens the store, builds the shared context (context.ts) and puts every operation
// in its allocation's turn of the queue (control.ts `inTurn`, which also refuses work once
// closing). The work is in lifecycle.ts (setup / check / recreate), teardown.ts (teardown, forced
// cleanup), restore.ts (settling what a restart left), reconciler.ts (host state against the
// records, under the reap guard of reap-guard.ts) and control.ts (start and close).
import { silentLogger } from '@allocnet/base';
import type { AllocNetworkStatus } from '@allocnet/cni-configurator';
import { createRunnerContext, systemClock } from './context.js';
import { createRunControl } from './control.js';
import type {
  BackgroundOptions,
  BackgroundStart,
  OperationOptions,
  StartReport,
} from './control.js';
import { attach, detach } from './attach.js';
import type { AttachResult, DetachResult } from './attach.js';
import { crashPointsFromEnv } from './crash.js';
import { DEFAULT_MAX_ATTACHMENTS } from './defaults.js';
import { check, setup } from './lifecycle.js';
import type { CheckReport } from './lifecycle.js';
import { createIpNetnsManager } from './netns.js';
import { resolveOptions } from './options.js';
import type { AllocRunnerOptions } from './options.js';
import { findLeaks, reapLeaks } from './reconciler.js';
import type {
  ReapOptions,
  ReconcileReport,
  RunnerLeakReport,
  RunnerReapReport,
} from './reconciler.js';
import type { AllocRecord } from './record.js';
import { settle } from './restore.js';
import type { RestoreReport } from './restore.js';
import { checkAllocId, decodeSpec } from './spec.js';
import type { AttachmentSpec, RunnerSpec } from './spec.js';
import { statsOf } from './stats.js';
import type { RunnerStats } from './stats.js';
import { openRunnerStore } from './store.js';
import { forceCleanup, teardown } from './teardown.js';
import type { ForceCleanupOptions, RunnerCleanupReport, RunnerTeardownReport } from './teardown.js';

export type { AllocRunnerOptions, ReconcileOptions, RunnerConfigurator } from './options.js';
export type {
  BackgroundOptions,
  BackgroundStart,
  OperationOptions,
  StartReport,
} from './control.js';
export type { RunnerStats } from './stats.js';
export type { AttachResult, DetachResult } from './attach.js';

/** `attach`'s options: the operation's, and the agent's cap on attachments. */
export interface AttachOptions extends OperationOptions {
  /** Attachments the allocation may have with this one; default 8 (`limits.maxAttachments`). */
  readonly maxAttachments?: number;
}

export interface AllocRunner {
  /** Restore, then one reconcile, then the reconciler every `intervalMs`. Call it once. */
  start(options?: OperationOptions): Promise<StartReport>;
  /**
   * `start`, without waiting: operations are served at once. Each record is restored in its
   * allocation's turn, in a lane of the queue of its own (queue.ts), so that an operation on an
   * allocation being restored waits for that one restore only and a new allocation does not
   * wait at all. The first reconcile follows the restore. `close()` aborts a restore under way.
   * Call it, or `start`, once. With `after`, the holds and the restore wait for it.
   */
  startInBackground(options?: BackgroundOptions): BackgroundStart;
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
  /** CHECK of every attachment of a ready allocation with exactly what its ADD used. */
  check(allocId: string, options?: OperationOptions): Promise<CheckReport>;
  /**
   * Adds a network to a ready allocation on its own interface (default the first free `net<k>`):
   * validated as a spec's attachment is, errors naming `attachment.<field>`; intent synced before
   * its plugins run. An equal attachment ready on that interface: `alreadyAttached`, nothing
   * runs; another one there: `conflict`; an unknown allocation: `not-found`.
   */
  attach(
    allocId: string,
    attachment: AttachmentSpec,
    options?: AttachOptions,
  ): Promise<AttachResult>;
  /**
   * Removes a secondary network from a ready allocation (its teardown scoped to it). The primary
   * cannot be detached (`conflict`); an unknown allocation or interface is `not-found`.
   */
  detach(allocId: string, ifName: string, options?: OperationOptions): Promise<DetachResult>;
  /**
   * Removes the allocation's network and record. An unknown allocation is not an error: the
   * configurator's sweep runs for its id, and a namespace `<netnsPrefix><id>` is removed.
   */
  teardown(allocId: string, options?: OperationOptions): Promise<RunnerTeardownReport>;
  /**
   * The configurator's forced cleanup of the allocation's id (its sweep, no DEL) in the
   * allocation's turn, like a teardown; the record, if any, stays. `known`: whether the runner
   * had a record when the turn came (a cleanup that is not a dry run then breaks its network).
   */
  forceCleanup(
    allocId: string,
    options: ForceCleanupOptions & OperationOptions,
  ): Promise<RunnerCleanupReport>;
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
  const settings = resolveOptions(options);
  const ctx = createRunnerContext({
    networking: options.configurator,
    leaks: options.configurator,
    store: options.store ?? (await openRunnerStore({ dataDir: options.dataDir })),
    netns: options.netns ?? createIpNetnsManager(),
    maxConcurrent: settings.maxConcurrent,
    clock: options.clock ?? systemClock,
    log: options.logger ?? silentLogger,
    prefix: settings.prefix,
    operationTimeoutMs: settings.operationTimeoutMs,
    crashPoints: options.crashPoints ?? crashPointsFromEnv(),
  });
  const control = createRunControl(ctx, settings);
  const { refuseIfClosing, inTurn } = control;

  return {
    async start(opts = {}) {
      return control.begin(opts).done;
    },

    startInBackground(opts = {}) {
      const background = control.begin(opts);
      // The caller may never look at `done`; its failure is theirs to read, not unhandled.
      background.done.catch(() => undefined);
      return background;
    },

    isRestoring: (allocId) => ctx.restoring.has(allocId),

    restore(opts = {}) {
      refuseIfClosing();
      return control.restore(opts.signal);
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

    async attach(input, attachment, opts = {}) {
      refuseIfClosing();
      const allocId = checkAllocId(input);
      return inTurn(
        allocId,
        async (signal) =>
          attach(ctx, allocId, attachment, await settle(ctx, allocId, signal), {
            signal,
            maxAttachments: opts.maxAttachments ?? DEFAULT_MAX_ATTACHMENTS,
          }),
        opts.signal,
      );
    },

    async detach(input, ifName, opts = {}) {
      refuseIfClosing();
      const allocId = checkAllocId(input);
      return inTurn(
        allocId,
        async (signal) =>
          detach(ctx, allocId, ifName, await settle(ctx, allocId, signal, false), signal),
        opts.signal,
      );
    },

    async teardown(input, opts = {}) {
      refuseIfClosing();
      const allocId = checkAllocId(input);
      return inTurn(allocId, (signal) => teardown(ctx, allocId, signal), opts.signal);
    },

    async forceCleanup(input, opts) {
      refuseIfClosing();
      const allocId = checkAllocId(input);
      return inTurn(allocId, (signal) => forceCleanup(ctx, allocId, opts, signal), opts.signal);
    },

    findLeaks(opts = {}) {
      refuseIfClosing();
      return findLeaks(ctx, opts.signal);
    },

    reapLeaks(opts = {}) {
      refuseIfClosing();
      return reapLeaks(ctx, opts);
    },

    get: (allocId) => ctx.store.get(allocId),
    list: () => ctx.store.list(),

    async reconcile(opts = {}) {
      refuseIfClosing();
      return control.reconcile(opts.signal);
    },

    stats: () => statsOf(ctx),
    close: () => control.close(),
  };
}
