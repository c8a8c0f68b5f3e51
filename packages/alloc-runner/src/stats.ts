// The runner's counters and gauges for the agent's metrics (`stats()`): the monotonic counters
// live in the context (context.ts `RunnerCounters`); the gauges are read from the store and the
// queue when asked.
import type { RunnerContext } from './context.js';
import { attachmentsOf } from './record.js';
import type { AllocPhase } from './record.js';
import type { StoreHealth } from './store.js';

/** Counters for the agent's metrics; monotonic unless said otherwise. */
export interface RunnerStats {
  /** Records by phase, now. */
  readonly allocations: Readonly<Record<AllocPhase, number>>;
  /** Ready allocations, now. */
  readonly live: number;
  /** Ready attachments of ready allocations (the primary and each secondary) by network, now. */
  readonly attachmentsByNetwork: Readonly<Record<string, number>>;
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
  /** Recreated allocations that got exactly their recorded addresses back. */
  readonly reclaimed: number;
  /** Recorded addresses a recreate could not re-claim (reported on the allocation and logged). */
  readonly addressesLost: number;
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

/** The runner's stats now. */
export function statsOf(ctx: RunnerContext): RunnerStats {
  const allocations: Record<AllocPhase, number> = {
    'setting-up': 0,
    ready: 0,
    'tearing-down': 0,
    failed: 0,
  };
  // A Map, made an object at the end: a network may be named `__proto__`.
  const byNetwork = new Map<string, number>();
  for (const rec of ctx.store.list()) {
    allocations[rec.phase]++;
    if (rec.phase !== 'ready') continue;
    for (const a of attachmentsOf(rec)) {
      if (a.phase !== 'ready') continue;
      byNetwork.set(a.network, (byNetwork.get(a.network) ?? 0) + 1);
    }
  }
  return {
    allocations,
    live: allocations.ready,
    attachmentsByNetwork: Object.fromEntries(byNetwork),
    running: ctx.queue.running,
    waiting: ctx.queue.waiting,
    restoring: ctx.restoring.size,
    ...ctx.counters,
    store: ctx.store.health(),
    unremovedRecords: ctx.unremoved.size,
  };
}
