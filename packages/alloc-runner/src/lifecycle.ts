// One allocation's lifecycle, its making and its CHECK: setup (its host ports claimed, intent
// record, namespace, the configurator's setup of each attachment in order, each after its own
// intent; ready record; a failure rolls everything back, the secondaries last first, then the
// primary), CHECK of every attachment, and the recreate that restore asks for (attachments.ts
// holds what is per attachment). Its end is in teardown.ts. Every function here
// runs inside the allocation's turn of the queue (runner.ts puts it there), after restore.ts
// settled what a crash left: one operation per allocation at a time, so nothing here locks. The
// one thing shared across allocations, the host-port claims, is taken synchronously
// (port-claims.ts).
import type { FieldPath } from '@allocnet/base';
import type { AllocAttachment, AllocNetworkStatus, SetupOutcome } from '@allocnet/cni-configurator';
import {
  admit,
  checkEach,
  describeAttachment,
  fieldOfPlan,
  named,
  plansOf,
  plansOfRecord,
  undoSecondaries,
} from './attachments.js';
import type { AttachmentPlan } from './attachments.js';
import { callOf, logInfo, madeName, makeRecord } from './context.js';
import type { RunnerContext } from './context.js';
import {
  RunnerError,
  abortCode,
  invalidInput,
  invalidInputOf,
  kindOf,
  messageOf,
} from './errors.js';
import { checkNetnsName } from './netns.js';
import type { AllocRecord, ExtraAttachment } from './record.js';
import { specDifferences } from './canonical.js';
import type { RunnerSpec } from './spec.js';

export interface CheckReport {
  readonly allocId: string;
  /** False when the network's plugins or config do not allow a CHECK (nothing ran). */
  readonly ran: boolean;
}

/** The namespace of a setup: make one, reuse one (remaking it if gone), or use the given one. */
export type NetnsPlan =
  | { readonly kind: 'create'; readonly name: string }
  | { readonly kind: 'reuse'; readonly name: string }
  | { readonly kind: 'given'; readonly path: string };

/** The namespace of a new setup of `spec`: the task driver's, or one the runner makes. */
export function netnsPlanOf(ctx: RunnerContext, spec: RunnerSpec): NetnsPlan {
  return spec.netnsPath === undefined
    ? { kind: 'create', name: checkNetnsName(`${ctx.prefix}${spec.allocId}`) }
    : { kind: 'given', path: spec.netnsPath };
}

/**
 * Undoes what a rollback must of the primary: the configurator's teardown (DEL with the
 * attachment when there is one, then the sweep over every network), and the namespace when
 * `netnsName` is given. Goes on past a failure and returns the problems. Runs without the
 * caller's signal: an aborted setup still cleans up. The secondaries go first (`undoRecord`).
 */
export async function undo(
  ctx: RunnerContext,
  allocId: string,
  attachment: AllocAttachment | undefined,
  netnsName: string | undefined,
  keepHolds = false,
): Promise<string[]> {
  const problems: string[] = [];
  try {
    if (keepHolds) await ctx.networking.teardown(allocId, attachment, { keepHolds });
    else await ctx.networking.teardown(allocId, attachment);
  } catch (error) {
    problems.push(`the configurator's teardown failed: ${messageOf(error)}`);
  }
  if (netnsName !== undefined) {
    try {
      await ctx.netns.remove(netnsName);
    } catch (error) {
      problems.push(`removing namespace "${netnsName}" failed: ${messageOf(error)}`);
    }
  }
  return problems;
}

/** Undoes every attachment of the record, the secondaries last first, then the primary. */
export async function undoRecord(
  ctx: RunnerContext,
  rec: AllocRecord,
  netnsName: string | undefined,
  keepHolds = false,
): Promise<string[]> {
  return [
    ...(await undoSecondaries(ctx, rec.allocId, rec.extra ?? [], keepHolds)),
    ...(await undo(ctx, rec.allocId, rec.attachment, netnsName, keepHolds)),
  ];
}

/**
 * A configurator setup's options: the signal, a reclaim's addresses, and whether the namespace
 * is the runner's own (`ownNamespace`: an IPv4-only network's interface is then made without
 * IPv6).
 */
const setupOptions = (
  signal: AbortSignal | undefined,
  plan: AttachmentPlan,
  ownNamespace: boolean,
) => ({
  ...callOf(signal),
  ...(plan.reclaim === undefined ? {} : { reclaim: plan.reclaim }),
  ownNamespace,
});

/**
 * Sets the allocation up from nothing: its host ports claimed (`admit`), the intent record
 * (committed and synced), the namespace, the configurator's setup of the primary, then of each
 * secondary after its own intent (its `extra` entry, `setting-up`) is synced, the ready record.
 * Any failure rolls back (the failing attachment's leftovers, the secondaries before it last
 * first, the primary, the namespace if this call made it, the record, and with it the claims)
 * and throws `setup-failed` naming the failing attachment when there are several. `plans` is
 * what to set up (default: the spec's attachments); with their `reclaim`, exactly those
 * addresses (restore's recreate).
 */
export async function freshSetup(
  ctx: RunnerContext,
  spec: RunnerSpec,
  plan: NetnsPlan,
  signal: AbortSignal | undefined,
  plans: readonly AttachmentPlan[] = plansOf(spec),
): Promise<AllocRecord> {
  const { store, netns } = ctx;
  const allocId = spec.allocId;
  const netnsPath = plan.kind === 'given' ? plan.path : netns.pathOf(plan.name);
  const base = {
    allocId,
    spec,
    phase: 'setting-up' as const,
    netnsPath,
    netnsCreated: plan.kind !== 'given',
  };
  const several = plans.length > 1;
  // The attachment being set up (its index), for the error; undefined outside the plugins' runs.
  let current: number | undefined;
  admit(ctx, spec, plans, {
    first: 0,
    fail: (error, path) =>
      setupFailure(error, allocId, signal, [], ctx.operationTimeoutMs, { path }),
  });
  await store.put(makeRecord(ctx, base));
  ctx.crash('setup:after-intent');

  let madeNetns: string | undefined;
  let attachment: AllocAttachment | undefined;
  let gone: RunnerError | undefined;
  const extras: ExtraAttachment[] = [];
  try {
    if (plan.kind === 'create' || (plan.kind === 'reuse' && !(await netns.exists(netnsPath)))) {
      if (plan.kind === 'reuse') {
        // A leftover file that is no longer a namespace (the state after a reboot when /run is
        // not a tmpfs) would make `ip netns add` fail.
        await netns.remove(plan.name, callOf(signal));
      }
      await netns.create(plan.name, callOf(signal));
      madeNetns = plan.name;
      ctx.crash('setup:after-netns');
    }
    const [first, ...rest] = plans;
    current = 0;
    const outcome = await ctx.networking.setup(
      (first as AttachmentPlan).spec,
      netnsPath,
      setupOptions(signal, first as AttachmentPlan, base.netnsCreated),
    );
    attachment = outcome.attachment;
    ctx.crash('setup:after-add');
    for (const [i, next] of rest.entries()) {
      current = i + 1;
      extras.push({ spec: next.spec, phase: 'setting-up', attached: next.attached });
      await store.put(makeRecord(ctx, { ...base, extra: extras }, outcome));
      ctx.crash('setup:after-attachment-intent');
      const added: SetupOutcome = await ctx.networking.setup(
        next.spec,
        netnsPath,
        setupOptions(signal, next, base.netnsCreated),
      );
      extras[i] = { ...(extras[i] as ExtraAttachment), phase: 'ready', ...added };
      ctx.crash('setup:after-attachment-add');
    }
    current = undefined;
    // The plugins may have finished in a namespace that was removed under them: an allocation
    // reported ready there would have no network (bridge's ADD does not notice, the DEL does).
    gone = await vanished(ctx, plan, netnsPath);
    if (gone !== undefined) throw gone;
    const ready = makeRecord(ctx, { ...base, phase: 'ready', extra: extras }, outcome);
    await store.put(ready);
    ctx.crash('setup:after-ready');
    return ready;
  } catch (thrown) {
    // A plugin that failed because the namespace went away: say that, not the plugin's words.
    // When even the look fails, the plugin's error is the one to report.
    const error =
      thrown !== gone && abortCode(signal) === undefined
        ? ((await vanished(ctx, plan, netnsPath, thrown).catch(() => undefined)) ?? thrown)
        : thrown;
    // Only a namespace this call made is removed; in `reuse`, one that was there stays (the
    // allocation's tasks may run in it) and the record of it is dropped with the rest. The
    // failing secondary's own leftovers go first (its entry has no attachment: its sweep).
    const problems = [
      ...(await undoSecondaries(ctx, allocId, extras)),
      ...(await undo(ctx, allocId, attachment, madeNetns)),
    ];
    try {
      await store.remove(allocId);
    } catch (removeError) {
      if (problems.length === 0 && kindOf(removeError) === 'exhausted') {
        // Everything is undone but the record: it goes when the data dir has space again.
        ctx.unremoved.add(allocId);
        problems.push(`${messageOf(removeError)}; the record goes once the data dir has space`);
      } else {
        // The record stays `setting-up`: the next restore (or operation) undoes it again.
        problems.push(messageOf(removeError));
      }
    }
    const k = several ? current : undefined;
    const failing = k === undefined ? undefined : (plans[k] as AttachmentPlan);
    throw setupFailure(error, allocId, signal, problems, ctx.operationTimeoutMs, {
      ...(failing === undefined || k === undefined
        ? {}
        : {
            which: describeAttachment(ctx, k, failing.spec),
            path: (p: FieldPath) => fieldOfPlan(spec, failing, k, p),
          }),
    });
  }
}

/**
 * The error for a setup whose namespace was removed while it ran (undefined while it is there):
 * for a namespace the task driver gave, its `netnsPath` is no longer one (invalid-argument, as
 * when it is gone before the setup); for one the runner made, someone removed it under us.
 */
async function vanished(
  ctx: RunnerContext,
  plan: NetnsPlan,
  netnsPath: string,
  cause?: unknown,
): Promise<RunnerError | undefined> {
  if (await ctx.netns.exists(netnsPath)) return undefined;
  const extra = cause === undefined ? {} : { cause };
  return plan.kind === 'given'
    ? invalidInput(
        'invalid allocation spec',
        ['netnsPath'],
        [`"${netnsPath}" is not a network namespace: it was removed while the setup ran`],
        extra,
      )
    : new RunnerError(`namespace "${netnsPath}" was removed while the setup ran`, {
        code: 'netns',
        ...extra,
      });
}

/**
 * The runner's error for a setup that failed (or was aborted) and was rolled back. `which` names
 * the failing attachment; `path` says where a field the configurator refused is in the spec
 * (default `spec.<field>`).
 */
function setupFailure(
  error: unknown,
  allocId: string,
  signal: AbortSignal | undefined,
  problems: readonly string[],
  timeoutMs: number,
  at: { readonly which?: string; readonly path?: (path: FieldPath) => FieldPath } = {},
): RunnerError {
  const stopped = abortCode(signal) ?? (kindOf(error) === 'aborted' ? 'aborted' : undefined);
  // The request's own fault, as the configurator found it (a host port two ports claim, an
  // unknown network): the runner's `invalid-argument`, its field under `spec`.
  const input = stopped !== undefined ? undefined : invalidInputOf(error);
  const how =
    stopped === 'timed-out'
      ? `ran past its deadline of ${timeoutMs} ms (operationTimeoutMs) and was rolled back`
      : stopped === 'aborted'
        ? 'was aborted'
        : 'failed';
  return new RunnerError(
    `setup of allocation "${allocId}" ${how}: ${named(at.which, error)}${
      problems.length === 0 ? '' : `; the rollback also failed: ${problems.join('; ')}`
    }`,
    {
      code: stopped ?? (input !== undefined ? 'invalid-argument' : 'setup-failed'),
      allocId,
      cause: error,
      ...(input === undefined
        ? {}
        : { path: at.path?.(input.path) ?? ['spec', ...input.path], problem: input.problem }),
    },
  );
}

/** A setup in the allocation's turn; `rec` is its record, settled (see restore.ts `settle`). */
export async function setup(
  ctx: RunnerContext,
  spec: RunnerSpec,
  rec: AllocRecord | undefined,
  signal: AbortSignal | undefined,
): Promise<AllocNetworkStatus> {
  if (rec?.phase === 'ready') {
    const differences = specDifferences(rec.spec, spec);
    if (differences.length === 0) return rec.status as AllocNetworkStatus;
    throw new RunnerError(
      `allocation "${spec.allocId}" is already set up with a different spec (${differences.join(', ')} differ); tear it down first`,
      {
        code: 'conflict',
        allocId: spec.allocId,
        parts: [
          `allocation "${spec.allocId}" is already set up with a different spec (`,
          ...differences.flatMap((d, i) => [...(i === 0 ? [] : [', ']), { field: [d] }]),
          ' differ); tear it down first',
        ],
      },
    );
  }
  // No record, or a failed one (its state was undone): a new setup replaces it.
  const plan = netnsPlanOf(ctx, spec);
  if (plan.kind === 'given' && !(await ctx.netns.exists(plan.path))) {
    throw invalidInput(
      'invalid allocation spec',
      ['spec', 'netnsPath'],
      [`"${plan.path}" is not a network namespace`],
      { allocId: spec.allocId },
    );
  }
  try {
    const ready = await freshSetup(ctx, spec, plan, signal);
    ctx.counters.setups++;
    logInfo(ctx, 'allocation set up', { allocId: spec.allocId, address: ready.status?.address });
    return ready.status as AllocNetworkStatus;
  } catch (error) {
    ctx.counters.setupFailures++;
    throw error;
  }
}

/** A CHECK in the allocation's turn, of its settled record. */
export async function check(
  ctx: RunnerContext,
  allocId: string,
  rec: AllocRecord | undefined,
  signal: AbortSignal | undefined,
): Promise<CheckReport> {
  if (rec === undefined) {
    throw new RunnerError(`allocation "${allocId}" is not set up`, {
      code: 'not-found',
      allocId,
    });
  }
  if (rec.phase === 'failed') {
    throw new RunnerError(`allocation "${allocId}" failed: ${rec.error ?? 'no reason recorded'}`, {
      code: 'failed',
      allocId,
    });
  }
  ctx.counters.checks++;
  const outcome = await checkEach(ctx, rec, signal);
  if (outcome.ok) return { allocId, ran: outcome.ran };
  ctx.counters.checkFailures++;
  // `check-failed` takes the configurator's kind: `broken` (the network is not as set up),
  // `unavailable` (the CHECK could not run), `aborted`, or `internal`.
  throw new RunnerError(
    `check of allocation "${allocId}" failed: ${named(outcome.which, outcome.error)}`,
    { code: abortCode(signal) ?? 'check-failed', allocId, cause: outcome.error },
  );
}

/** Records `failed` after restore undid an allocation (its attachments with it). */
export async function recordFailed(
  ctx: RunnerContext,
  rec: AllocRecord,
  why: string,
): Promise<void> {
  await ctx.store.put(makeRecord(ctx, { ...rec, phase: 'failed', extra: [] }, { error: why }));
}

/**
 * The addresses a recreate re-claims: every recorded one of every attachment, v4 and v6 (none:
 * any address).
 */
export function reclaimOf(rec: AllocRecord): readonly string[] | undefined {
  const addresses = [
    ...(rec.attachment?.addresses ?? []),
    ...(rec.extra ?? []).flatMap((e) => e.attachment?.addresses ?? []),
  ];
  return addresses.length === 0 ? undefined : addresses;
}

/**
 * Tears a ready allocation down and sets it up again once, in the same namespace path (a
 * namespace the runner made and that is still there is kept: the tasks may run in it), with
 * exactly its recorded addresses: the teardown leaves them held and the setup re-claims them
 * (the configurator's holds.ts). Never with another address: when one cannot be re-claimed the
 * setup fails (restore records the allocation failed, naming the address).
 */
export async function recreate(
  ctx: RunnerContext,
  rec: AllocRecord,
  signal: AbortSignal | undefined,
): Promise<AllocRecord> {
  await ctx.store.put(
    makeRecord(
      ctx,
      { ...rec, phase: 'setting-up' },
      { attachment: rec.attachment, status: rec.status },
    ),
  );
  // Every attachment is set up again, on its recorded addresses: the interface and addresses
  // of each stay as they were (a lost namespace is made again with every interface).
  const reclaim = reclaimOf(rec);
  const problems = await undoRecord(ctx, rec, undefined, reclaim !== undefined);
  if (problems.length > 0) throw new Error(problems.join('; '));
  const plan: NetnsPlan = rec.netnsCreated
    ? { kind: 'reuse', name: madeName(rec) }
    : { kind: 'given', path: rec.netnsPath };
  return freshSetup(ctx, rec.spec, plan, signal, plansOfRecord(rec, true));
}
