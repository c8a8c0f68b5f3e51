import { basename } from 'node:path';
import { NAME_PATTERN, silentLogger } from '@allocnet/cni';
import type { Logger } from '@allocnet/cni';
import type {
  AllocAttachment,
  AllocNetworkStatus,
  CniConfigurator,
  HostState,
  TeardownReport,
} from '@allocnet/cni-configurator';
import { crashPointsFromEnv } from './crash.js';
import type { CrashPoint, CrashPoints } from './crash.js';
import { isConfiguratorError } from '@allocnet/cni-configurator';
import { RunnerError, messageOf } from './errors.js';
import { checkNetnsName, createIpNetnsManager } from './netns.js';
import type { NetnsManager } from './netns.js';
import { createAllocQueue } from './queue.js';
import { SCHEMA_VERSION } from './record.js';
import type { AllocPhase, AllocRecord } from './record.js';
import { checkAllocId, configuratorSpec, decodeSpec, specDifferences } from './spec.js';
import type { RunnerSpec } from './spec.js';
import { openRunnerStore } from './store.js';
import type { RunnerStore } from './store.js';

/** The cni `Logger`, optionally with `info` and `error`; without them those go to debug / warn. */
export interface RunnerLogger extends Logger {
  info?(message: string, meta?: Record<string, unknown>): void;
  error?(message: string, meta?: Record<string, unknown>): void;
}

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

export type ReconcileMode = 'reap' | 'report';

export interface ReconcileOptions {
  /** `reap` removes what belongs to no allocation; `report` only counts it. Default `reap`. */
  readonly mode?: ReconcileMode;
  /** Between the end of one reconcile and the start of the next; 0 turns it off. Default 300 000. */
  readonly intervalMs?: number;
}

export interface AllocRunnerOptions {
  /** The agent's configurator; the runner never closes it. */
  readonly configurator: CniConfigurator;
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
  readonly reconcile?: ReconcileOptions;
  readonly logger?: RunnerLogger;
  readonly clock?: Clock;
  /** Default `crashPointsFromEnv()`: `ALLOCNET_CRASH_AT`, read once, here. Only tests set it. */
  readonly crashPoints?: CrashPoints;
}

export interface OperationOptions {
  readonly signal?: AbortSignal;
}

/** What `teardown` did. */
export interface RunnerTeardownReport {
  readonly allocId: string;
  /** Whether the allocation had a record (false: only the sweep and the namespace by name ran). */
  readonly known: boolean;
  /** The configurator's report: the DEL's outcome and what the audit removed. */
  readonly report: TeardownReport;
  /** Whether the runner removed a namespace it had made. */
  readonly netnsRemoved: boolean;
}

export interface CheckReport {
  readonly allocId: string;
  /** False when the network's plugins or config do not allow a CHECK (nothing ran). */
  readonly ran: boolean;
}

/**
 * What restore did with one record:
 * - `kept`: ready, its namespace there and its CHECK passed (or CHECK is not possible: `checked`
 *   false);
 * - `recreated`: ready, but its CHECK failed or its namespace was gone: torn down and set up
 *   again once, in the same namespace path;
 * - `finished`: an interrupted setup whose spec says `finish`: undone and set up again;
 * - `failed`: undone and recorded as failed (an interrupted setup, or a recreate that failed);
 * - `torn-down`: an interrupted teardown, finished;
 * - `already-failed`: a failed record, left for the agent to report;
 * - `error`: restore could not settle it (the record stays as it was; the next start tries again).
 */
export type RestoreResult =
  'kept' | 'recreated' | 'finished' | 'failed' | 'torn-down' | 'already-failed' | 'error';

export interface RestoreOutcome {
  readonly allocId: string;
  /** The phase the record had. */
  readonly from: AllocPhase;
  readonly result: RestoreResult;
  /** Whether a CHECK ran (and passed, for `kept`). */
  readonly checked: boolean;
  /** For `recreated`, `failed`, `error`: why. */
  readonly error?: string;
}

export interface RestoreReport {
  readonly outcomes: readonly RestoreOutcome[];
  readonly counts: Readonly<Record<RestoreResult, number>>;
  readonly durationMs: number;
}

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
}

export interface AllocRunner {
  /** Restore, then one reconcile, then the reconciler every `intervalMs`. Call it once. */
  start(options?: OperationOptions): Promise<StartReport>;
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
  /** Compares host state with the records now (a running reconcile is joined, not repeated). */
  reconcile(options?: OperationOptions): Promise<ReconcileReport>;
  stats(): RunnerStats;
  /** Refuses new operations, waits for the running and queued ones, stops the reconciler, closes the store. */
  close(): Promise<void>;
}

const RESULTS: readonly RestoreResult[] = [
  'kept',
  'recreated',
  'finished',
  'failed',
  'torn-down',
  'already-failed',
  'error',
];

/**
 * Whether a CHECK error says the allocation's network is broken: the configurator's
 * `check-failed`. A CHECK that could not run (a plugin that did not start or timed out, a config
 * the plugins cannot run: `unavailable`, `aborted`) or an iptables failure found nothing broken.
 */
function foundBroken(error: unknown): boolean {
  return isConfiguratorError(error) && error.code === 'check-failed';
}

/** The netns part of a setup: make a namespace, reuse it (remaking it if gone), or use the given one. */
type NetnsPlan =
  | { readonly kind: 'create'; readonly name: string }
  | { readonly kind: 'reuse'; readonly name: string }
  | { readonly kind: 'given'; readonly path: string };

/**
 * Opens the store at `<dataDir>/state` (creating or migrating it) and returns the runner. Nothing
 * else runs until `start()` or `restore()` is called: call `start()` before serving requests.
 */
export async function createAllocRunner(options: AllocRunnerOptions): Promise<AllocRunner> {
  const configurator = options.configurator;
  const netns = options.netns ?? createIpNetnsManager();
  const prefix = options.netnsPrefix ?? 'alloc-';
  const maxConcurrent = options.maxConcurrent ?? 8;
  const mode = options.reconcile?.mode ?? 'reap';
  const intervalMs = options.reconcile?.intervalMs ?? 300_000;
  const log: RunnerLogger = options.logger ?? silentLogger;
  const info = (m: string, meta?: Record<string, unknown>) => {
    if (log.info !== undefined) log.info(m, meta);
    else log.debug(m, meta);
  };
  const clock = options.clock ?? systemClock;
  if (prefix === '') {
    // Every namespace on the host would look like the runner's to the reconciler.
    throw new RunnerError('netnsPrefix is empty; the runner needs a prefix of its own', {
      code: 'invalid-argument',
      field: 'netnsPrefix',
    });
  }
  checkNetnsName(prefix);
  if (!Number.isInteger(maxConcurrent) || maxConcurrent < 1) {
    throw new RunnerError(`maxConcurrent ${maxConcurrent} is not a positive whole number`, {
      code: 'invalid-argument',
      field: 'maxConcurrent',
    });
  }
  if (!Number.isInteger(intervalMs) || intervalMs < 0) {
    throw new RunnerError(`reconcile.intervalMs ${intervalMs} is not a whole number >= 0`, {
      code: 'invalid-argument',
      field: 'reconcile.intervalMs',
    });
  }
  const crashPoints = options.crashPoints ?? crashPointsFromEnv();
  const crash = (point: CrashPoint) => {
    crashPoints.reached(point);
  };

  const store: RunnerStore = options.store ?? (await openRunnerStore({ dataDir: options.dataDir }));

  const counters = {
    setups: 0,
    setupFailures: 0,
    teardowns: 0,
    teardownFailures: 0,
    checks: 0,
    checkFailures: 0,
    restored: 0,
    recreated: 0,
    restoreFailures: 0,
    reconciles: 0,
    reconcileFailures: 0,
    leaksFound: 0,
    leaksReaped: 0,
    orphanNamespacesFound: 0,
    orphanNamespacesReaped: 0,
  };

  // The reconciler's hold: while it scans and reaps, operations on allocations it did not count
  // as known wait (an allocation it knows may go on: it leaves that one's state alone).
  let hold: { readonly known: ReadonlySet<string>; readonly done: Promise<void> } | undefined;
  const queue = createAllocQueue({
    maxConcurrent,
    async beforeStart(allocId) {
      while (hold !== undefined && !hold.known.has(allocId)) await hold.done;
    },
  });

  let closing = false;
  let closed: Promise<void> | undefined;
  let reconciling: Promise<ReconcileReport> | undefined;
  let timer: unknown;
  let started = false;

  function refuseIfClosing(): void {
    if (closing) {
      throw new RunnerError('the allocation runner is shutting down', { code: 'shutting-down' });
    }
  }

  function record(
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
      ...(extra.attachment === undefined ? {} : { attachment: extra.attachment }),
      ...(extra.status === undefined ? {} : { status: extra.status }),
      ...(extra.error === undefined ? {} : { error: extra.error }),
      updatedAtMs: clock.now(),
    };
  }

  /** The name of a namespace the record says the runner made. */
  const madeName = (rec: AllocRecord) => basename(rec.netnsPath);

  /**
   * Undoes what a rollback must: the configurator's teardown (DEL with the attachment when there
   * is one, then the sweep), and the namespace when `netnsName` is given. Goes on past a failure
   * and returns the problems. Runs without the caller's signal: an aborted setup still cleans up.
   */
  async function undo(
    allocId: string,
    attachment: AllocAttachment | undefined,
    netnsName: string | undefined,
  ): Promise<string[]> {
    const problems: string[] = [];
    try {
      await configurator.teardown(allocId, attachment);
    } catch (error) {
      problems.push(`the configurator's teardown failed: ${messageOf(error)}`);
    }
    if (netnsName !== undefined) {
      try {
        await netns.remove(netnsName);
      } catch (error) {
        problems.push(`removing namespace "${netnsName}" failed: ${messageOf(error)}`);
      }
    }
    return problems;
  }

  /**
   * Sets the allocation up from nothing: the intent record (committed and synced), the namespace,
   * the configurator's setup, the ready record. Any failure rolls back (the configurator's
   * teardown, the namespace if this call made it, the record) and throws `setup-failed`.
   */
  async function freshSetup(
    spec: RunnerSpec,
    plan: NetnsPlan,
    signal: AbortSignal | undefined,
    cniArgsHint?: Readonly<Record<string, string>>,
  ): Promise<AllocRecord> {
    const allocId = spec.allocId;
    const netnsPath = plan.kind === 'given' ? plan.path : netns.pathOf(plan.name);
    const base = {
      allocId,
      spec,
      phase: 'setting-up' as const,
      netnsPath,
      netnsCreated: plan.kind !== 'given',
    };
    await store.put(record(base));
    crash('setup:after-intent');

    let madeNetns: string | undefined;
    let attachment: AllocAttachment | undefined;
    try {
      if (plan.kind === 'create' || (plan.kind === 'reuse' && !(await netns.exists(netnsPath)))) {
        if (plan.kind === 'reuse') {
          // A leftover file that is no longer a namespace (the state after a reboot when /run is
          // not a tmpfs) would make `ip netns add` fail.
          await netns.remove(plan.name, signal === undefined ? {} : { signal });
        }
        await netns.create(plan.name, signal === undefined ? {} : { signal });
        madeNetns = plan.name;
        crash('setup:after-netns');
      }
      const configSpec = configuratorSpec(spec);
      const outcome = await configurator.setup(
        cniArgsHint === undefined
          ? configSpec
          : { ...configSpec, cniArgs: { ...(configSpec.cniArgs ?? {}), ...cniArgsHint } },
        netnsPath,
        signal === undefined ? {} : { signal },
      );
      attachment = outcome.attachment;
      crash('setup:after-add');
      const ready = record({ ...base, phase: 'ready' }, outcome);
      await store.put(ready);
      crash('setup:after-ready');
      return ready;
    } catch (error) {
      // Only a namespace this call made is removed; in `reuse`, one that was there stays (the
      // allocation's tasks may run in it) and the record of it is dropped with the rest.
      const problems = await undo(allocId, attachment, madeNetns);
      try {
        await store.remove(allocId);
      } catch (removeError) {
        // The record stays `setting-up`: the next restore (or operation) undoes it again.
        problems.push(messageOf(removeError));
      }
      const aborted =
        signal?.aborted === true || (isConfiguratorError(error) && error.code === 'aborted');
      // The request's own fault, as the configurator found it: the agent answers INVALID_ARGUMENT.
      const field = !isConfiguratorError(error)
        ? undefined
        : error.code === 'network-not-found'
          ? 'spec.network'
          : error.code === 'invalid-argument'
            ? `spec.${error.field ?? ''}`
            : undefined;
      throw new RunnerError(
        `setup of allocation "${allocId}" ${aborted ? 'was aborted' : 'failed'}: ${messageOf(error)}${
          problems.length === 0 ? '' : `; the rollback also failed: ${problems.join('; ')}`
        }`,
        {
          code: aborted ? 'aborted' : field !== undefined ? 'invalid-argument' : 'setup-failed',
          allocId,
          cause: error,
          ...(field === undefined || aborted ? {} : { field }),
        },
      );
    }
  }

  /** The namespace plan for a new setup of `spec`. */
  function planFor(spec: RunnerSpec): NetnsPlan {
    return spec.netnsPath === undefined
      ? { kind: 'create', name: checkNetnsName(`${prefix}${spec.allocId}`) }
      : { kind: 'given', path: spec.netnsPath };
  }

  async function setupFromScratch(
    spec: RunnerSpec,
    signal: AbortSignal | undefined,
  ): Promise<AllocNetworkStatus> {
    const plan = planFor(spec);
    if (plan.kind === 'given' && !(await netns.exists(plan.path))) {
      throw new RunnerError(
        `invalid allocation spec: spec.netnsPath "${plan.path}" is not a network namespace`,
        { code: 'invalid-argument', field: 'spec.netnsPath', allocId: spec.allocId },
      );
    }
    try {
      const ready = await freshSetup(spec, plan, signal);
      counters.setups++;
      info('allocation set up', { allocId: spec.allocId, address: ready.status?.address });
      return ready.status as AllocNetworkStatus;
    } catch (error) {
      counters.setupFailures++;
      throw error;
    }
  }

  /**
   * Finishes a teardown whose intent is recorded: the configurator's teardown with the stored
   * attachment, the namespace if the runner made it, then the record. A failure leaves the
   * record `tearing-down` (the next teardown or restore finishes it) and throws `teardown-failed`.
   */
  async function finishTeardown(
    rec: AllocRecord,
    signal: AbortSignal | undefined,
  ): Promise<RunnerTeardownReport> {
    const allocId = rec.allocId;
    let report: TeardownReport;
    let netnsRemoved = false;
    try {
      report = await configurator.teardown(
        allocId,
        rec.attachment,
        signal === undefined ? {} : { signal },
      );
      crash('teardown:after-del');
      if (rec.netnsCreated) {
        netnsRemoved = await netns.remove(madeName(rec), signal === undefined ? {} : { signal });
      }
      crash('teardown:after-netns');
    } catch (error) {
      throw new RunnerError(`teardown of allocation "${allocId}" failed: ${messageOf(error)}`, {
        code: signal?.aborted === true ? 'aborted' : 'teardown-failed',
        allocId,
        cause: error,
      });
    }
    await store.remove(allocId);
    return { allocId, known: true, report, netnsRemoved };
  }

  async function teardownOp(
    allocId: string,
    signal: AbortSignal | undefined,
  ): Promise<RunnerTeardownReport> {
    const rec = store.get(allocId);
    if (rec === undefined) {
      let report: TeardownReport;
      try {
        report = await configurator.teardown(
          allocId,
          undefined,
          signal === undefined ? {} : { signal },
        );
      } catch (error) {
        throw new RunnerError(`teardown of allocation "${allocId}" failed: ${messageOf(error)}`, {
          code: signal?.aborted === true ? 'aborted' : 'teardown-failed',
          allocId,
          cause: error,
        });
      }
      // A namespace with the runner's name for this allocation is the runner's by construction.
      const netnsRemoved = await netns.remove(
        checkNetnsName(`${prefix}${allocId}`),
        signal === undefined ? {} : { signal },
      );
      return { allocId, known: false, report, netnsRemoved };
    }
    if (rec.phase !== 'tearing-down') {
      await store.put(
        record(
          { ...rec, phase: 'tearing-down' },
          { attachment: rec.attachment, status: rec.status },
        ),
      );
    }
    crash('teardown:after-intent');
    return finishTeardown(rec, signal);
  }

  /** A hint that makes host-local give back the address the allocation had (IPv4 only). */
  function addressHint(rec: AllocRecord): Readonly<Record<string, string>> | undefined {
    const address = rec.status?.address ?? '';
    if (address === '' || rec.spec.cniArgs?.IP !== undefined) return undefined;
    return { IP: address };
  }

  /** Records `failed` after restore undid an allocation. */
  async function recordFailed(rec: AllocRecord, why: string): Promise<void> {
    await store.put(record({ ...rec, phase: 'failed' }, { error: why }));
  }

  /**
   * Tears a ready allocation down and sets it up again once, in the same namespace path (a
   * namespace the runner made and that is still there is kept: the tasks may run in it). With
   * the address it had when host-local can give it back; otherwise any address.
   */
  async function recreate(rec: AllocRecord, signal: AbortSignal | undefined): Promise<AllocRecord> {
    await store.put(
      record({ ...rec, phase: 'setting-up' }, { attachment: rec.attachment, status: rec.status }),
    );
    const problems = await undo(rec.allocId, rec.attachment, undefined);
    if (problems.length > 0) throw new Error(problems.join('; '));
    const plan: NetnsPlan = rec.netnsCreated
      ? { kind: 'reuse', name: madeName(rec) }
      : { kind: 'given', path: rec.netnsPath };
    const hint = addressHint(rec);
    if (hint !== undefined) {
      try {
        return await freshSetup(rec.spec, plan, signal, hint);
      } catch (error) {
        log.warn('setting the allocation up again with its address failed; trying any address', {
          allocId: rec.allocId,
          error: messageOf(error),
        });
      }
    }
    return freshSetup(rec.spec, plan, signal);
  }

  async function restoreOne(
    rec: AllocRecord,
    signal: AbortSignal | undefined,
  ): Promise<RestoreOutcome> {
    const allocId = rec.allocId;
    const from = rec.phase;
    const outcome = (result: RestoreResult, checked: boolean, error?: string): RestoreOutcome => ({
      allocId,
      from,
      result,
      checked,
      ...(error === undefined ? {} : { error }),
    });
    try {
      switch (rec.phase) {
        case 'failed':
          return outcome('already-failed', false, rec.error);

        case 'tearing-down':
          await finishTeardown(rec, signal);
          counters.teardowns++;
          return outcome('torn-down', false);

        case 'setting-up': {
          const problems = await undo(
            allocId,
            rec.attachment,
            rec.netnsCreated ? madeName(rec) : undefined,
          );
          if (problems.length > 0) throw new Error(problems.join('; '));
          if (rec.spec.interruptedSetup === 'finish') {
            try {
              await freshSetup(rec.spec, planFor(rec.spec), signal);
              counters.setups++;
              return outcome('finished', false);
            } catch (error) {
              const why = `setup was interrupted by a restart and setting it up again failed: ${messageOf(error)}`;
              await recordFailed(rec, why);
              counters.restoreFailures++;
              return outcome('failed', false, why);
            }
          }
          const why =
            'setup was interrupted by a restart of the runner; what it had done was undone';
          await recordFailed(rec, why);
          counters.restoreFailures++;
          return outcome('failed', false, why);
        }

        case 'ready': {
          const present = await netns.exists(rec.netnsPath);
          let why: string;
          if (present) {
            try {
              const { ran } = await configurator.check(
                rec.attachment as AllocAttachment,
                signal === undefined ? {} : { signal },
              );
              counters.restored++;
              return outcome('kept', ran);
            } catch (error) {
              if (!foundBroken(error)) {
                // Setting every allocation up again because iptables or a plugin binary was
                // briefly unavailable would cut traffic for nothing: leave it, say so.
                throw new Error(`CHECK could not run: ${messageOf(error)}`, { cause: error });
              }
              why = `CHECK failed: ${messageOf(error)}`;
            }
          } else {
            why = `namespace "${rec.netnsPath}" is gone`;
          }
          if (!present && !rec.netnsCreated) {
            // The task driver's namespace is gone: there is nothing to set up again in.
            const problems = await undo(allocId, rec.attachment, undefined);
            if (problems.length > 0) throw new Error(problems.join('; '));
            await recordFailed(rec, why);
            counters.restoreFailures++;
            return outcome('failed', false, why);
          }
          log.warn('restore: setting the allocation up again', { allocId, reason: why });
          try {
            await recreate(rec, signal);
          } catch (error) {
            const failure = `${why}; setting it up again failed: ${messageOf(error)}`;
            await recordFailed(rec, failure);
            counters.restoreFailures++;
            return outcome('failed', present, failure);
          }
          counters.recreated++;
          return outcome('recreated', present, why);
        }
      }
    } catch (error) {
      counters.restoreFailures++;
      log.warn('restore could not settle the allocation', { allocId, error: messageOf(error) });
      return outcome('error', false, messageOf(error));
    }
  }

  /**
   * A record in `setting-up` or `tearing-down` when an operation starts was left by a crash and
   * not restored yet (an operation came before `restore()`): settle it first.
   */
  async function settled(
    allocId: string,
    signal: AbortSignal | undefined,
  ): Promise<AllocRecord | undefined> {
    const rec = store.get(allocId);
    if (rec === undefined || rec.phase === 'ready' || rec.phase === 'failed') return rec;
    const outcome = await restoreOne(rec, signal);
    if (outcome.result === 'error') {
      throw new RunnerError(
        `allocation "${allocId}" was left "${rec.phase}" by a crash and could not be settled: ${outcome.error ?? ''}`,
        { code: rec.phase === 'setting-up' ? 'setup-failed' : 'teardown-failed', allocId },
      );
    }
    return store.get(allocId);
  }

  async function reconcileNow(signal: AbortSignal | undefined): Promise<ReconcileReport> {
    const startedAt = clock.now();
    const known = new Set<string>([...store.list().map((r) => r.allocId), ...queue.activeIds()]);
    let release = () => {
      // Replaced below.
    };
    hold = { known, done: new Promise<void>((resolve) => (release = resolve)) };
    try {
      const madeNames = new Set(
        store
          .list()
          .filter((r) => r.netnsCreated)
          .map(madeName),
      );
      for (const id of known) madeNames.add(`${prefix}${id}`);
      const orphans = (await netns.list(signal === undefined ? {} : { signal })).filter(
        (name) =>
          name.startsWith(prefix) &&
          NAME_PATTERN.test(name.slice(prefix.length)) &&
          !madeNames.has(name),
      );
      const failed: { what: string; error: string }[] = [];
      let leakedAllocations: number;
      let orphanState: HostState;
      let reaped = 0;
      let reapedNamespaces = 0;
      if (mode === 'report') {
        const report = await configurator.findLeaks(known, signal === undefined ? {} : { signal });
        leakedAllocations = report.leaks.length;
        orphanState = report.orphans;
      } else {
        const report = await configurator.reapLeaks(known, signal === undefined ? {} : { signal });
        leakedAllocations = report.reaped.length + report.failed.length;
        orphanState = report.orphans;
        reaped = report.reaped.length;
        for (const f of report.failed) {
          failed.push({ what: `allocation "${f.allocId}"`, error: f.error });
        }
        for (const name of orphans) {
          try {
            if (await netns.remove(name, signal === undefined ? {} : { signal }))
              reapedNamespaces++;
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
        durationMs: clock.now() - startedAt,
      };
      if (leakedAllocations + orphans.length + report.orphanRules + report.orphanChains > 0) {
        log.warn(`reconcile found state that belongs to no allocation (${mode})`, { ...report });
      }
      return report;
    } catch (error) {
      counters.reconcileFailures++;
      throw new RunnerError(`reconcile failed: ${messageOf(error)}`, {
        code: signal?.aborted === true ? 'aborted' : 'reconcile-failed',
        cause: error,
      });
    } finally {
      hold = undefined;
      release();
    }
  }

  function reconcile(signal?: AbortSignal): Promise<ReconcileReport> {
    if (reconciling !== undefined) return reconciling;
    if (closing) {
      return Promise.reject(
        new RunnerError('the allocation runner is shutting down', { code: 'shutting-down' }),
      );
    }
    const running = reconcileNow(signal).finally(() => {
      reconciling = undefined;
    });
    reconciling = running;
    return running;
  }

  function schedule(): void {
    if (closing || intervalMs === 0) return;
    timer = clock.setTimeout(() => {
      timer = undefined;
      if (closing) return;
      reconcile().then(
        () => {
          schedule();
        },
        (error: unknown) => {
          log.warn('periodic reconcile failed', { error: messageOf(error) });
          schedule();
        },
      );
    }, intervalMs);
  }

  async function restore(signal: AbortSignal | undefined): Promise<RestoreReport> {
    refuseIfClosing();
    const startedAt = clock.now();
    const records = store.list();
    const outcomes = await Promise.all(
      records.map((rec) =>
        queue.run(
          rec.allocId,
          async () => {
            // The record as it is now: an operation queued before this one may have changed it.
            const now = store.get(rec.allocId);
            if (now === undefined) {
              return {
                allocId: rec.allocId,
                from: rec.phase,
                result: 'torn-down',
                checked: false,
              } as const;
            }
            return restoreOne(now, signal);
          },
          signal,
        ),
      ),
    );
    const counts = Object.fromEntries(RESULTS.map((r) => [r, 0])) as Record<RestoreResult, number>;
    for (const o of outcomes) counts[o.result]++;
    const report = { outcomes, counts, durationMs: clock.now() - startedAt };
    info('restore finished', { ...counts, durationMs: report.durationMs });
    return report;
  }

  return {
    async start(opts = {}) {
      refuseIfClosing();
      if (started) {
        throw new RunnerError('the allocation runner is already started', { code: 'conflict' });
      }
      started = true;
      const restored = await restore(opts.signal);
      let reconciled: ReconcileReport;
      try {
        reconciled = await reconcile(opts.signal);
      } finally {
        schedule();
      }
      return { restore: restored, reconcile: reconciled };
    },

    restore: (opts = {}) => restore(opts.signal),

    async setup(input, opts = {}) {
      refuseIfClosing();
      const spec = decodeSpec(input);
      const signal = opts.signal;
      return queue.run(
        spec.allocId,
        async () => {
          const rec = await settled(spec.allocId, signal);
          if (rec?.phase === 'ready') {
            const differences = specDifferences(rec.spec, spec);
            if (differences.length === 0) return rec.status as AllocNetworkStatus;
            throw new RunnerError(
              `allocation "${spec.allocId}" is already set up with a different spec (${differences.join(', ')} differ); tear it down first`,
              { code: 'conflict', allocId: spec.allocId },
            );
          }
          // No record, or a failed one (its state was undone): a new setup replaces it.
          return setupFromScratch(spec, signal);
        },
        signal,
      );
    },

    async check(input, opts = {}) {
      refuseIfClosing();
      const allocId = checkAllocId(input);
      const signal = opts.signal;
      return queue.run(
        allocId,
        async () => {
          const rec = await settled(allocId, signal);
          if (rec === undefined) {
            throw new RunnerError(`allocation "${allocId}" is not set up`, {
              code: 'not-found',
              allocId,
            });
          }
          if (rec.phase === 'failed') {
            throw new RunnerError(
              `allocation "${allocId}" failed: ${rec.error ?? 'no reason recorded'}`,
              {
                code: 'failed',
                allocId,
              },
            );
          }
          counters.checks++;
          try {
            const { ran } = await configurator.check(
              rec.attachment as AllocAttachment,
              signal === undefined ? {} : { signal },
            );
            return { allocId, ran };
          } catch (error) {
            counters.checkFailures++;
            throw new RunnerError(`check of allocation "${allocId}" failed: ${messageOf(error)}`, {
              code: signal?.aborted === true ? 'aborted' : 'check-failed',
              allocId,
              cause: error,
            });
          }
        },
        signal,
      );
    },

    async teardown(input, opts = {}) {
      refuseIfClosing();
      const allocId = checkAllocId(input);
      const signal = opts.signal;
      return queue.run(
        allocId,
        async () => {
          try {
            const report = await teardownOp(allocId, signal);
            counters.teardowns++;
            info('allocation torn down', { allocId, known: report.known });
            return report;
          } catch (error) {
            counters.teardownFailures++;
            throw error;
          }
        },
        signal,
      );
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
      return reconcile(opts.signal);
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
        ...counters,
      };
    },

    close() {
      if (closed !== undefined) return closed;
      closing = true;
      if (timer !== undefined) clock.clearTimeout(timer);
      timer = undefined;
      closed = (async () => {
        await queue.idle();
        if (reconciling !== undefined) {
          await reconciling.catch(() => {
            // Its failure was reported to whoever asked for it; shutdown goes on.
          });
        }
        await store.close();
      })();
      return closed;
    },
  };
}
