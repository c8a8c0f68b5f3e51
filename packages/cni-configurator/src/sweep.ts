// The sweep: find what is tagged with allocations on this host (marks.ts says what the plugins
// leave and how it is recognised) and remove it in one atomic transaction per family. Three
// steps, and one loop over them:
// - `scan` reads iptables (both families at once), the reservation files asked for and the CNI
//   cache; asked to (`atGeneration`: a leak reap), also the nf_tables generation of each save;
// - `plan` (pure, planner.ts) decides, from one scan and a selection, what goes and whose it is;
// - `apply` removes a plan: per family one transaction, then the files. With a generation, by
//   rule handle (`Iptables.removeAt`: far cheaper than iptables-restore for thousands of rules,
//   docs/iptables.md, and refused by the kernel if anything changed since the save); without
//   one, or when it was refused, one iptables-restore that deletes the rules by their spec;
// - `sweep` applies, and when a family's restore failed because iptables changed under it, plans
//   again from a fresh scan, up to 3 times.
//
// Concurrency: a sweep takes no lock. Other allocations' plugins (and other sweeps) change
// iptables while it runs; a restore that deletes a rule someone else just removed, or a chain
// someone just jumped to, fails (nothing of that table is applied; a table before it in the
// batch may have been) and `sweep` looks again.
// Files need no lock: see `removeReservation` (ipam.ts) and the runner's one-operation-per-
// allocation rule. Only teardown.ts and leaks.ts use this module.
import { join } from 'node:path';
import type { CniCache, Logger } from '@allocnet/cni';
import { runSliced } from '@allocnet/base';
import type { Sliceable } from '@allocnet/base';
import { createBatch, isIptablesError } from '@allocnet/iptables-node';
import type {
  CallOptions,
  ChainRef,
  Family,
  PlacedRemoval,
  ReadAt,
  SavedTable,
} from '@allocnet/iptables-node';
import { messageOf } from './errors.js';
import type { NetworkFacts } from './facts.js';
import { listReservations, readReservation, removeReservation } from './ipam.js';
import { isAllocChain, parseTag, sourceOf, tagOf } from './marks.js';
import type { LeaveOut, Tag } from './marks.js';
import { describePlan, isEmpty, joinPlans, stepAt } from './plan.js';
import type { CacheFile, Generations, Plan, PlannedChain, PlannedRule } from './plan.js';
import type { Scan } from './planner.js';
import type { FoundReservation, HostState, IptablesState } from './types.js';

export interface SweepDeps {
  readonly iptables: Readonly<Record<Family, IptablesState>>;
  readonly cache: CniCache;
  readonly logger: Logger;
}

export interface ScanOptions extends CallOptions {
  /** Networks whose IPAM directories are read whole. */
  readonly fullIpam: readonly NetworkFacts[];
  /** Only these reservation files are read (a teardown knows its addresses). */
  readonly addressesIn?: readonly { readonly facts: NetworkFacts; readonly address: string }[];
  readonly withCache: boolean;
  /** Holds (holds.ts) are not read: a teardown before a reclaim leaves them. */
  readonly keepHolds?: boolean;
  /** With `withCache`, also the temporaries of writes whose writer is gone (leak reaping). */
  readonly withTemporaries?: boolean;
  /** Parse only the iptables-save lines this keeps (`linesAbout`, `linesNotAbout`); default all. */
  readonly lines?: (line: string) => boolean;
  /**
   * Read each family's nf_tables generation with its rules, so that `apply` can remove rules by
   * handle in one kernel transaction instead of an iptables-restore: over netlink
   * (`Iptables.readAt`, `readShared`) when it can, else with iptables-save (`Iptables.saveAt`).
   */
  readonly atGeneration?: boolean;
  /** With `atGeneration`, what a read over netlink leaves out (as `lines` does for a save). */
  readonly leaveOut?: LeaveOut;
  /** Where a long read over netlink gives the event loop a turn (`createPause`); default none. */
  readonly pause?: () => Promise<void> | undefined;
}

/**
 * The chains every allocation's jumps and accepts share, the large ones of a full node: a removal
 * by handle from them needs their handles, read while iptables-save runs (`saveAt`).
 */
const SHARED_CHAINS = [
  { table: 'nat', chain: 'POSTROUTING' },
  { table: 'nat', chain: 'CNI-HOSTPORT-DNAT' },
  { table: 'filter', chain: 'CNI-FORWARD' },
] as const;

/** Per table, the key of each masquerade jump's tag (bridge's, tagged, with its `-s`). */
const tagKey = (tag: Tag) => `${tag.network}\0${tag.allocId}`;

/**
 * The per-allocation chains a read that skipped their rules must read after all, for the plan to
 * be the one a save gives (planner.ts): those no tagged rule jumps to (their owner, or that they
 * have none, is in their own rules) and portmap's DNAT chains whose allocation has no masquerade
 * jump in the same table (the plan notes the firewall's address from the DNAT's destination; with
 * the jump, from the jump's `-s`, the same address). Known allocations' chains never.
 */
function* chainsToRead(
  tables: readonly SavedTable[],
  knownChains: ReadonlySet<string>,
): Sliceable<ChainRef[]> {
  const out: ChainRef[] = [];
  let n = 0;
  for (const t of tables) {
    const jumpedBy = new Map<string, Tag[]>();
    const masqueraded = new Set<string>();
    for (const r of t.rules) {
      if (stepAt(n++)) yield;
      const tag = tagOf(r);
      if (tag === undefined) continue;
      const target = r.target?.name;
      if (target !== undefined && isAllocChain(target)) {
        const tags = jumpedBy.get(target);
        if (tags === undefined) jumpedBy.set(target, [tag]);
        else tags.push(tag);
      }
      if (r.chain === 'POSTROUTING' && sourceOf(r) !== undefined) masqueraded.add(tagKey(tag));
    }
    for (const { name } of t.chains) {
      if (stepAt(n++)) yield;
      if (!isAllocChain(name) || knownChains.has(name)) continue;
      const tags = jumpedBy.get(name);
      const unpaired =
        name.startsWith('CNI-DN-') && !(tags ?? []).some((tag) => masqueraded.has(tagKey(tag)));
      if (tags === undefined || unpaired) out.push({ table: t.name, chain: name });
    }
  }
  return out;
}

/**
 * One family's ruleset over netlink for a leak reap: the rules of every chain but the
 * per-allocation ones (the bulk of a full node, whose rules the plan needs only in the cases
 * `chainsToRead` names), each read back as iptables-save prints it. Undefined when it cannot be
 * had, or when a rule it could not read back may matter to the plan (tagged, jumping to a
 * per-allocation chain, or inside one): the caller then reads with iptables-save.
 */
async function readShared(
  deps: SweepDeps,
  ipt: IptablesState,
  options: Pick<ScanOptions, 'leaveOut' | 'pause'>,
  call: CallOptions,
): Promise<ReadAt | undefined> {
  const { leaveOut, pause } = options;
  const knownChains = leaveOut?.chains ?? new Set<string>();
  let read: ReadAt | undefined;
  try {
    read = await ipt.readAt?.(
      {
        skip: (_table, chain) => isAllocChain(chain),
        ...(leaveOut === undefined
          ? {}
          : { keep: (chain, comment, target) => !leaveOut.rule(chain, comment, target) }),
        // In slices, as the plan: thousands of rules (issue 28).
        more: (tables) => runSliced(chainsToRead(tables, knownChains), pause),
      },
      call,
    );
  } catch (error) {
    // A request that failed (a table deleted between two dumps): iptables-save reads it all.
    deps.logger.debug('sweep: the read over netlink failed; using iptables-save', {
      family: ipt.family,
      error: messageOf(error),
    });
    return undefined;
  }
  if (read === undefined) return undefined;
  const unread = read.opaque.find(
    (o) =>
      isAllocChain(o.chain) ||
      parseTag(o.comment) !== undefined ||
      (o.target !== undefined && isAllocChain(o.target)),
  );
  if (unread === undefined) return read;
  deps.logger.debug('sweep: a rule read over netlink could not be read back; using iptables-save', {
    family: ipt.family,
    table: unread.table,
    chain: unread.chain,
    place: unread.position + 1,
  });
  return undefined;
}

/** Reads iptables (both families at once), the reservations asked for and the CNI cache. */
export async function scan(deps: SweepDeps, options: ScanOptions): Promise<Scan> {
  const call = options.signal === undefined ? {} : { signal: options.signal };
  const save = { ...call, ...(options.lines === undefined ? {} : { lines: options.lines }) };
  const generations: Generations = new Map();
  const read = async (family: Family) => {
    const ipt = deps.iptables[family];
    if (options.atGeneration !== true || ipt.saveAt === undefined) return ipt.save(save);
    const shared = await readShared(deps, ipt, options, call);
    if (shared !== undefined) {
      generations.set(family, { generation: shared.generation, lists: shared.lists });
      return shared.tables;
    }
    const { tables, generation, lists } = await ipt.saveAt({ ...save, handlesOf: SHARED_CHAINS });
    if (generation !== undefined) generations.set(family, { generation, lists });
    return tables;
  };
  const [v4, v6, full, some, cache] = await Promise.all([
    read('ipv4'),
    read('ipv6'),
    Promise.all(
      options.fullIpam.flatMap((f) =>
        f.ipamDir === undefined ? [] : [listReservations(f.name, f.ipamDir)],
      ),
    ),
    Promise.all(
      (options.addressesIn ?? []).flatMap(({ facts, address }) =>
        facts.ipamDir === undefined ? [] : [readReservation(facts.name, facts.ipamDir, address)],
      ),
    ),
    options.withCache
      ? listCache(deps.cache, options.withTemporaries === true)
      : Promise.resolve([]),
  ]);
  const reservations = new Map<string, FoundReservation>();
  for (const r of [...full.flat(), ...some])
    if (r !== undefined && !(options.keepHolds === true && r.hold)) reservations.set(r.path, r);
  return {
    tables: new Map<Family, readonly SavedTable[]>([
      ['ipv4', v4],
      ['ipv6', v6],
    ]),
    reservations: [...reservations.values()],
    cache,
    ...(options.atGeneration === true ? { generations } : {}),
  };
}

async function listCache(cache: CniCache, withTemporaries: boolean): Promise<CacheFile[]> {
  const [results, adding, temporaries] = await Promise.all([
    cache.listResults(),
    cache.listAdding(),
    withTemporaries ? cache.staleTemporaries() : [],
  ]);
  const file = (kind: 'result' | 'adding', dir: string) => (e: (typeof results)[number]) => ({
    kind,
    network: e.networkName,
    allocId: e.containerId,
    ifName: e.ifName,
    path: join(cache.dir, dir, `${e.networkName}-${e.containerId}-${e.ifName}`),
  });
  return [
    ...results.map(file('result', 'results')),
    ...adding.map(file('adding', join('allocnet', 'adding'))),
    ...temporaries.map((path): CacheFile => ({ kind: 'temporary', path })),
  ];
}

/** The rules by their place in the scan's save, and the chains; undefined if a rule has none. */
export function placedRemoval(
  rules: readonly PlannedRule[],
  chains: readonly PlannedChain[],
): PlacedRemoval | undefined {
  const placed = [];
  for (const r of rules) {
    if (r.place === undefined) return undefined;
    placed.push({ rule: r.rule, ...r.place });
  }
  return { rules: placed, chains };
}

/**
 * Removes one family's part of a plan by rule handle in one nf_tables transaction
 * (`Iptables.removeAt`), when the plan's scan read that family's generation and gave every rule
 * its place. Resolves true when that removed it; false when the caller is to use
 * iptables-restore: nothing was removed (the ruleset changed since the scan, or the kernel
 * refused), and the plans from this scan no longer try (the family leaves `generations`).
 */
async function removeByHandle(
  deps: SweepDeps,
  planned: Plan,
  family: Family,
  rules: readonly PlannedRule[],
  chains: readonly PlannedChain[],
): Promise<boolean> {
  const generations = planned.generations;
  const at = generations?.get(family);
  const ipt = deps.iptables[family];
  if (generations === undefined || at === undefined || ipt.removeAt === undefined) return false;
  const removal = placedRemoval(rules, chains);
  if (removal === undefined) {
    generations.delete(family);
    return false;
  }
  try {
    const next = await ipt.removeAt(at, removal);
    if (next === undefined) generations.delete(family);
    else {
      generations.set(family, next);
      // The generation is the namespace's, both families' (docs/iptables.md): the other family's
      // handles, read at the one this commit moved on from, are still its own at the next one
      // (the commit touched this family's tables only, and no one else's came between).
      for (const [other, handles] of generations)
        if (other !== family && handles.generation === at.generation)
          generations.set(other, { ...handles, generation: next.generation });
    }
    return true;
  } catch (error) {
    generations.delete(family);
    deps.logger.debug('sweep: removal by handle not taken; using iptables-restore', {
      family,
      error: messageOf(error),
    });
    return false;
  }
}

/**
 * Applies a plan: per family, the rules, then the chains flushed and deleted, all or nothing, by
 * handle in one nf_tables transaction when the plan allows it (`removeByHandle`: one family
 * after the other), else in one iptables-restore (both at once); then the reservation and cache
 * files. Resolves the families whose removal failed (their state is untouched).
 */
export async function apply(
  deps: SweepDeps,
  planned: Plan,
  call: CallOptions,
): Promise<{ readonly failed: ReadonlyMap<Family, Error> }> {
  const failed = new Map<Family, Error>();
  // By handle one family after the other: each commit is checked against the namespace's
  // generation, which the first one moves on for the second (`removeByHandle`). Then the rest
  // by iptables-restore, both at once.
  const left: { family: Family; rules: PlannedRule[]; chains: PlannedChain[] }[] = [];
  for (const family of ['ipv4', 'ipv6'] as const) {
    const rules = planned.rules.filter((r) => r.family === family);
    const chains = planned.chains.filter((c) => c.family === family);
    if (rules.length + chains.length === 0) continue;
    if (!(await removeByHandle(deps, planned, family, rules, chains)))
      left.push({ family, rules, chains });
  }
  await Promise.all(
    left.map(async ({ family, rules, chains }) => {
      const batch = createBatch();
      for (const r of rules) batch.deleteRule(r.rule);
      for (const c of chains) batch.clearChain(c.table, c.chain);
      for (const c of chains) batch.deleteChain(c.table, c.chain);
      if (batch.size === 0) return;
      try {
        // Each table all or nothing, not the batch: a sweep that failed plans again from a
        // fresh scan, so a table that committed before a later one failed is simply done. That
        // spares the two iptables-save runs a rollback snapshot of nat and filter costs.
        await deps.iptables[family].restore(batch, { ...call, perTable: true });
      } catch (error) {
        if (isIptablesError(error) && error.code === 'aborted') throw error;
        failed.set(family, error instanceof Error ? error : new Error(messageOf(error)));
      }
    }),
  );
  // A reservation goes only with its rules: an address back in the pool while its masquerade
  // rules stay would hand them to the next allocation that gets it.
  if (failed.size > 0) return { failed };
  await Promise.all(planned.reservations.map((r) => removeReservation(r)));
  await Promise.all(
    planned.cache.map((c) =>
      c.kind === 'temporary'
        ? deps.cache.removeTemporary(c.path)
        : c.kind === 'result'
          ? deps.cache.removeResult(c.network, c.allocId, c.ifName)
          : deps.cache.clearAdding(c.network, c.allocId, c.ifName),
    ),
  );
  return { failed };
}

/** What one sweep did. */
export interface SweepOutcome {
  /** What was removed over every attempt; with `dryRun`, what would be. */
  readonly removed: HostState;
  /** The last attempt's plan: all of it went, unless `error` says otherwise. */
  readonly last: Plan;
  /** Why state stayed behind after the last attempt (a family's restore); else undefined. */
  readonly error: Error | undefined;
}

/**
 * Plans and applies; when a family's restore fails (its rules changed between the scan and the
 * restore: another allocation's plugin was at work), plans again and applies that, up to
 * `attempts` (3) times. `planAttempt(n)` gives attempt n's plan: from a fresh scan from the
 * second attempt on (the first may use one made before). State left after the last attempt is
 * reported in `error`, not thrown: a teardown fails on it, a reap lists the batch as failed.
 */
export async function sweep(
  deps: SweepDeps,
  planAttempt: (attempt: number) => Promise<Plan>,
  options: CallOptions & { readonly dryRun?: boolean; readonly attempts?: number },
): Promise<SweepOutcome> {
  const attempts = options.attempts ?? 3;
  // What each attempt removed: all of its plan but the families whose restore failed.
  const applied: Plan[] = [];
  // Described only when asked for: a reap reads `last`, and describing thousands of rules again
  // is a formatting pass it does not need.
  const outcome = (last: Plan, error: Error | undefined): SweepOutcome => {
    let removed: HostState | undefined;
    return {
      get removed() {
        return (removed ??= describePlan(joinPlans(applied)));
      },
      last,
      error,
    };
  };
  const call = options.signal === undefined ? {} : { signal: options.signal };
  for (let attempt = 1; ; attempt++) {
    const planned = await planAttempt(attempt);
    if (isEmpty(planned)) return outcome(planned, undefined);
    if (options.dryRun === true)
      return { removed: describePlan(planned), last: planned, error: undefined };
    const { failed } = await apply(deps, planned, call);
    applied.push({
      ...planned,
      rules: planned.rules.filter((r) => !failed.has(r.family)),
      chains: planned.chains.filter((c) => !failed.has(c.family)),
    });
    const error = [...failed.values()][0];
    if (error === undefined || attempt >= attempts) return outcome(planned, error);
    deps.logger.warn('sweep: iptables changed under the batch; scanning again', {
      attempt,
      error: messageOf(error),
    });
  }
}
