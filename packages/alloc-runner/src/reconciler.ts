// The reconciler: compares what the host holds (iptables, IPAM, the CNI cache, `/run/netns`)
// with the records, and reaps or reports what belongs to no allocation; then again every
// `intervalMs`. The operators' `findLeaks` and `reapLeaks` are the same look, asked for now.
//
// Concurrency: one reconcile at a time (a second caller joins the running one). Its scan and the
// configurator's reap, and the configurator's part of the operators' `reapLeaks`, run as the reap
// guard's one reap (reap-guard.ts): `known` is every record and every allocation with an
// operation queued or running, and the guard's fence goes to the configurator, so that an
// operation on any other allocation runs beside the reap, its allocation spared (it waits only
// while the reap removes that allocation's own batch, or the orphans): a reap never removes the
// state of an allocation being set up beside it. A
// stray namespace is removed in its allocation's turn of the queue (the id its name encodes),
// after a look at the records in that turn (`ownerOf`): a setup queued or running for that id
// goes first, and once it has a record the namespace is its own and stays. That happens after
// the guard is let go, since the guard would keep those turns waiting for it.
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

/** A namespace named like the runner's (`<prefix><allocation id>`) that no allocation has. */
export interface StrayNamespace {
  readonly name: string;
  /** Where it is mounted, e.g. `/run/netns/<name>`. */
  readonly path: string;
  /** The allocation id its name encodes; no record has that id. */
  readonly allocId: string;
  /** Why it counts as a leak, for people. */
  readonly reason: string;
}

/** The configurator's leaks, and the runner's own: stray namespaces, by name. */
export interface RunnerLeakReport extends LeakReport {
  readonly namespaces: readonly StrayNamespace[];
}

export interface NamespaceReapFailure {
  readonly namespace: StrayNamespace;
  readonly error: string;
}

/** The configurator's reap, and the stray namespaces removed or not removed. */
export interface RunnerReapReport extends ReapReport {
  /** Removed. One that an allocation took meanwhile is left alone and not listed. */
  readonly namespaces: readonly StrayNamespace[];
  readonly namespaceFailures: readonly NamespaceReapFailure[];
}

function strayReason(prefix: string): string {
  return `named like this agent's allocations (prefix ${JSON.stringify(prefix)}) but no allocation has it`;
}

/** The namespaces records have: their own names (made ones) and every path they were given. */
function takenNamespaces(ctx: RunnerContext): { names: Set<string>; paths: Set<string> } {
  const names = new Set<string>();
  const paths = new Set<string>();
  for (const r of ctx.store.list()) {
    paths.add(r.netnsPath);
    if (r.netnsCreated) names.add(madeName(r));
  }
  return { names, paths };
}

/**
 * The allocation that has the namespace, if any: the one whose id the name encodes, or one that
 * made it or was given its path (a namespace the runner did not name may still carry the prefix).
 */
function ownerOf(ctx: RunnerContext, ns: StrayNamespace): string | undefined {
  if (ctx.store.get(ns.allocId) !== undefined) return ns.allocId;
  return ctx.store
    .list()
    .find((r) => r.netnsPath === ns.path || (r.netnsCreated && madeName(r) === ns.name))?.allocId;
}

/**
 * Namespaces named like the runner's (`<prefix><a valid allocation id>`) that no record has and
 * whose id is not in `known`. Shared by the reconciler and the operators' leak calls.
 */
async function strayNamespaces(
  ctx: RunnerContext,
  known: ReadonlySet<string>,
  signal: AbortSignal | undefined,
): Promise<StrayNamespace[]> {
  const { prefix } = ctx;
  const taken = takenNamespaces(ctx);
  for (const id of known) taken.names.add(`${prefix}${id}`);
  const reason = strayReason(prefix);
  return (await ctx.netns.list(callOf(signal)))
    .filter(
      (name) =>
        name.startsWith(prefix) &&
        NAME_PATTERN.test(name.slice(prefix.length)) &&
        !taken.names.has(name),
    )
    .map((name) => ({
      name,
      path: ctx.netns.pathOf(name),
      allocId: name.slice(prefix.length),
      reason,
    }))
    .filter((ns) => !taken.paths.has(ns.path))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * Removes stray namespaces one by one, each in its allocation's turn of the queue and only if no
 * record has it by then (see the opening comment). An abort ends it with the abort's error.
 */
async function removeStrayNamespaces(
  ctx: RunnerContext,
  strays: readonly StrayNamespace[],
  signal: AbortSignal | undefined,
): Promise<{ removed: StrayNamespace[]; failed: NamespaceReapFailure[] }> {
  const removed: StrayNamespace[] = [];
  const failed: NamespaceReapFailure[] = [];
  for (const ns of strays) {
    let outcome: 'removed' | 'gone' | 'owned';
    try {
      outcome = await ctx.queue.run(
        ns.allocId,
        async () => {
          const owner = ownerOf(ctx, ns);
          if (owner !== undefined) {
            ctx.log.debug('a stray namespace got an allocation before its removal; left alone', {
              netns: ns.name,
              allocId: owner,
            });
            return 'owned';
          }
          return (await ctx.netns.remove(ns.name, callOf(signal))) ? 'removed' : 'gone';
        },
        signal,
      );
    } catch (error) {
      if (signal?.aborted === true) throw error;
      failed.push({ namespace: ns, error: messageOf(error) });
      continue;
    }
    if (outcome === 'removed') removed.push(ns);
  }
  return { removed, failed };
}

/** What a reconcile found and did as the guard's reap: the configurator's part, the namespaces. */
interface GuardedPass {
  readonly leakedAllocations: number;
  readonly orphanState: HostState;
  readonly reaped: number;
  readonly failed: { what: string; error: string }[];
  readonly strays: StrayNamespace[];
}

/** The scan and the configurator's reap, as the reap guard's one reap. */
function guardedPass(
  ctx: RunnerContext,
  mode: ReconcileMode,
  signal: AbortSignal | undefined,
): Promise<GuardedPass> {
  return ctx.guard.reap(async (scope) => {
    const { known } = scope;
    const strays = await strayNamespaces(ctx, known, signal);
    if (mode === 'report') {
      const report = await ctx.leaks.findLeaks(known, callOf(signal));
      // An allocation set up beside the look is no leak.
      const leaks = report.leaks.filter((l) => !scope.spared.has(l.allocId));
      return {
        leakedAllocations: leaks.length,
        orphanState: report.orphans,
        reaped: 0,
        failed: [],
        strays,
      };
    }
    const report = await ctx.leaks.reapLeaks(known, { ...callOf(signal), fence: scope });
    return {
      leakedAllocations: report.reaped.length + report.failed.length,
      orphanState: report.orphans,
      reaped: report.reaped.length,
      failed: report.failed.map((f) => ({ what: `allocation "${f.allocId}"`, error: f.error })),
      strays,
    };
  }, signal);
}

async function reconcileNow(
  ctx: RunnerContext,
  mode: ReconcileMode,
  signal: AbortSignal | undefined,
): Promise<ReconcileReport> {
  const { counters } = ctx;
  const startedAt = ctx.clock.now();
  try {
    const pass = await guardedPass(ctx, mode, signal);
    const failed = [...pass.failed];
    let reapedNamespaces = 0;
    if (mode === 'reap') {
      const namespaces = await removeStrayNamespaces(ctx, pass.strays, signal);
      reapedNamespaces = namespaces.removed.length;
      for (const f of namespaces.failed) {
        failed.push({ what: `namespace "${f.namespace.name}"`, error: f.error });
      }
    }
    counters.reconciles++;
    counters.leaksFound += pass.leakedAllocations;
    counters.leaksReaped += pass.reaped;
    counters.orphanNamespacesFound += pass.strays.length;
    counters.orphanNamespacesReaped += reapedNamespaces;
    counters.leakedLeft = Math.max(0, pass.leakedAllocations - pass.reaped);
    counters.strayNamespacesLeft = pass.strays.length - reapedNamespaces;
    const report: ReconcileReport = {
      mode,
      leakedAllocations: pass.leakedAllocations,
      orphanRules: pass.orphanState.rules.length,
      orphanChains: pass.orphanState.chains.length,
      orphanNamespaces: pass.strays.length,
      reaped: pass.reaped,
      reapedNamespaces,
      failed,
      durationMs: ctx.clock.now() - startedAt,
    };
    if (
      pass.leakedAllocations + pass.strays.length + report.orphanRules + report.orphanChains >
      0
    ) {
      ctx.log.warn(`reconcile found state that belongs to no allocation (${mode})`, { ...report });
    }
    return report;
  } catch (error) {
    counters.reconcileFailures++;
    throw new RunnerError(`reconcile failed: ${messageOf(error)}`, {
      code: signal?.aborted === true ? 'aborted' : 'reconcile-failed',
      cause: error,
    });
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

/** The ids the operators' leak calls count as alive: every record's and every queued one's. */
function liveIds(ctx: RunnerContext): Set<string> {
  return new Set([...ctx.store.list().map((r) => r.allocId), ...ctx.queue.activeIds()]);
}

/**
 * Leaks now, for an operator: state tagged with an allocation that has no record, and stray
 * namespaces. An allocation that got its record (or an operation) while the scans ran is left
 * out. Counted with the reconciler's in `leaksFound` and `orphanNamespacesFound`.
 */
export async function findLeaks(
  ctx: RunnerContext,
  signal: AbortSignal | undefined,
): Promise<RunnerLeakReport> {
  const known = ctx.store.list().map((r) => r.allocId);
  const report = await ctx.leaks.findLeaks(known, callOf(signal));
  const strays = await strayNamespaces(ctx, liveIds(ctx), signal);
  const leaks = report.leaks.filter((l) => ctx.store.get(l.allocId) === undefined);
  const busy = new Set(ctx.queue.activeIds());
  const namespaces = strays.filter((ns) => !busy.has(ns.allocId) && ownerOf(ctx, ns) === undefined);
  ctx.counters.leaksFound += leaks.length;
  ctx.counters.orphanNamespacesFound += namespaces.length;
  return { leaks, orphans: report.orphans, namespaces };
}

export interface ReapOptions {
  readonly signal?: AbortSignal;
  readonly batchSize?: number;
  readonly onProgress?: (progress: ReapProgress) => void;
}

/**
 * Removes the leaks now, for an operator: the configurator's reap as the reap guard's one reap
 * (every record and every allocation with an operation queued or running counts as known, and
 * one whose operation begins during the reap is spared), then
 * the stray namespaces, each in its allocation's turn; counted.
 */
export async function reapLeaks(
  ctx: RunnerContext,
  options: ReapOptions,
): Promise<RunnerReapReport> {
  const report = await ctx.guard.reap(
    (scope) =>
      ctx.leaks.reapLeaks(scope.known, {
        ...callOf(options.signal),
        fence: scope,
        ...(options.batchSize === undefined ? {} : { batchSize: options.batchSize }),
        ...(options.onProgress === undefined ? {} : { onProgress: options.onProgress }),
      }),
    options.signal,
  );
  ctx.counters.leaksFound += report.reaped.length + report.failed.length;
  ctx.counters.leaksReaped += report.reaped.length;
  const strays = await strayNamespaces(ctx, liveIds(ctx), options.signal);
  const { removed, failed } = await removeStrayNamespaces(ctx, strays, options.signal);
  ctx.counters.orphanNamespacesFound += removed.length + failed.length;
  ctx.counters.orphanNamespacesReaped += removed.length;
  return { ...report, namespaces: removed, namespaceFailures: failed };
}
