// One allocation's end: teardown (intent record, the configurator's teardown of each secondary
// attachment, last first, scoped to it, then of the primary with the audit over every network,
// the namespace the runner made, the record) and the operators' forced cleanup (the configurator's sweep of the
// allocation's id, no DEL, the record left alone). Like lifecycle.ts, every function here runs in
// the allocation's turn of the queue: one operation per allocation at a time, so nothing locks.
import type { CleanupReport, TeardownReport } from '@allocnet/cni-configurator';
import { tearDownSecondary } from './attachments.js';
import { callOf, logInfo, madeName, makeRecord } from './context.js';
import type { RunnerContext } from './context.js';
import { RunnerError, abortCode, kindOf, messageOf } from './errors.js';
import { checkNetnsName } from './netns.js';
import type { AllocRecord } from './record.js';

/** What `teardown` did. */
export interface RunnerTeardownReport {
  readonly allocId: string;
  /** Whether the allocation had a record (false: only the sweep and the namespace by name ran). */
  readonly known: boolean;
  /** The configurator's report of the primary: the DEL's outcome and what the audit removed. */
  readonly report: TeardownReport;
  /** The reports of the secondary attachments, in the order they ran (last first); none: absent. */
  readonly secondaries?: readonly TeardownReport[];
  /** Whether the runner removed a namespace it had made. */
  readonly netnsRemoved: boolean;
}

/** The runner's error for a teardown whose configurator part failed. */
function teardownFailure(
  error: unknown,
  allocId: string,
  signal: AbortSignal | undefined,
): RunnerError {
  return new RunnerError(`teardown of allocation "${allocId}" failed: ${messageOf(error)}`, {
    code: abortCode(signal) ?? 'teardown-failed',
    allocId,
    cause: error,
  });
}

/**
 * Finishes a teardown whose intent is recorded: the configurator's teardown of each secondary
 * (last first, each with its own audit in its network), then of the primary with the stored
 * attachment, the namespace if the runner made it, then the record. A failure leaves the record
 * `tearing-down` (the next teardown or restore finishes it: a DEL of what is gone succeeds) and
 * throws `teardown-failed`.
 */
export async function finishTeardown(
  ctx: RunnerContext,
  rec: AllocRecord,
  signal: AbortSignal | undefined,
): Promise<RunnerTeardownReport> {
  const allocId = rec.allocId;
  let report: TeardownReport;
  let netnsRemoved = false;
  const secondaries: TeardownReport[] = [];
  try {
    for (const entry of [...(rec.extra ?? [])].reverse())
      secondaries.push(await tearDownSecondary(ctx, allocId, entry, callOf(signal)));
    report = await ctx.networking.teardown(allocId, rec.attachment, callOf(signal));
    ctx.crash('teardown:after-del');
    if (rec.netnsCreated) netnsRemoved = await ctx.netns.remove(madeName(rec), callOf(signal));
    ctx.crash('teardown:after-netns');
  } catch (error) {
    throw teardownFailure(error, allocId, signal);
  }
  try {
    await ctx.store.remove(allocId);
  } catch (error) {
    if (kindOf(error) !== 'exhausted') throw error;
    // The network is gone; the record stays `tearing-down` until a removal succeeds.
    ctx.unremoved.add(allocId);
    throw new RunnerError(
      `teardown of allocation "${allocId}" removed its network, but not its record: ${messageOf(error)}; the record goes once the data dir has space`,
      { code: 'teardown-failed', allocId, cause: error },
    );
  }
  ctx.unremoved.delete(allocId);
  return {
    allocId,
    known: true,
    report,
    netnsRemoved,
    ...(secondaries.length === 0 ? {} : { secondaries }),
  };
}

async function teardownOnce(
  ctx: RunnerContext,
  allocId: string,
  signal: AbortSignal | undefined,
): Promise<RunnerTeardownReport> {
  const rec = ctx.store.get(allocId);
  if (rec === undefined) {
    let report: TeardownReport;
    try {
      report = await ctx.networking.teardown(allocId, undefined, callOf(signal));
    } catch (error) {
      throw teardownFailure(error, allocId, signal);
    }
    // A namespace with the runner's name for this allocation is the runner's by construction.
    const netnsRemoved = await ctx.netns.remove(
      checkNetnsName(`${ctx.prefix}${allocId}`),
      callOf(signal),
    );
    return { allocId, known: false, report, netnsRemoved };
  }
  if (rec.phase !== 'tearing-down') {
    await ctx.store.put(
      makeRecord(
        ctx,
        { ...rec, phase: 'tearing-down' },
        { attachment: rec.attachment, status: rec.status },
      ),
    );
  }
  ctx.crash('teardown:after-intent');
  return finishTeardown(ctx, rec, signal);
}

/**
 * A teardown in the allocation's turn. An unknown allocation is not an error: the
 * configurator's sweep runs for its id, and a namespace `<prefix><id>` is removed.
 */
export async function teardown(
  ctx: RunnerContext,
  allocId: string,
  signal: AbortSignal | undefined,
): Promise<RunnerTeardownReport> {
  try {
    const report = await teardownOnce(ctx, allocId, signal);
    ctx.counters.teardowns++;
    logInfo(ctx, 'allocation torn down', { allocId, known: report.known });
    return report;
  } catch (error) {
    ctx.counters.teardownFailures++;
    throw error;
  }
}

/** What `forceCleanup` did. */
export interface RunnerCleanupReport {
  /** Whether the allocation had a record when its turn came (its network stops working then). */
  readonly known: boolean;
  /** The configurator's report: what was removed, or with `dryRun` what would be. */
  readonly report: CleanupReport;
}

export interface ForceCleanupOptions {
  /** Only list what would be removed. */
  readonly dryRun: boolean;
  /** The one network to sweep, as the configurator's `forceCleanup` takes it; default all. */
  readonly network?: string;
}

/**
 * The configurator's forced cleanup of the allocation's id, in the allocation's turn: what is
 * tagged with it goes, with no DEL; the record, if any, stays. Its errors are the configurator's.
 */
export async function forceCleanup(
  ctx: RunnerContext,
  allocId: string,
  options: ForceCleanupOptions,
  signal: AbortSignal | undefined,
): Promise<RunnerCleanupReport> {
  const known = ctx.store.get(allocId) !== undefined;
  const report = await ctx.leaks.forceCleanup(allocId, {
    ...callOf(signal),
    dryRun: options.dryRun,
    ...(options.network === undefined ? {} : { network: options.network }),
  });
  return { known, report };
}
