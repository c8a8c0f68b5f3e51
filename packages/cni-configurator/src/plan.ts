// What a sweep removes, and what is done with it between the making (`plan`, planner.ts) and the
// applying (`apply`, sweep.ts): split by owner, joined, restricted to some owners, described as a
// report. Pure: no I/O.
import type { Sliceable } from '@allocnet/base';
import { formatArgs } from '@allocnet/iptables-node';
import type { Family, Rule, RuleHandles } from '@allocnet/iptables-node';
import type { FoundChain, FoundReservation, FoundRule, HostState } from './types.js';

/**
 * A cache file of the CNI runtime: a result, an ADD-in-progress marker, or the temporary of a
 * write whose writer is gone (`CniCache.staleTemporaries`), which belongs to no one (an orphan).
 */
export type CacheFile =
  | {
      readonly kind: 'result' | 'adding';
      readonly network: string;
      readonly allocId: string;
      readonly ifName: string;
      readonly path: string;
    }
  | {
      readonly kind: 'temporary';
      readonly network?: undefined;
      readonly allocId?: undefined;
      readonly path: string;
    };

/** A rule to delete, and the allocation it belongs to (undefined: no one's, an orphan). */
export interface PlannedRule {
  readonly family: Family;
  readonly rule: Rule;
  readonly owner: string | undefined;
  /** Its place in its chain in the scan's save, when the save gave places (`SavedTable.places`). */
  readonly place?: { readonly position: number; readonly chainSize: number };
}

/**
 * Per family, where removals by rule handle out of one scan stand (`Iptables.removeAt`): the
 * generation its save was read at, moved on by the removals made since, and the chains' handles
 * read so far; a family is dropped once anything else changed its ruleset. One object per scan,
 * shared (and updated) by every plan made from it.
 */
export type Generations = Map<Family, RuleHandles>;

/** A chain to flush and delete, and its allocation. */
export interface PlannedChain {
  readonly family: Family;
  readonly table: Rule['table'];
  readonly chain: string;
  readonly owner: string | undefined;
}

/** What to remove: rules outside the doomed chains, the chains, files. */
export interface Plan {
  readonly rules: readonly PlannedRule[];
  readonly chains: readonly PlannedChain[];
  readonly reservations: readonly FoundReservation[];
  readonly cache: readonly CacheFile[];
  /** The scan's generations, when its save gave them: rules can then go by place (nft). */
  readonly generations?: Generations;
}

export const EMPTY_PLAN: Plan = { rules: [], chains: [], reservations: [], cache: [] };

export const EMPTY_STATE: HostState = { rules: [], chains: [], reservations: [], cacheFiles: [] };

/** How much a plan or a report holds, by kind (for logs). */
export function counts(state: Plan | HostState) {
  return {
    rules: state.rules.length,
    chains: state.chains.length,
    reservations: state.reservations.length,
    cacheFiles: ('cache' in state ? state.cache : state.cacheFiles).length,
  };
}

/** True when a plan (or a report) holds nothing. */
export function isEmpty(state: Plan | HostState): boolean {
  return Object.values(counts(state)).every((n) => n === 0);
}

/** Rules between two pause points of a plan (a few hundred microseconds of work). */
export const RULES_PER_STEP = 512;

/** True at every `RULES_PER_STEP`th index: where a loop over rules yields. */
export const stepAt = (i: number): boolean => i % RULES_PER_STEP === RULES_PER_STEP - 1;

/**
 * A plan split by owner (undefined: the orphans), in one pass, yielding every `RULES_PER_STEP`
 * entries (`runSliced` of @allocnet/base): a reap's plan of 5,000 leaked allocations holds some
 * 65,000 rules, tens of milliseconds to split.
 */
export function* groupPlanSteps(plan: Plan): Sliceable<Map<string | undefined, Plan>> {
  const groups = new Map<
    string | undefined,
    {
      rules: PlannedRule[];
      chains: PlannedChain[];
      reservations: FoundReservation[];
      cache: CacheFile[];
    }
  >();
  const group = (owner: string | undefined) => {
    let g = groups.get(owner);
    if (g === undefined) {
      g = { rules: [], chains: [], reservations: [], cache: [] };
      groups.set(owner, g);
    }
    return g;
  };
  let n = 0;
  for (const r of plan.rules) {
    group(r.owner).rules.push(r);
    if (stepAt(n++)) yield;
  }
  for (const c of plan.chains) {
    group(c.owner).chains.push(c);
    if (stepAt(n++)) yield;
  }
  for (const r of plan.reservations) group(r.allocId).reservations.push(r);
  for (const c of plan.cache) group(c.allocId).cache.push(c);
  yield;
  if (plan.generations === undefined) return groups;
  const generations = plan.generations;
  return new Map([...groups].map(([owner, g]) => [owner, { ...g, generations }]));
}

/** Several plans as one. */
export function joinPlans(plans: readonly Plan[]): Plan {
  const joined = {
    rules: plans.flatMap((p) => p.rules),
    chains: plans.flatMap((p) => p.chains),
    reservations: plans.flatMap((p) => p.reservations),
    cache: plans.flatMap((p) => p.cache),
  };
  // Places are only good together when every plan comes from the one scan.
  const generations = new Set(plans.map((p) => p.generations));
  const [only] = generations;
  return generations.size === 1 && only !== undefined ? { ...joined, generations: only } : joined;
}

/** Two reports as one: what two sweeps removed. */
export function joinStates(a: HostState, b: HostState): HostState {
  return {
    rules: [...a.rules, ...b.rules],
    chains: [...a.chains, ...b.chains],
    reservations: [...a.reservations, ...b.reservations],
    cacheFiles: [...a.cacheFiles, ...b.cacheFiles],
  };
}

/** The part of a plan that belongs to `owners` (undefined in the set: the orphans). */
export function planOwnedBy(plan: Plan, owners: ReadonlySet<string | undefined>): Plan {
  return {
    rules: plan.rules.filter((r) => owners.has(r.owner)),
    chains: plan.chains.filter((c) => owners.has(c.owner)),
    reservations: plan.reservations.filter((r) => owners.has(r.allocId)),
    cache: plan.cache.filter((c) => owners.has(c.allocId)),
  };
}

/**
 * The plan as a report. Each rule's line is written when first read (an own, enumerable getter:
 * JSON and the agent's answer have it): a reap's report of thousands of rules is mostly counted,
 * and writing every line took some 20 ms of a cold `leaks --reap --local` of 1,000 leaks.
 */
export function describePlan(plan: Plan): HostState {
  return {
    rules: plan.rules.map(({ family, rule }): FoundRule => ({
      family,
      table: rule.table,
      chain: rule.chain,
      get line() {
        return `-A ${rule.chain} ${formatArgs(rule.spec)}`;
      },
    })),
    chains: plan.chains.map((c): FoundChain => ({
      family: c.family,
      table: c.table,
      chain: c.chain,
    })),
    reservations: plan.reservations,
    cacheFiles: plan.cache.map((c) => c.path),
  };
}
