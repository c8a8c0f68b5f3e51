// Networks added to and removed from a running allocation (Multus's dynamic networks): `attach`
// and `detach`, and the settling of one a crash interrupted (`settleAttachments`). Like the rest
// of the lifecycle, each runs in the allocation's turn of the queue, on its settled record.
// Durable as a setup is: an attach's intent (its `extra` entry, `setting-up`) is synced before its
// plugins run, and a detach's (`tearing-down`) before its DEL; a crash between leaves the entry,
// and restore (or the next operation) undoes the attach or finishes the detach.
import type { PortMapping, TeardownReport } from '@allocnet/cni-configurator';
import { decodeAttachment } from './attachment-spec.js';
import {
  admit,
  attachFailure,
  attachmentName,
  networkOf,
  tearDownSecondary,
} from './attachments.js';
import { callOf, logInfo, makeRecord } from './context.js';
import type { RunnerContext } from './context.js';
import { RunnerError, invalidInput, invalidInputOf, messageOf } from './errors.js';
import { attachmentsOf } from './record.js';
import type { AllocRecord, ExtraAttachment } from './record.js';
import { sameAttachment } from './canonical.js';

/** What `attach` did: the record after it, and whether the attachment was there already. */
export interface AttachResult {
  readonly record: AllocRecord;
  /** An equal attachment on that interface was ready: nothing ran. */
  readonly alreadyAttached: boolean;
}

/** What `detach` did: the record after it, and the configurator's report of the teardown. */
export interface DetachResult {
  readonly record: AllocRecord;
  readonly report: TeardownReport;
}

/** The record with `extra` replaced, the primary's attachment and status kept. */
function withExtra(
  ctx: RunnerContext,
  rec: AllocRecord,
  extra: readonly ExtraAttachment[],
): AllocRecord {
  return makeRecord(ctx, { ...rec, extra }, { attachment: rec.attachment, status: rec.status });
}

/** The host ports an attachment maps (its ADD's, else its spec's). */
function portsOf(ctx: RunnerContext, entry: ExtraAttachment): readonly PortMapping[] {
  return entry.attachment?.portMappings ?? ctx.networking.portMappingsOf(entry.spec);
}

/** The record of a live allocation, or the operation's error (`not-found`, `failed`). */
function liveRecord(rec: AllocRecord | undefined, allocId: string): AllocRecord {
  if (rec === undefined)
    throw new RunnerError(`allocation "${allocId}" is not set up`, { code: 'not-found', allocId });
  if (rec.phase === 'failed')
    throw new RunnerError(`allocation "${allocId}" failed: ${rec.error ?? 'no reason recorded'}`, {
      code: 'failed',
      allocId,
    });
  return rec;
}

/**
 * Settles the secondaries a crash (or a failed detach) left mid-way in a ready record: an attach's
 * `setting-up` entry is undone, a detach's `tearing-down` one finished (each scoped to itself),
 * and both leave the record and their host ports. The record as it is then.
 */
export async function settleAttachments(
  ctx: RunnerContext,
  rec: AllocRecord,
): Promise<AllocRecord> {
  const pending = (rec.extra ?? []).filter((e) => e.phase !== 'ready');
  if (pending.length === 0) return rec;
  for (const entry of [...pending].reverse()) await tearDownSecondary(ctx, rec.allocId, entry);
  const next = withExtra(
    ctx,
    rec,
    (rec.extra ?? []).filter((e) => e.phase === 'ready'),
  );
  await ctx.store.put(next);
  for (const entry of pending) {
    ctx.ports.drop(rec.allocId, portsOf(ctx, entry));
    ctx.log.warn(
      entry.phase === 'setting-up'
        ? 'an attach interrupted by a restart was undone'
        : 'a detach interrupted by a restart (or a failure) was finished',
      { allocId: rec.allocId, ifName: entry.spec.ifName, network: networkOf(ctx, entry.spec) },
    );
  }
  return next;
}

/** The first free `net<j>`, j from `k`, for an attach that names no interface. */
function freeIfName(taken: ReadonlySet<string>, k: number): string {
  let j = k;
  while (taken.has(`net${j}`)) j++;
  return `net${j}`;
}

/**
 * Adds a network to a ready allocation, on its own interface: validated as a setup's attachment
 * is (under `attachment`), its host ports claimed, its intent synced, its ADD run, recorded ready.
 * An equal attachment ready on that interface: `alreadyAttached`, nothing runs; another one there,
 * `conflict`. A failure undoes it and throws `setup-failed` (the allocation stays as it was).
 */
export async function attach(
  ctx: RunnerContext,
  allocId: string,
  raw: unknown,
  live: AllocRecord | undefined,
  options: { readonly signal: AbortSignal | undefined; readonly maxAttachments: number },
): Promise<AttachResult> {
  const rec = liveRecord(live, allocId);
  const views = attachmentsOf(rec);
  const k = views.length;
  const names = new Set(views.map((v) => v.ifName));
  const decoded = decodeAttachment(rec.spec, raw, (own) => {
    if (own !== undefined) return own;
    // No interface named: a retry of an attach to a network it has goes to that interface.
    const asked = (raw as { network?: unknown }).network;
    const network = networkOf(ctx, {
      ...rec.spec,
      network: typeof asked === 'string' ? asked : '',
    });
    const same = views.find((v) => !v.primary && v.network === network);
    return same?.ifName ?? freeIfName(names, k);
  });
  const spec = decoded.spec;
  const ifName = spec.ifName as string;
  const there = views.find((v) => v.ifName === ifName);
  if (there !== undefined) {
    const entry = there.primary ? undefined : rec.extra?.[there.index - 1];
    if (entry !== undefined && entry.phase === 'ready' && sameAttachment(entry.spec, spec))
      return { record: rec, alreadyAttached: true };
    throw new RunnerError(
      `allocation "${allocId}" already has interface "${ifName}" (network ${JSON.stringify(there.network)}${there.primary ? ', its primary attachment' : ''}); detach it first`,
      { code: 'conflict', allocId },
    );
  }
  if (k + 1 > options.maxAttachments)
    throw invalidInput(
      'invalid attachment',
      ['attachment'],
      [
        `would be the allocation's attachment ${k + 1}, more than the limit of ${options.maxAttachments} (limits.maxAttachments)`,
      ],
      { allocId },
    );
  const what = `attach of network ${JSON.stringify(networkOf(ctx, spec))} to allocation "${allocId}" (${ifName})`;
  admit(ctx, rec.spec, [{ spec, attached: true }], {
    first: k,
    root: ['attachment'],
    taken: new Map(views.map((v) => [v.network, v.index])),
    mapped: views.map((v) => ({
      which: attachmentName(v.index, v.ifName, v.network),
      ports: v.attachment?.portMappings ?? [],
    })),
    fail: (error, at) => {
      const bad = invalidInputOf(error);
      return bad === undefined
        ? attachFailure(what, error, allocId, options.signal, 'setup-failed')
        : invalidInput('invalid attachment', at(bad.path), bad.problem, { allocId, cause: error });
    },
  });
  return addAttachment(
    ctx,
    rec,
    { spec, phase: 'setting-up', attached: true },
    what,
    options.signal,
  );
}

/** The durable part of an attach, after its admission: intent, ADD, ready; undone on failure. */
async function addAttachment(
  ctx: RunnerContext,
  rec: AllocRecord,
  intent: ExtraAttachment,
  what: string,
  signal: AbortSignal | undefined,
): Promise<AttachResult> {
  const allocId = rec.allocId;
  const extra = rec.extra ?? [];
  let entry = intent;
  let recorded = false;
  try {
    await ctx.store.put(withExtra(ctx, rec, [...extra, entry]));
    recorded = true;
    ctx.crash('setup:after-attachment-intent');
    const added = await ctx.networking.setup(entry.spec, rec.netnsPath, {
      ...callOf(signal),
      ownNamespace: rec.netnsCreated,
    });
    entry = { ...entry, ...added };
    ctx.crash('setup:after-attachment-add');
    const next = withExtra(ctx, rec, [...extra, { ...entry, phase: 'ready' }]);
    await ctx.store.put(next);
    logInfo(ctx, 'network attached', {
      allocId,
      ifName: entry.spec.ifName,
      address: added.status.address,
    });
    return { record: next, alreadyAttached: false };
  } catch (error) {
    const problems: string[] = [];
    try {
      // Nothing ran before the intent was recorded (a full data dir refused it).
      if (recorded) {
        await tearDownSecondary(ctx, allocId, entry);
        await ctx.store.put(withExtra(ctx, rec, extra));
      }
    } catch (undoError) {
      // The entry stays `setting-up`: the next operation on the allocation, or restore, undoes it.
      problems.push(messageOf(undoError));
    }
    if (problems.length === 0) ctx.ports.drop(allocId, portsOf(ctx, entry));
    throw attachFailure(what, error, allocId, signal, 'setup-failed', problems);
  }
}

/**
 * Removes a secondary from a ready allocation: its intent (`tearing-down`) synced, its teardown
 * scoped to it, then the record without it and its host ports released. The primary cannot be
 * detached (`conflict`); an interface the allocation does not have is `not-found`. A failure
 * leaves the entry `tearing-down` (the next detach, operation or restore finishes it).
 */
export async function detach(
  ctx: RunnerContext,
  allocId: string,
  ifName: string,
  live: AllocRecord | undefined,
  signal: AbortSignal | undefined,
): Promise<DetachResult> {
  const rec = liveRecord(live, allocId);
  const views = attachmentsOf(rec);
  if (views[0]?.ifName === ifName)
    throw new RunnerError(
      `interface "${ifName}" is allocation "${allocId}"'s primary attachment; it goes with the allocation's teardown`,
      { code: 'conflict', allocId },
    );
  const extra = rec.extra ?? [];
  const at = extra.findIndex((e) => e.spec.ifName === ifName);
  const entry = extra[at];
  if (entry === undefined)
    throw new RunnerError(`allocation "${allocId}" has no interface "${ifName}"`, {
      code: 'not-found',
      allocId,
    });
  const leaving: ExtraAttachment = { ...entry, phase: 'tearing-down' };
  if (entry.phase !== 'tearing-down')
    await ctx.store.put(
      withExtra(
        ctx,
        rec,
        extra.map((e, i) => (i === at ? leaving : e)),
      ),
    );
  const what = `detach of interface "${ifName}" from allocation "${allocId}"`;
  let report: TeardownReport;
  try {
    report = await tearDownSecondary(ctx, allocId, leaving, callOf(signal));
  } catch (error) {
    throw attachFailure(what, error, allocId, signal, 'teardown-failed');
  }
  const next = withExtra(
    ctx,
    rec,
    extra.filter((_, i) => i !== at),
  );
  await ctx.store.put(next);
  ctx.ports.drop(allocId, portsOf(ctx, entry));
  logInfo(ctx, 'network detached', { allocId, ifName });
  return { record: next, report };
}
