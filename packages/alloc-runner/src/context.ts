// What the runner's parts share: the store, the namespace manager, the queue and its reap guard,
// the clock, the counters, the configurator seam. `runner.ts` builds one context per runner and
// hands it to `lifecycle.ts` (setup / check of one allocation), `teardown.ts` (its teardown and
// forced cleanup), `restore.ts` (settling what a restart left), `reconciler.ts` (host state
// against the records) and `control.ts` (start and close). None of them keeps state of its own
// outside this object but timers (the reconciler's, the store retry's) and control.ts's flags.
import { basename } from 'node:path';
import { logInfo as baseLogInfo } from '@allocnet/base';
import type { Logger } from '@allocnet/base';
import type {
  AllocAttachment,
  AllocNetworkStatus,
  AllocNetworking,
  CniConfigurator,
  LeakSweeper,
} from '@allocnet/cni-configurator';
import type { CrashPoint, CrashPoints } from './crash.js';
import { RunnerError } from './errors.js';
import type { NetnsManager } from './netns.js';
import { followingClaims, fromRecords } from './port-claims.js';
import type { PortClaims } from './port-claims.js';
import { createAllocQueue } from './queue.js';
import type { AllocQueue, QueueLane } from './queue.js';
import { createReapGuard } from './reap-guard.js';
import type { ReapGuard } from './reap-guard.js';
import { SCHEMA_VERSION } from './record.js';
import type { AllocRecord } from './record.js';
import type { RunnerStore } from './store.js';

/** Time and timers, injectable so that tests drive the reconciler's interval. */
export interface Clock {
  now(): number;
  /** Schedules `fn` once; the default unrefs the timer so that it never keeps the process up. */
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout(fn, ms) {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return timer;
  },
  clearTimeout(handle) {
    clearTimeout(handle as NodeJS.Timeout);
  },
};

/** Monotonic counters, the runner's only ones; `stats()` reports them with the gauges. */
export interface RunnerCounters {
  setups: number;
  setupFailures: number;
  teardowns: number;
  teardownFailures: number;
  checks: number;
  checkFailures: number;
  restored: number;
  recreated: number;
  /** Recreated allocations that got exactly their recorded addresses back (holds, reclaim). */
  reclaimed: number;
  /** Recorded addresses a recreate could not re-claim (the allocation failed, or came back elsewhere). */
  addressesLost: number;
  restoreFailures: number;
  reconciles: number;
  reconcileFailures: number;
  leaksFound: number;
  leaksReaped: number;
  orphanNamespacesFound: number;
  orphanNamespacesReaped: number;
  /** Not monotonic: what the last reconcile pass left on the node (found, less what it reaped). */
  leakedLeft: number;
  strayNamespacesLeft: number;
}

export function zeroCounters(): RunnerCounters {
  return {
    setups: 0,
    setupFailures: 0,
    teardowns: 0,
    teardownFailures: 0,
    checks: 0,
    checkFailures: 0,
    restored: 0,
    recreated: 0,
    reclaimed: 0,
    addressesLost: 0,
    restoreFailures: 0,
    reconciles: 0,
    reconcileFailures: 0,
    leaksFound: 0,
    leaksReaped: 0,
    orphanNamespacesFound: 0,
    orphanNamespacesReaped: 0,
    leakedLeft: 0,
    strayNamespacesLeft: 0,
  };
}

export interface RunnerContext {
  /** The configurator's allocation-level operations and its leak sweeper: the runner's seams. */
  readonly networking: AllocNetworking & Pick<CniConfigurator, 'catalog'>;
  readonly leaks: LeakSweeper;
  /** The store, releasing an allocation's host-port claims as its records go (port-claims.ts). */
  readonly store: RunnerStore;
  /** The host ports live allocations map; a setup claims its own before its intent record. */
  readonly ports: PortClaims;
  readonly netns: NetnsManager;
  readonly queue: AllocQueue;
  readonly clock: Clock;
  readonly counters: RunnerCounters;
  readonly log: Logger;
  /** Namespaces the runner makes are `<prefix><allocId>`. */
  readonly prefix: string;
  /** The deadline of one operation from the start of its turn (see `inTurn`). */
  readonly operationTimeoutMs: number;
  /** Crash points for the crash tests (`ALLOCNET_CRASH_AT`); a no-op otherwise. */
  readonly crash: (point: CrashPoint) => void;
  /** Keeps reaps away from the state of operations they did not count (reap-guard.ts); the queue admits by it. */
  readonly guard: ReapGuard;
  /**
   * Allocations whose network is undone (a rolled-back setup, a finished teardown) but whose
   * record could not be removed: the data dir was full. Their record stays `setting-up` or
   * `tearing-down` in memory and on disk until a removal succeeds: the next operation on the
   * allocation, or the store retry (store-retry.ts) once the store is writable again. Only code
   * in the allocation's turn adds or deletes an id.
   */
  readonly unremoved: Set<string>;
  /**
   * Allocations whose record the restore after a start has not settled yet; filled when the
   * restore begins, each id deleted when its restore is done. Operations on one of them wait
   * behind its restore in the allocation's turn.
   */
  readonly restoring: Set<string>;
}

export interface ContextParts {
  readonly networking: AllocNetworking & Pick<CniConfigurator, 'catalog'>;
  readonly leaks: LeakSweeper;
  readonly store: RunnerStore;
  readonly netns: NetnsManager;
  readonly maxConcurrent: number;
  readonly clock: Clock;
  readonly log: Logger;
  readonly prefix: string;
  readonly operationTimeoutMs: number;
  readonly crashPoints: CrashPoints;
}

export function createRunnerContext(parts: ContextParts): RunnerContext {
  // Built from the records before any operation can be admitted: claims hold across a restart.
  const ports = fromRecords(parts.store, parts.networking, parts.log);
  const store = followingClaims(parts.store, ports);
  // A reap spares every record and every allocation with an operation queued or running.
  const guard = createReapGuard({
    records: () => store.list().map((r) => r.allocId),
    active: () => queue.activeIds(),
  });
  const queue = createAllocQueue({
    maxConcurrent: parts.maxConcurrent,
    beforeStart: (allocId) => guard.admit(allocId),
  });
  return {
    networking: parts.networking,
    leaks: parts.leaks,
    store,
    ports,
    netns: parts.netns,
    queue,
    clock: parts.clock,
    counters: zeroCounters(),
    log: parts.log,
    prefix: parts.prefix,
    operationTimeoutMs: parts.operationTimeoutMs,
    crash: (point) => {
      parts.crashPoints.reached(point);
    },
    guard,
    unremoved: new Set(),
    restoring: new Set(),
  };
}

/** `info` where the logger has it, `debug` otherwise. */
export function logInfo(ctx: RunnerContext, message: string, meta?: Record<string, unknown>): void {
  baseLogInfo(ctx.log, message, meta);
}

/**
 * A record of the current schema, stamped with the clock; `base.extra` (the secondary
 * attachments) is kept when it has any.
 */
export function makeRecord(
  ctx: RunnerContext,
  base: Omit<AllocRecord, 'schema' | 'updatedAtMs' | 'attachment' | 'status' | 'error'>,
  extra: {
    readonly attachment?: AllocAttachment | undefined;
    readonly status?: AllocNetworkStatus | undefined;
    readonly error?: string | undefined;
  } = {},
): AllocRecord {
  return {
    schema: SCHEMA_VERSION,
    allocId: base.allocId,
    spec: base.spec,
    phase: base.phase,
    netnsPath: base.netnsPath,
    netnsCreated: base.netnsCreated,
    // A copy: the caller may go on changing its list (the setup of the next attachment).
    ...(base.extra === undefined || base.extra.length === 0 ? {} : { extra: [...base.extra] }),
    ...(extra.attachment === undefined ? {} : { attachment: extra.attachment }),
    ...(extra.status === undefined ? {} : { status: extra.status }),
    ...(extra.error === undefined ? {} : { error: extra.error }),
    updatedAtMs: ctx.clock.now(),
  };
}

/** The name of a namespace the record says the runner made. */
export function madeName(rec: AllocRecord): string {
  return basename(rec.netnsPath);
}

/** `{ signal }` for a call that takes options, or nothing. */
export function callOf(signal: AbortSignal | undefined): { signal?: AbortSignal } {
  return signal === undefined ? {} : { signal };
}

/**
 * Runs `fn` in the allocation's turn of the queue with a signal that aborts when the caller's
 * does or when the operation's deadline passes (`operationTimeoutMs` from the start of the turn;
 * the reason is a `timed-out` RunnerError): everything the runner calls honours the signal, so
 * no operation holds an allocation's turn for ever. Every operation and restore go through here.
 */
export function inTurn<T>(
  ctx: RunnerContext,
  allocId: string,
  fn: (signal: AbortSignal) => Promise<T>,
  caller: AbortSignal | undefined,
  lane: QueueLane = 'operations',
): Promise<T> {
  return ctx.queue.run(
    allocId,
    async () => {
      const deadline = new AbortController();
      const timer = ctx.clock.setTimeout(() => {
        deadline.abort(
          new RunnerError(
            `the operation on allocation "${allocId}" ran past its deadline of ${ctx.operationTimeoutMs} ms (operationTimeoutMs)`,
            { code: 'timed-out', allocId },
          ),
        );
      }, ctx.operationTimeoutMs);
      try {
        return await fn(
          caller === undefined ? deadline.signal : AbortSignal.any([caller, deadline.signal]),
        );
      } finally {
        ctx.clock.clearTimeout(timer);
      }
    },
    caller,
    lane,
  );
}
