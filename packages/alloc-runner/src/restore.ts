// Settling what the last run left: every record in `setting-up` (undone, then failed or set up
// again), `tearing-down` (finished) or `ready` (CHECKed; set up again once when broken or its
// namespace is gone). `restore` runs at start for every record; `settle` runs before any
// operation on an allocation whose record a crash left mid-way and restore has not reached yet.
// Both run in the allocation's turn of the queue, so they never race an operation on it.
// `holdRecorded` runs before both, at start, before any operation is admitted (control.ts): the
// recorded addresses of `ready` records are held (the configurator's holds.ts), so that no setup
// is handed one while restore sets their allocations up again with exactly them.
import type { CheckBatch } from '@allocnet/cni-configurator';
import { settleAttachments } from './attach.js';
import { checkEach, named, plansOf } from './attachments.js';
import { callOf, inTurn, logInfo, madeName } from './context.js';
import type { RunnerContext } from './context.js';
import { RunnerError, kindOf, messageOf } from './errors.js';
import {
  freshSetup,
  netnsPlanOf,
  reclaimOf,
  recordFailed,
  recreate,
  undoRecord,
} from './lifecycle.js';
import type { AllocPhase, AllocRecord } from './record.js';
import { finishTeardown } from './teardown.js';

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

const RESULTS: readonly RestoreResult[] = [
  'kept',
  'recreated',
  'finished',
  'failed',
  'torn-down',
  'already-failed',
  'error',
];

/** The error behind an `error` outcome, for `settle` to carry its kind (a full data dir). */
const errorCauses = new WeakMap<RestoreOutcome, unknown>();

/**
 * Settles one record (see `RestoreResult`). Never throws: `error` says what went wrong. A ready
 * record's CHECK shares its reads with the others of `batch` (a restore's).
 */
async function restoreOne(
  ctx: RunnerContext,
  rec: AllocRecord,
  signal: AbortSignal | undefined,
  batch?: CheckBatch,
): Promise<RestoreOutcome> {
  const { counters } = ctx;
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
        await finishTeardown(ctx, rec, signal);
        counters.teardowns++;
        return outcome('torn-down', false);

      case 'setting-up': {
        const problems = await undoRecord(ctx, rec, rec.netnsCreated ? madeName(rec) : undefined);
        if (problems.length > 0) throw new Error(problems.join('; '));
        if (rec.spec.interruptedSetup === 'finish') {
          // The spec's attachments, and those `attach` had added (a recreate was interrupted).
          const attached = (rec.extra ?? []).filter((e) => e.attached);
          const plans = [
            ...plansOf(rec.spec),
            ...attached.map((e) => ({ spec: e.spec, attached: true })),
          ];
          try {
            await freshSetup(ctx, rec.spec, netnsPlanOf(ctx, rec.spec), signal, plans);
            counters.setups++;
            return outcome('finished', false);
          } catch (error) {
            const why = `setup was interrupted by a restart and setting it up again failed: ${messageOf(error)}`;
            await recordFailed(ctx, rec, why);
            counters.restoreFailures++;
            return outcome('failed', false, why);
          }
        }
        const why = 'setup was interrupted by a restart of the runner; what it had done was undone';
        await recordFailed(ctx, rec, why);
        counters.restoreFailures++;
        return outcome('failed', false, why);
      }

      case 'ready':
        return await restoreReady(ctx, rec, signal, outcome, batch);
    }
  } catch (error) {
    counters.restoreFailures++;
    ctx.log.warn('restore could not settle the allocation', { allocId, error: messageOf(error) });
    const failed = outcome('error', false, messageOf(error));
    errorCauses.set(failed, error);
    return failed;
  }
}

/**
 * A ready record: an attach or detach a crash interrupted is settled first (undone, finished);
 * then every attachment is CHECKed, and when one is broken or the namespace is gone, all are set
 * up again on their recorded addresses.
 */
async function restoreReady(
  ctx: RunnerContext,
  recorded: AllocRecord,
  signal: AbortSignal | undefined,
  outcome: (result: RestoreResult, checked: boolean, error?: string) => RestoreOutcome,
  batch: CheckBatch | undefined,
): Promise<RestoreOutcome> {
  const { counters } = ctx;
  const allocId = recorded.allocId;
  const rec = await settleAttachments(ctx, recorded);
  const present = await ctx.netns.exists(rec.netnsPath);
  let why: string;
  if (present) {
    const checked = await checkEach(ctx, rec, signal, batch);
    if (checked.ok) {
      counters.restored++;
      return outcome('kept', checked.ran);
    }
    if (kindOf(checked.error) !== 'broken') {
      // Setting every allocation up again because iptables or a plugin binary was briefly
      // unavailable would cut traffic for nothing: leave it, say so.
      throw new Error(`CHECK could not run: ${named(checked.which, checked.error)}`, {
        cause: checked.error,
      });
    }
    why = `CHECK failed: ${named(checked.which, checked.error)}`;
  } else {
    why = `namespace "${rec.netnsPath}" is gone`;
  }
  if (!present && !rec.netnsCreated) {
    // The task driver's namespace is gone: there is nothing to set up again in.
    const problems = await undoRecord(ctx, rec, undefined);
    if (problems.length > 0) throw new Error(problems.join('; '));
    await recordFailed(ctx, rec, why);
    counters.restoreFailures++;
    return outcome('failed', false, why);
  }
  ctx.log.warn('restore: setting the allocation up again', { allocId, reason: why });
  const reclaim = reclaimOf(rec) ?? [];
  const with_ = reclaim.length === 0 ? '' : ` with its recorded address ${reclaim.join(', ')}`;
  let again: AllocRecord;
  try {
    again = await recreate(ctx, rec, signal);
  } catch (error) {
    const failure = `${why}; setting it up again${with_} failed: ${messageOf(error)}`;
    await recordFailed(ctx, rec, failure);
    counters.restoreFailures++;
    // Undone, its holds with it: the addresses are free for others now (an abort: the next
    // start holds them again, the record being failed does not keep them).
    if (kindOf(error) !== 'aborted') lostAddresses(ctx, rec, reclaim, messageOf(error));
    return outcome('failed', present, failure);
  }
  counters.recreated++;
  if (reclaim.length > 0) {
    const now = new Set(reclaimOf(again) ?? []);
    const elsewhere = reclaim.filter((a) => !now.has(a));
    // Only a network without host-local can do this (its IPAM is not asked): say so.
    if (elsewhere.length > 0)
      lostAddresses(ctx, rec, elsewhere, `it came back on ${[...now].join(', ')}`);
    else counters.reclaimed++;
  }
  return outcome('recreated', present, why);
}

/** Counts and logs recorded addresses a recreate could not give back. */
function lostAddresses(
  ctx: RunnerContext,
  rec: AllocRecord,
  addresses: readonly string[],
  reason: string,
): void {
  ctx.counters.addressesLost += addresses.length;
  for (const address of addresses)
    ctx.log.warn('restore: the allocation lost its recorded address', {
      allocId: rec.allocId,
      network: rec.attachment?.network.name,
      address,
      reason,
    });
}

/**
 * Holds the recorded addresses of every `ready` record (the configurator's `holdAddresses`)
 * before any operation is admitted. Never throws: a failure is logged, and restore re-claims
 * what it can (an address someone took meanwhile fails its allocation, named, never swapped).
 */
export async function holdRecorded(
  ctx: RunnerContext,
  signal: AbortSignal | undefined,
): Promise<void> {
  const attachments = ctx.store
    .list()
    .filter((r) => r.phase === 'ready')
    .flatMap((r) => [r.attachment, ...(r.extra ?? []).map((e) => e.attachment)])
    .flatMap((a) => (a === undefined ? [] : [a]));
  if (attachments.length === 0) return;
  try {
    const report = await ctx.networking.holdAddresses(attachments, callOf(signal));
    for (const lost of report.lost)
      ctx.log.warn('restore: a recorded address cannot be held', { ...lost });
  } catch (error) {
    ctx.log.warn('holding the recorded addresses failed; restore re-claims them as it can', {
      error: messageOf(error),
    });
  }
}

/**
 * The allocation's record, settled: a record in `setting-up` or `tearing-down` when an operation
 * starts was left by a crash and not restored yet (an operation came before `restore()`), so it
 * is settled first; so is a ready record's attach or detach left mid-way (`attachments` false:
 * left as it is, for a detach that finishes its own). Call it in the allocation's turn.
 */
export async function settle(
  ctx: RunnerContext,
  allocId: string,
  signal: AbortSignal | undefined,
  attachments = true,
): Promise<AllocRecord | undefined> {
  const rec = ctx.store.get(allocId);
  if (rec?.phase === 'ready') return attachments ? settleAttachments(ctx, rec) : rec;
  if (rec === undefined || rec.phase === 'failed') return rec;
  if (ctx.unremoved.has(allocId)) {
    // Not a crash's leftover: the network is undone and only the record is left (a full data
    // dir kept it). While the dir is still full this throws the store's `store-full`.
    await ctx.store.remove(allocId);
    ctx.unremoved.delete(allocId);
    return undefined;
  }
  const outcome = await restoreOne(ctx, rec, signal);
  if (outcome.result === 'error') {
    throw new RunnerError(
      `allocation "${allocId}" was left "${rec.phase}" by a crash and could not be settled: ${outcome.error ?? ''}`,
      {
        code: rec.phase === 'setting-up' ? 'setup-failed' : 'teardown-failed',
        allocId,
        cause: errorCauses.get(outcome),
      },
    );
  }
  return ctx.store.get(allocId);
}

/**
 * Settles every record left by the last run, each in its allocation's turn. Their CHECKs share
 * one batch: one read of iptables and of host-local's directories for them all.
 */
export async function restore(
  ctx: RunnerContext,
  signal: AbortSignal | undefined,
): Promise<RestoreReport> {
  const startedAt = ctx.clock.now();
  const records = ctx.store.list();
  const batch = ctx.networking.checkBatch();
  for (const rec of records) ctx.restoring.add(rec.allocId);
  const outcomes = await Promise.all(
    records.map((rec) =>
      inTurn(
        ctx,
        rec.allocId,
        async (turn) => {
          // The record as it is now: an operation queued before this one may have changed it.
          const now = ctx.store.get(rec.allocId);
          if (now === undefined) {
            return {
              allocId: rec.allocId,
              from: rec.phase,
              result: 'torn-down',
              checked: false,
            } as const;
          }
          return restoreOne(ctx, now, turn, batch);
        },
        signal,
        'restore',
      ).finally(() => {
        ctx.restoring.delete(rec.allocId);
      }),
    ),
  );
  const counts = Object.fromEntries(RESULTS.map((r) => [r, 0])) as Record<RestoreResult, number>;
  for (const o of outcomes) counts[o.result]++;
  const report = { outcomes, counts, durationMs: ctx.clock.now() - startedAt };
  logInfo(ctx, 'restore finished', { ...counts, durationMs: report.durationMs });
  return report;
}
