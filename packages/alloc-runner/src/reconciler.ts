// The reconciler: compares what the host holds (iptables, IPAM, the CNI cache, `/run/netns`)
// with the records, and reaps or reports what belongs to no allocation; then again every
// `intervalMs`. Concurrency: one reconcile at a time (a second caller joins the running one);
// while it scans and reaps it holds (context `hold`) operations on allocations it did not count
// as known, so it never removes the state of an allocation being set up under it.
import { NAME_PATTERN } from '@allocnet/cni';
import type { HostState, LeakReport, ReapProgress, ReapReport } from '@allocnet/cni-configurator';
import { callOf, madeName } from './context.js';
import type { RunnerContext } from './context.js';
import { RunnerError, messageOf } from './errors.js';

export type ReconcileMode = 'reap' | 'report';

export interface ReconcileReport {
  readonly mode: ReconcileMode;
  /** Allocation ids with host state (rules, chains, reservations, cache files) and no record. */
  readonly leakedAllocations: number;
  /** State that belongs to no allocation at all (see the configurator's `LeakReport.orphans`). */
  readonly orphanRules: number;
  readonly orphanChains: number;
  /** Namespaces `<netnsPrefix><id>` that no record has. */
  readonly orphanNamespaces: number;
  /** Leaked allocations whose state was removed (`reap`). */
  readonly reaped: number;
  /** Orphan namespaces removed (`reap`). */
  readonly reapedNamespaces: number;
  /** What could not be removed, with the reason. */
  readonly failed: readonly { readonly what: string; readonly error: string }[];
  readonly durationMs: number;
}

export interface Reconciler {
  /** A reconcile now; a running one is joined, not repeated. */
  reconcile(signal?: AbortSignal): Promise<ReconcileReport>;
  /** Runs the reconciler every `intervalMs` from now on (nothing when 0). */
  schedule(): void;
  /** Stops the timer and waits for a running reconcile (its failure went to its caller). */
  stop(): Promise<void>;
}

export interface ReconcilerOptions {
  readonly mode: ReconcileMode;
  readonly intervalMs: number;
  /** Whether the runner is closing: nothing new starts then. */
  readonly closing: () => boolean;
}

/** Namespaces named like the runner's (`<prefix><allocation id>`) that no allocation has. */
async function orphanNamespaces(
  ctx: RunnerContext,
  known: ReadonlySet<string>,
  signal: AbortSignal | undefined,
): Promise<string[]> {
  const { prefix } = ctx;
  const madeNames = new Set(
    ctx.store
      .list()
      .filter((r) => r.netnsCreated)
      .map(madeName),
  );
  for (const id of known) madeNames.add(`${prefix}${id}`);
  return (await ctx.netns.list(callOf(signal))).filter(
    (name) =>
      name.startsWith(prefix) &&
      NAME_PATTERN.test(name.slice(prefix.length)) &&
      !madeNames.has(name),
  );
}

async function reconcileNow(
  ctx: RunnerContext,
  mode: ReconcileMode,
  signal: AbortSignal | undefined,
): Promise<ReconcileReport> {
  const { counters } = ctx;
  const startedAt = ctx.clock.now();
  const known = new Set<string>([
    ...ctx.store.list().map((r) => r.allocId),
    ...ctx.queue.activeIds(),
  ]);
  let release = () => {
    // Replaced below.
  };
  ctx.hold.current = { known, done: new Promise<void>((resolve) => (release = resolve)) };
  try {
    const orphans = await orphanNamespaces(ctx, known, signal);
    const failed: { what: string; error: string }[] = [];
    let leakedAllocations: number;
    let orphanState: HostState;
    let reaped = 0;
    let reapedNamespaces = 0;
    if (mode === 'report') {
      const report = await ctx.leaks.findLeaks(known, callOf(signal));
      leakedAllocations = report.leaks.length;
      orphanState = report.orphans;
    } else {
      const report = await ctx.leaks.reapLeaks(known, callOf(signal));
      leakedAllocations = report.reaped.length + report.failed.length;
      orphanState = report.orphans;
      reaped = report.reaped.length;
      for (const f of report.failed) {
        failed.push({ what: `allocation "${f.allocId}"`, error: f.error });
      }
      for (const name of orphans) {
        try {
          if (await ctx.netns.remove(name, callOf(signal))) reapedNamespaces++;
        } catch (error) {
          failed.push({ what: `namespace "${name}"`, error: messageOf(error) });
        }
      }
    }
    counters.reconciles++;
    counters.leaksFound += leakedAllocations;
    counters.leaksReaped += reaped;
    counters.orphanNamespacesFound += orphans.length;
    counters.orphanNamespacesReaped += reapedNamespaces;
    const report: ReconcileReport = {
      mode,
      leakedAllocations,
      orphanRules: orphanState.rules.length,
      orphanChains: orphanState.chains.length,
      orphanNamespaces: orphans.length,
      reaped,
      reapedNamespaces,
      failed,
      durationMs: ctx.clock.now() - startedAt,
    };
    if (leakedAllocations + orphans.length + report.orphanRules + report.orphanChains > 0) {
      ctx.log.warn(`reconcile found state that belongs to no allocation (${mode})`, { ...report });
    }
    return report;
  } catch (error) {
    counters.reconcileFailures++;
    throw new RunnerError(`reconcile failed: ${messageOf(error)}`, {
      code: signal?.aborted === true ? 'aborted' : 'reconcile-failed',
      cause: error,
    });
  } finally {
    ctx.hold.current = undefined;
    release();
  }
}

export function createReconciler(ctx: RunnerContext, options: ReconcilerOptions): Reconciler {
  const { mode, intervalMs, closing } = options;
  let reconciling: Promise<ReconcileReport> | undefined;
  let timer: unknown;

  function reconcile(signal?: AbortSignal): Promise<ReconcileReport> {
    if (reconciling !== undefined) return reconciling;
    if (closing()) {
      return Promise.reject(
        new RunnerError('the allocation runner is shutting down', { code: 'shutting-down' }),
      );
    }
    const running = reconcileNow(ctx, mode, signal).finally(() => {
      reconciling = undefined;
    });
    reconciling = running;
    return running;
  }

  function schedule(): void {
    if (closing() || intervalMs === 0) return;
    timer = ctx.clock.setTimeout(() => {
      timer = undefined;
      if (closing()) return;
      reconcile().then(
        () => {
          schedule();
        },
        (error: unknown) => {
          ctx.log.warn('periodic reconcile failed', { error: messageOf(error) });
          schedule();
        },
      );
    }, intervalMs);
  }

  return {
    reconcile,
    schedule,
    async stop() {
      if (timer !== undefined) ctx.clock.clearTimeout(timer);
      timer = undefined;
      if (reconciling !== undefined) {
        await reconciling.catch(() => {
          // Its failure was reported to whoever asked for it; shutdown goes on.
        });
      }
    },
  };
}

/**
 * Leaks now, for an operator: state tagged with an allocation that has no record. An allocation
 * that got its record while the scan ran (a setup in flight) is left out. Counted with the
 * reconciler's in `leaksFound`.
 */
export async function findLeaks(
  ctx: RunnerContext,
  signal: AbortSignal | undefined,
): Promise<LeakReport> {
  const known = ctx.store.list().map((r) => r.allocId);
  const report = await ctx.leaks.findLeaks(known, callOf(signal));
  const leaks = report.leaks.filter((l) => ctx.store.get(l.allocId) === undefined);
  ctx.counters.leaksFound += leaks.length;
  return { leaks, orphans: report.orphans };
}

export interface ReapOptions {
  readonly signal?: AbortSignal;
  readonly batchSize?: number;
  readonly onProgress?: (progress: ReapProgress) => void;
}

/** Removes the leaks now, for an operator (every record counts as known); counted. */
export async function reapLeaks(ctx: RunnerContext, options: ReapOptions): Promise<ReapReport> {
  const known = ctx.store.list().map((r) => r.allocId);
  const report = await ctx.leaks.reapLeaks(known, {
    ...callOf(options.signal),
    ...(options.batchSize === undefined ? {} : { batchSize: options.batchSize }),
    ...(options.onProgress === undefined ? {} : { onProgress: options.onProgress }),
  });
  ctx.counters.leaksFound += report.reaped.length + report.failed.length;
  ctx.counters.leaksReaped += report.reaped.length;
  return report;
}
