// The sweep's plan (sweep.ts has the rest): from one scan of the host and a selection, which
// rules, chains, reservations and cache files go, and whose they are. Pure: no I/O; tests feed
// it scans. Per family, per table: the chains that go (owned by the selected allocations by
// name, tagged with them, jumped to by their tagged rules, or, reaping leaks, orphans no one
// owns or jumps to), the rules outside them that go (tagged, or jumping to a doomed chain), and
// the firewall's untagged rules of the addresses noted on the way.
//
// Written as a generator (`planSteps`) that yields every few hundred rules: a reap of 5,000
// leaked allocations plans over some 60,000 rules, and the agent runs it in slices
// (`runSliced`, @allocnet/base) so that its other calls are answered meanwhile; `plan` runs it
// whole. Where it may pause changes nothing of what it plans.
import { runWhole } from '@allocnet/base';
import type { Sliceable } from '@allocnet/base';
import type { Family, Rule, SavedTable } from '@allocnet/iptables-node';
import { familyOf } from './address.js';
import { inSubnets } from './facts.js';
import type { NetworkFacts } from './facts.js';
import {
  chainsOfSteps,
  dnatDestination,
  firewallAddress,
  firewallSpecs,
  isAllocChain,
  sourceOf,
  specKey,
  tagOf,
} from './marks.js';
import type { Tag } from './marks.js';
import { stepAt } from './plan.js';
import type { CacheFile, Generations, Plan, PlannedChain, PlannedRule } from './plan.js';
import type { FoundReservation } from './types.js';

/** What one look at the host found. */
export interface Scan {
  readonly tables: ReadonlyMap<Family, readonly SavedTable[]>;
  readonly reservations: readonly FoundReservation[];
  readonly cache: readonly CacheFile[];
  /** With `ScanOptions.atGeneration`: the families whose save came with its generation. */
  readonly generations?: Generations;
}

/** The tag of every tagged rule of a scan, both families, every table. */
export function* tagsIn(found: Scan): Generator<Tag> {
  for (const tables of found.tables.values())
    for (const table of tables)
      for (const rule of table.rules) {
        const tag = tagOf(rule);
        if (tag !== undefined) yield tag;
      }
}

export interface Selection {
  /** The allocations whose state goes. */
  readonly allocIds: ReadonlySet<string>;
  /** When set, only state tagged with (or kept for) this network. */
  readonly network?: string;
  /** Networks to compute chain names for, beside the ones tags name. */
  readonly networks: readonly string[];
  /** Addresses the allocation had (its firewall rules carry no tag); needs one alloc id. */
  readonly addresses: readonly string[];
  /** Also remove state that belongs to no one, in these networks' subnets (leak reaping). */
  readonly orphansOf?: readonly NetworkFacts[];
  /** Allocation ids that are alive: their chains are never orphans. */
  readonly known?: ReadonlySet<string>;
}

/** Who a removal is for: an allocation id, or undefined for state that belongs to no one. */
type Owner = string | undefined;

/** What `plan` works out once from a scan and a selection, before it reads each family. */
interface Planning {
  readonly found: Scan;
  readonly selection: Selection;
  /** State of a selected allocation (in the selected network). */
  readonly selected: (id: string | undefined, network: string | undefined) => boolean;
  readonly wanted: (tag: Tag | undefined) => tag is Tag;
  /** The selected allocations' reservations. */
  readonly reservations: readonly FoundReservation[];
  /** Addresses held by a live reservation of someone else keep one copy of their firewall rules. */
  readonly heldByOthers: ReadonlySet<string>;
  /** The one allocation selected, which owns `selection.addresses`. */
  readonly only: string | undefined;
  /** Chain names the selected allocations own, over every network they could have used. */
  readonly owned: ReadonlyMap<string, string>;
  /** Chain names of the live allocations (`selection.known`), never orphans. */
  readonly knownChains: ReadonlyMap<string, string>;
}

function* planning(found: Scan, selection: Selection): Sliceable<Planning> {
  const selected = (id: string | undefined, network: string | undefined) =>
    id !== undefined &&
    selection.allocIds.has(id) &&
    (selection.network === undefined || network === selection.network);
  const wanted = (tag: Tag | undefined): tag is Tag =>
    tag !== undefined && selected(tag.allocId, tag.network);
  const networks = new Set(
    selection.network === undefined ? selection.networks : [selection.network],
  );
  for (const table of tablesOf(found))
    for (let i = 0; i < table.rules.length; i++) {
      const tag = tagOf(table.rules[i] as Rule);
      if (wanted(tag)) networks.add(tag.network);
      if (stepAt(i)) yield;
    }
  const owned = yield* chainsOfSteps(selection.allocIds, networks);
  const knownChains = yield* chainsOfSteps(selection.known ?? [], networks);
  return {
    found,
    selection,
    selected,
    wanted,
    reservations: found.reservations.filter((r) => selected(r.allocId, r.network)),
    heldByOthers: new Set(
      found.reservations.filter((r) => !selection.allocIds.has(r.allocId)).map((r) => r.address),
    ),
    only: selection.allocIds.size === 1 ? [...selection.allocIds][0] : undefined,
    owned,
    knownChains,
  };
}

/** Every table of a scan, both families. */
function* tablesOf(found: Scan): Generator<SavedTable> {
  for (const tables of found.tables.values()) yield* tables;
}

/**
 * Where each rule of a family's save sits in its chain, when its scan read the generation
 * (removal by handle needs it); none otherwise.
 */
function* rulePlaces(
  tables: readonly SavedTable[],
  atGeneration: boolean,
): Sliceable<Map<Rule, NonNullable<PlannedRule['place']>>> {
  const placed = new Map<Rule, NonNullable<PlannedRule['place']>>();
  if (!atGeneration) return placed;
  for (const table of tables) {
    const places = table.places;
    if (places !== undefined)
      for (let i = 0; i < table.rules.length; i++) {
        if (stepAt(i)) yield;
        const rule = table.rules[i] as Rule;
        const position = places.positions[i];
        const chainSize = places.sizes.get(rule.chain);
        if (position !== undefined && chainSize !== undefined)
          placed.set(rule, { position, chainSize });
      }
  }
  return placed;
}

/** Chains of `table` no rule jumps to and no live or other allocation owns (leak reaping). */
function* orphanChains(
  p: Planning,
  table: SavedTable,
  doomed: Map<string, Owner>,
): Sliceable<void> {
  const referenced = new Set<string>();
  const othersTagged = new Set<string>();
  for (let i = 0; i < table.rules.length; i++) {
    const r = table.rules[i] as Rule;
    if (r.target !== undefined && r.chain !== r.target.name) referenced.add(r.target.name);
    const tag = tagOf(r);
    if (tag !== undefined && !p.wanted(tag)) othersTagged.add(r.chain);
    if (stepAt(i)) yield;
  }
  for (const chain of table.chains)
    if (
      isAllocChain(chain.name) &&
      !doomed.has(chain.name) &&
      !referenced.has(chain.name) &&
      !p.knownChains.has(chain.name) &&
      !othersTagged.has(chain.name)
    )
      doomed.set(chain.name, undefined);
}

/** The chains of `table` that go, with their owners. */
function* doomedChains(p: Planning, table: SavedTable): Sliceable<Map<string, Owner>> {
  const existing = new Set(table.chains.map((c) => c.name));
  const doomed = new Map<string, Owner>();
  for (const [name, id] of p.owned) if (existing.has(name)) doomed.set(name, id);
  for (let i = 0; i < table.rules.length; i++) {
    if (stepAt(i)) yield;
    const rule = table.rules[i] as Rule;
    const tag = tagOf(rule);
    if (!p.wanted(tag)) continue;
    if (isAllocChain(rule.chain)) doomed.set(rule.chain, tag.allocId);
    const target = rule.target?.name;
    if (target !== undefined && isAllocChain(target) && existing.has(target))
      doomed.set(target, tag.allocId);
  }
  if (p.selection.orphansOf !== undefined) yield* orphanChains(p, table, doomed);
  return doomed;
}

type Note = (address: string | undefined, owner: Owner) => void;
type Push = (rule: Rule, owner: Owner) => void;

/**
 * The rules of `table` outside the doomed chains that go: tagged with a selected allocation, or
 * jumping to a doomed chain. Notes the addresses the doomed masquerade and DNAT chains serve,
 * and those of the selected allocations' masquerade jumps.
 */
function* tableRules(
  p: Planning,
  table: SavedTable,
  doomed: ReadonlyMap<string, Owner>,
  note: Note,
  push: Push,
): Sliceable<void> {
  for (let i = 0; i < table.rules.length; i++) {
    if (stepAt(i)) yield;
    const rule = table.rules[i] as Rule;
    if (!doomed.has(rule.chain)) continue;
    const to = dnatDestination(rule);
    if (to !== undefined)
      note(
        to.startsWith('[') ? to.slice(1, to.indexOf(']')) : to.split(':')[0],
        doomed.get(rule.chain),
      );
  }
  for (let i = 0; i < table.rules.length; i++) {
    if (stepAt(i)) yield;
    const rule = table.rules[i] as Rule;
    if (doomed.has(rule.chain)) continue;
    const tag = tagOf(rule);
    if (p.wanted(tag) && rule.chain === 'POSTROUTING')
      note(sourceOf(rule)?.split('/')[0], tag.allocId);
    const target = rule.target?.name;
    if (p.wanted(tag)) push(rule, tag.allocId);
    else if (target !== undefined && doomed.has(target)) push(rule, doomed.get(target));
  }
}

/**
 * The firewall's untagged CNI-FORWARD rules of the noted addresses and, reaping leaks, of
 * addresses in the managed subnets that no reservation holds.
 */
function* firewallRules(
  p: Planning,
  family: Family,
  filter: SavedTable,
  addresses: ReadonlyMap<string, Owner>,
  push: Push,
): Sliceable<void> {
  const forward = filter.rules.filter((r) => r.chain === 'CNI-FORWARD');
  yield;
  // The firewall's rules by their spec, once: looking each address's specs up is then linear
  // in the rules (a filter per address made a reap of many leaks quadratic).
  const bySpec = new Map<string, (typeof forward)[number][]>();
  for (let i = 0; i < forward.length; i++) {
    if (stepAt(i)) yield;
    const rule = forward[i] as Rule;
    const key = specKey(rule.spec);
    const same = bySpec.get(key);
    if (same === undefined) bySpec.set(key, [rule]);
    else same.push(rule);
  }
  const orphanAddresses = new Set<string>();
  const orphansOf = p.selection.orphansOf;
  if (orphansOf !== undefined) {
    const reserved = new Set(p.found.reservations.map((r) => r.address));
    for (let i = 0; i < forward.length; i++) {
      if (stepAt(i)) yield;
      const host = firewallAddress(forward[i] as Rule);
      if (
        host !== undefined &&
        !reserved.has(host) &&
        !addresses.has(host) &&
        orphansOf.some((f) => inSubnets(f, host))
      )
        orphanAddresses.add(host);
    }
  }
  let n = 0;
  for (const address of [...addresses.keys(), ...orphanAddresses]) {
    if (stepAt(n++)) yield;
    const orphan = orphanAddresses.has(address);
    const keep = p.heldByOthers.has(address) && !orphan ? 1 : 0;
    for (const spec of firewallSpecs(address, family)) {
      const copies = bySpec.get(specKey(spec)) ?? [];
      for (const rule of copies.slice(keep))
        push(rule, orphan ? undefined : addresses.get(address));
    }
  }
}

/** One family's part of a plan. */
function* planFamily(
  p: Planning,
  family: Family,
  tables: readonly SavedTable[],
): Sliceable<{ rules: PlannedRule[]; chains: PlannedChain[] }> {
  const rules: PlannedRule[] = [];
  const chains: PlannedChain[] = [];
  const placed = yield* rulePlaces(tables, p.found.generations?.has(family) === true);
  const push: Push = (rule, owner) => {
    const place = placed.get(rule);
    rules.push(place === undefined ? { family, rule, owner } : { family, rule, owner, place });
  };
  // Address -> owner, for the firewall's untagged rules.
  const addresses = new Map<string, Owner>();
  const note: Note = (address, owner) => {
    if (address !== undefined && !addresses.has(address) && familyOf(address) === family)
      addresses.set(address, owner);
  };
  for (const a of p.selection.addresses) note(a, p.only);
  for (const r of p.reservations) note(r.address, r.allocId);
  for (const table of tables) {
    const doomed = yield* doomedChains(p, table);
    yield* tableRules(p, table, doomed, note, push);
    for (const [chain, owner] of doomed) chains.push({ family, table: table.name, chain, owner });
  }
  const filter = tables.find((t) => t.name === 'filter');
  if (filter !== undefined) yield* firewallRules(p, family, filter, addresses, push);
  return { rules, chains };
}

/**
 * Which removals a selection means, given one scan, yielding where it may be paused (`runSliced`
 * of @allocnet/base). Pure.
 */
export function* planSteps(found: Scan, selection: Selection): Sliceable<Plan> {
  const p = yield* planning(found, selection);
  const rules: PlannedRule[] = [];
  const chains: PlannedChain[] = [];
  for (const [family, tables] of found.tables) {
    const part = yield* planFamily(p, family, tables);
    rules.push(...part.rules);
    chains.push(...part.chains);
  }
  // A temporary belongs to no one: it goes with the orphans.
  const cache = found.cache.filter((c) =>
    c.kind === 'temporary' ? selection.orphansOf !== undefined : p.selected(c.allocId, c.network),
  );
  const planned = { rules, chains, reservations: p.reservations, cache };
  return found.generations === undefined ? planned : { ...planned, generations: found.generations };
}

/** `planSteps` run whole: which removals a selection means, given one scan. Pure: tests feed it scans. */
export function plan(found: Scan, selection: Selection): Plan {
  return runWhole(planSteps(found, selection));
}
