// Leaks: state on the host tagged with an allocation id outside `known` (the caller's live
// allocations) in a managed network, per allocation, and orphans, state that belongs to no one.
// `findLeaks` reports them; `reapLeaks` removes them in batches, one kernel transaction per family
// per batch: by rule handle when the ruleset is still as the scan read it (sweep.ts), else one
// iptables-restore.
//
// Concurrency: a leak search reads the whole host once (both families' rulesets, over netlink or
// else by iptables-save: sweep.ts; every managed IPAM directory, the CNI cache) while setups,
// CHECKs and teardowns go on. Those of known allocations are left out as they are read
// (`leaveOutAbout`, `linesNotAbout`) and never selected. Those of any other
// allocation are kept clear by the caller's `ReapFence` (types.ts; the runner's reap guard): an
// allocation with an operation begun before the plan is `spared` (counted as known when planning,
// its chains never orphans); the planned ids are `take`n, so that an operation on one of them
// waits for its own batch only; and the orphans, which no id can be read from (a firewall accept
// read before its reservation, or a portmap chain before its jump, may be an operation's
// half-made state), are removed only when no operation ran during the reap, holding operations
// while they go. Batches are applied one after another; a change by anyone else since the scan
// turns the removal by handle into iptables-restore (which deletes rules by their spec, whatever
// moved around them), and when a batch's restore fails because iptables changed under it, `sweep`
// plans that batch again from a fresh scan, sparing what has been spared by then.
//
// A reap of thousands of leaks is long CPU work (the plan, then per batch the report) in the
// agent's one thread: it runs in slices (`runSliced`, `createPause` of @allocnet/base) that give
// the event loop a turn every few milliseconds, so that the agent answers its other calls
// meanwhile (issue 28). The read is sliced where it is read (each part of a netlink dump, or
// iptables-node's save stream), the kernel's part runs on a worker thread (iptables-node's
// netlink.ts).
import { createPause, logInfo, runSliced } from '@allocnet/base';
import type { Sliceable } from '@allocnet/base';
import { createSaveStream } from '@allocnet/iptables-node';
import type { CallOptions } from '@allocnet/iptables-node';
import { callOf } from './context.js';
import type { ConfiguratorContext } from './context.js';
import { invalidField, messageOf } from './errors.js';
import type { NetworkFacts } from './facts.js';
import { leaveOutAbout, linesNotAbout, tagOf } from './marks.js';
import {
  EMPTY_PLAN,
  EMPTY_STATE,
  describePlan,
  groupPlanSteps,
  joinPlans,
  stepAt,
} from './plan.js';
import type { Plan } from './plan.js';
import { planSteps, tagsIn } from './planner.js';
import type { Scan } from './planner.js';
import { placedRemoval, scan, sweep } from './sweep.js';
import type {
  CniConfigurator,
  HostState,
  Leak,
  LeakReport,
  LeakSweeper,
  ReapFence,
  ReapProgress,
} from './types.js';
import { syntheticLeakSave, warmAllocId } from './warm.js';

/** Ids outside `known` that something in a managed network is tagged or filed under. */
function* leakedIds(
  found: Scan,
  names: ReadonlySet<string>,
  known: ReadonlySet<string>,
): Sliceable<Set<string>> {
  const ids = new Set<string>();
  const consider = (id: string, network: string) => {
    if (!known.has(id) && names.has(network) && id !== '') ids.add(id);
  };
  let n = 0;
  for (const tag of tagsIn(found)) {
    consider(tag.allocId, tag.network);
    if (stepAt(n++)) yield;
  }
  for (const r of found.reservations) consider(r.allocId, r.network);
  for (const c of found.cache) if (c.kind !== 'temporary') consider(c.allocId, c.network);
  return ids;
}

/**
 * `ids` in the order their rules sit in the shared chains, each by the first of its rules' places
 * (as a share of its chain's length, so that chains of different lengths compare); ids with no
 * placed rule last, in their order. Batches taken in this order delete from the head of each
 * chain: the kernel finds a rule to delete by walking its chain from the head (nf_tables' lookup
 * by handle), so a batch of ids in any other order (allocation ids are random) walks the whole
 * chain for each rule (docs/iptables.md, "Removal by rule handle": "So a batch must hold the rules
 * nearest the head").
 */
export function inChainOrder(
  ids: readonly string[],
  groups: ReadonlyMap<string | undefined, Plan>,
): string[] {
  const first = new Map<string, number>();
  for (const id of ids) {
    let at = Number.POSITIVE_INFINITY;
    for (const r of groups.get(id)?.rules ?? [])
      if (r.place !== undefined) at = Math.min(at, r.place.position / r.place.chainSize);
    first.set(id, at);
  }
  // A stable sort: ties (and the unplaced) keep the order given.
  return [...ids].sort((a, b) => (first.get(a) as number) - (first.get(b) as number));
}

/** Leaked allocations per batch of a reap, unless the caller says. */
const REAP_BATCH = 500;

/** No operation runs beside the reap: nothing is spared, nothing waits. */
const OPEN_FENCE: ReapFence = {
  spared: new Set(),
  take: (allocIds) => allocIds,
  done: () => undefined,
  takeOrphans: () => () => undefined,
};

/** One allocation's part of a plan as a leak: the networks it names, and the state. */
function leakOf(allocId: string, part: Plan = EMPTY_PLAN): Leak {
  const networks = new Set<string>();
  for (const r of part.rules) {
    const network = tagOf(r.rule)?.network;
    if (network !== undefined) networks.add(network);
  }
  for (const r of part.reservations) networks.add(r.network);
  for (const c of part.cache) if (c.network !== undefined) networks.add(c.network);
  return { allocId, networks: [...networks].sort(), state: describePlan(part) };
}

/** Removes the taken ids batch by batch, letting the fence know as each batch is done. */
async function inBatches(
  ids: readonly string[],
  batchSize: number,
  fence: ReapFence,
  remove: (batch: readonly string[]) => Promise<void>,
  onProgress: ((progress: ReapProgress) => void) | undefined,
  pause: () => Promise<void> | undefined,
): Promise<void> {
  let next = 0;
  try {
    while (next < ids.length) {
      const batch = ids.slice(next, next + batchSize);
      try {
        await remove(batch);
      } finally {
        next += batch.length;
        fence.done(batch);
      }
      onProgress?.({ done: next, total: ids.length, allocId: batch.at(-1) });
      await pause();
    }
  } finally {
    // An abort or a throw in a batch: the ones after it never started, and are let go.
    if (next < ids.length) fence.done(ids.slice(next));
  }
}

/** Removes the planned orphans if the fence gives them their turn, else leaves them (logged). */
async function orphansTurn(
  ctx: ConfiguratorContext,
  fence: ReapFence,
  planned: Plan | undefined,
  remove: () => Promise<void>,
): Promise<void> {
  if (planned === undefined) return;
  const release = fence.takeOrphans();
  if (release === undefined) {
    logInfo(ctx.logger, 'reap: orphans left for the next pass (an operation ran beside it)', {
      rules: planned.rules.length,
      chains: planned.chains.length,
    });
    return;
  }
  try {
    await remove();
  } finally {
    release();
  }
}

/**
 * A scan's leaks: everything tagged with an id outside `alive` in a managed network, planned for
 * removal and split by owner (the orphans under `undefined`).
 */
async function planScan(
  found: Scan,
  managed: readonly NetworkFacts[],
  alive: ReadonlySet<string>,
  pause: () => Promise<void> | undefined,
) {
  // Networks the CNI cache names that are no longer configured are still ours to clean.
  const names = new Set([
    ...managed.map((f) => f.name),
    ...found.cache.flatMap((c) => (c.network === undefined ? [] : [c.network])),
  ]);
  const ids = await runSliced(leakedIds(found, names, alive), pause);
  const planned = await runSliced(
    planSteps(found, {
      allocIds: ids,
      networks: [...names],
      addresses: [],
      orphansOf: managed,
      known: alive,
    }),
    pause,
  );
  const groups = await runSliced(groupPlanSteps(planned), pause);
  return { ids: [...ids].sort(), groups };
}

/** The leak report of a plan: each leaked id's part, and the orphans. */
async function reportOf(
  planned: Awaited<ReturnType<typeof planScan>>,
  pause: () => Promise<void> | undefined,
): Promise<LeakReport> {
  const orphans = planned.groups.get(undefined);
  const leaks: Leak[] = [];
  for (const id of planned.ids) {
    await pause();
    leaks.push(leakOf(id, planned.groups.get(id)));
  }
  return { leaks, orphans: orphans === undefined ? EMPTY_STATE : describePlan(orphans) };
}

/**
 * The reap's parse, plan and report over `allocations` made-up leaks of the first managed network
 * with an IPv4 subnet (warm.ts), in slices; nothing is read or changed. Resolves their report
 * (none when no network has an IPv4 subnet).
 */
async function warmReap(ctx: ConfiguratorContext, allocations: number): Promise<LeakReport> {
  const pause = createPause();
  const managed = ctx.managedFacts(await ctx.catalog.current());
  let text: string | undefined;
  for (const facts of managed) text ??= syntheticLeakSave(facts, allocations);
  if (text === undefined) return { leaks: [], orphans: EMPTY_STATE };
  // As a reap beside live allocations reads: their lines left out as they come.
  const names = managed.map((f) => f.name);
  const stream = createSaveStream(linesNotAbout(new Set([warmAllocId(allocations)]), names), pause);
  stream.write(Buffer.from(text));
  const found: Scan = {
    tables: new Map([
      ['ipv4', await stream.end()],
      ['ipv6', []],
    ]),
    reservations: [],
    cache: [],
    // As a save read at its generation: the plan gives every rule its place (planner.ts).
    generations: new Map([['ipv4', { generation: 0, lists: new Map() }]]),
  };
  const planned = await planScan(found, managed, new Set(), pause);
  // The removal's part, batch by batch as `reapLeaks` goes: the transaction built, never sent.
  const warmRemoval = ctx.iptables.ipv4.warmRemoval;
  const ids = inChainOrder(planned.ids, planned.groups);
  for (let at = 0; at < ids.length; at += REAP_BATCH) {
    const part = joinPlans(
      ids.slice(at, at + REAP_BATCH).flatMap((id) => planned.groups.get(id) ?? []),
    );
    const removal = placedRemoval(part.rules, part.chains);
    if (removal !== undefined) await warmRemoval?.(removal);
    for (const [owner, p] of await runSliced(groupPlanSteps(part), pause)) {
      await pause();
      if (owner !== undefined) leakOf(owner, p);
    }
  }
  return reportOf(planned, pause);
}

export function createLeaks(
  ctx: ConfiguratorContext,
): Pick<LeakSweeper, 'findLeaks' | 'reapLeaks'> & Pick<CniConfigurator, 'warmReap'> {
  /**
   * Everything tagged with an id outside `known` and `spared` (read once the scan is done),
   * planned for removal and split by owner.
   */
  async function planLeaks(
    known: ReadonlySet<string>,
    call: CallOptions,
    pause: () => Promise<void> | undefined,
    spared: ReadonlySet<string> = OPEN_FENCE.spared,
  ) {
    const snapshot = await ctx.catalog.current();
    const managed = ctx.managedFacts(snapshot);
    const found = await scan(ctx, {
      fullIpam: managed,
      withCache: true,
      // Temporaries of writes killed midway are orphans.
      withTemporaries: true,
      atGeneration: true,
      pause,
      // What belongs to live allocations is not parsed: a reconcile of a node with 1,000 of them
      // would otherwise build 13,000 rule objects to find none of them leaked. With none, every
      // line is parsed, and a filter would only cost its look at each.
      ...(known.size === 0
        ? {}
        : {
            lines: linesNotAbout(
              known,
              managed.map((f) => f.name),
            ),
            leaveOut: leaveOutAbout(
              known,
              managed.map((f) => f.name),
            ),
          }),
      ...call,
    });
    return planScan(
      found,
      managed,
      spared.size === 0 ? known : new Set([...known, ...spared]),
      pause,
    );
  }

  return {
    async findLeaks(known, opts): Promise<LeakReport> {
      const pause = createPause();
      return reportOf(await planLeaks(new Set(known), callOf(opts), pause), pause);
    },

    warmReap: (allocations) => warmReap(ctx, allocations),

    async reapLeaks(knownIds, opts) {
      const call = callOf(opts);
      const batchSize = opts?.batchSize ?? REAP_BATCH;
      if (!Number.isInteger(batchSize) || batchSize < 1)
        throw invalidField('batchSize', `should be a whole number of at least 1, got ${batchSize}`);
      const fence = opts?.fence ?? OPEN_FENCE;
      const known = new Set(knownIds);
      const pause = createPause();
      const found = await planLeaks(known, call, pause, fence.spared);
      const ids = inChainOrder(fence.take(found.ids), found.groups);
      let groups = found.groups;
      const reaped: Leak[] = [];
      const failed: { allocId: string; error: string }[] = [];
      let orphans: HostState = EMPTY_STATE;
      /** Removes the owners' parts of the plan (undefined: the orphans), and reports them. */
      const remove = async (owners: readonly (string | undefined)[]) => {
        let first: Plan | undefined;
        const { last, error } = await sweep(
          ctx,
          async (attempt) => {
            // After a failed restore, iptables changed since the scan (another allocation's
            // plugin was at work): look again, for what is left of this batch (and the next).
            if (attempt > 1) ({ groups } = await planLeaks(known, call, pause, fence.spared));
            await pause();
            const joined = joinPlans(owners.flatMap((owner) => groups.get(owner) ?? []));
            first ??= joined;
            return joined;
          },
          call,
        );
        // The plan applied is the one first made: its parts are the groups it was joined from.
        const parts = last === first ? groups : await runSliced(groupPlanSteps(last), pause);
        for (const owner of owners) {
          await pause();
          const part = parts.get(owner);
          if (owner === undefined) {
            if (error === undefined && part !== undefined) orphans = describePlan(part);
          } else if (error === undefined) reaped.push(leakOf(owner, part));
          else failed.push({ allocId: owner, error: messageOf(error) });
        }
      };
      await inBatches(ids, batchSize, fence, remove, opts?.onProgress, pause);
      await orphansTurn(ctx, fence, groups.get(undefined), () => remove([undefined]));
      // Reported by id, as found: the batches went in the chains' order.
      const byId = (a: { allocId: string }, b: { allocId: string }) =>
        a.allocId < b.allocId ? -1 : a.allocId > b.allocId ? 1 : 0;
      return { reaped: reaped.sort(byId), orphans, failed: failed.sort(byId) };
    },
  };
}
