// The sweep: find what is tagged with allocations on this host (marks.ts says what the plugins
// leave and how it is recognised) and remove it in one atomic transaction per family. Three
// steps, and one loop over them:
// - `scan` reads iptables (both families at once), the reservation files asked for and the CNI
//   cache; asked to (`atGeneration`: a leak reap), also the nf_tables generation of each save;
// - `plan` (pure) decides, from one scan and a selection, what goes and whose it is;
// - `apply` removes a plan: per family one transaction, then the files. With a generation, by
//   rule handle (`Iptables.removeAt`: ~10× cheaper than iptables-restore for thousands of rules,
//   and refused by the kernel if anything changed since the save); without one, or when it was
//   refused, one iptables-restore that deletes the rules by their spec;
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
import { createBatch, isIptablesError } from '@allocnet/iptables-node';
import type { CallOptions, Family, Rule, SavedTable } from '@allocnet/iptables-node';
import { familyOf } from './address.js';
import { messageOf } from './errors.js';
import { inSubnets } from './facts.js';
import type { NetworkFacts } from './facts.js';
import { listReservations, readReservation, removeReservation } from './ipam.js';
import {
  chainsOf,
  dnatDestination,
  firewallAddress,
  firewallSpecs,
  isAllocChain,
  matchOption,
  specKey,
  tagOf,
} from './marks.js';
import type { Tag } from './marks.js';
import { describePlan, isEmpty, joinPlans } from './plan.js';
import type { CacheFile, Generations, Plan, PlannedChain, PlannedRule } from './plan.js';
import type { FoundReservation, HostState, IptablesState } from './types.js';

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
  /** Parse only the iptables-save lines this keeps (`linesAbout`, `linesNotAbout`); default all. */
  readonly lines?: (line: string) => boolean;
  /**
   * Read each family's nf_tables generation with its save (`Iptables.saveAt`), so that `apply`
   * can remove rules by handle in one kernel transaction instead of an iptables-restore.
   */
  readonly atGeneration?: boolean;
}

/** Reads iptables (both families at once), the reservations asked for and the CNI cache. */
export async function scan(deps: SweepDeps, options: ScanOptions): Promise<Scan> {
  const call = options.signal === undefined ? {} : { signal: options.signal };
  const save = { ...call, ...(options.lines === undefined ? {} : { lines: options.lines }) };
  const generations: Generations = new Map();
  const read = async (family: Family) => {
    const ipt = deps.iptables[family];
    if (options.atGeneration !== true || ipt.saveAt === undefined) return ipt.save(save);
    const { tables, generation } = await ipt.saveAt(save);
    if (generation !== undefined) generations.set(family, { generation, lists: new Map() });
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
    options.withCache ? listCache(deps.cache) : Promise.resolve([]),
  ]);
  const reservations = new Map<string, FoundReservation>();
  for (const r of [...full.flat(), ...some]) if (r !== undefined) reservations.set(r.path, r);
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

async function listCache(cache: CniCache): Promise<CacheFile[]> {
  const [results, adding] = await Promise.all([cache.listResults(), cache.listAdding()]);
  const file = (kind: CacheFile['kind'], dir: string) => (e: (typeof results)[number]) => ({
    kind,
    network: e.networkName,
    allocId: e.containerId,
    ifName: e.ifName,
    path: join(cache.dir, dir, `${e.networkName}-${e.containerId}-${e.ifName}`),
  });
  return [
    ...results.map(file('result', 'results')),
    ...adding.map(file('adding', join('allocnet', 'adding'))),
  ];
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

/** Which removals a selection means, given one scan. Pure: tests feed it scans. */
export function plan(found: Scan, selection: Selection): Plan {
  const selected = (id: string | undefined, network: string | undefined) =>
    id !== undefined &&
    selection.allocIds.has(id) &&
    (selection.network === undefined || network === selection.network);
  const wanted = (tag: Tag | undefined): tag is Tag =>
    tag !== undefined && selected(tag.allocId, tag.network);
  const rules: PlannedRule[] = [];
  const chains: PlannedChain[] = [];
  const reservations = found.reservations.filter((r) => selected(r.allocId, r.network));
  const cache = found.cache.filter((c) => selected(c.allocId, c.network));
  // Addresses held by a live reservation of someone else keep one copy of their firewall rules.
  const heldByOthers = new Set(
    found.reservations.filter((r) => !selection.allocIds.has(r.allocId)).map((r) => r.address),
  );
  const only = selection.allocIds.size === 1 ? [...selection.allocIds][0] : undefined;

  // Chain names the selected allocations own, over every network they could have used.
  const networks = new Set(
    selection.network === undefined ? selection.networks : [selection.network],
  );
  for (const tag of tagsIn(found)) if (wanted(tag)) networks.add(tag.network);
  const owned = chainsOf(selection.allocIds, networks);
  const knownChains = chainsOf(selection.known ?? [], networks);

  for (const [family, tables] of found.tables) {
    const placed = new Map<Rule, NonNullable<PlannedRule['place']>>();
    if (found.generations?.has(family) === true)
      for (const table of tables) {
        const places = table.places;
        if (places !== undefined)
          table.rules.forEach((rule, i) => {
            const position = places.positions[i];
            const chainSize = places.sizes.get(rule.chain);
            if (position !== undefined && chainSize !== undefined)
              placed.set(rule, { position, chainSize });
          });
      }
    const push = (rule: Rule, owner: string | undefined) => {
      const place = placed.get(rule);
      rules.push(place === undefined ? { family, rule, owner } : { family, rule, owner, place });
    };
    // Address -> owner, for the firewall's untagged rules.
    const addresses = new Map<string, string | undefined>();
    const note = (address: string | undefined, owner: string | undefined) => {
      if (address !== undefined && !addresses.has(address) && familyOf(address) === family)
        addresses.set(address, owner);
    };
    for (const a of selection.addresses) note(a, only);
    for (const r of reservations) note(r.address, r.allocId);
    for (const table of tables) {
      const existing = new Set(table.chains.map((c) => c.name));
      const doomed = new Map<string, string | undefined>();
      for (const [name, id] of owned) if (existing.has(name)) doomed.set(name, id);
      for (const rule of table.rules) {
        const tag = tagOf(rule);
        if (!wanted(tag)) continue;
        if (isAllocChain(rule.chain)) doomed.set(rule.chain, tag.allocId);
        const target = rule.target?.name;
        if (target !== undefined && isAllocChain(target) && existing.has(target))
          doomed.set(target, tag.allocId);
      }
      if (selection.orphansOf !== undefined) {
        const referenced = new Set<string>();
        const othersTagged = new Set<string>();
        for (const r of table.rules) {
          if (r.target !== undefined && r.chain !== r.target.name) referenced.add(r.target.name);
          const tag = tagOf(r);
          if (tag !== undefined && !wanted(tag)) othersTagged.add(r.chain);
        }
        for (const chain of table.chains)
          if (
            isAllocChain(chain.name) &&
            !doomed.has(chain.name) &&
            !referenced.has(chain.name) &&
            !knownChains.has(chain.name) &&
            !othersTagged.has(chain.name)
          )
            doomed.set(chain.name, undefined);
      }
      for (const rule of table.rules) {
        if (!doomed.has(rule.chain)) continue;
        // Addresses the doomed masquerade and DNAT chains serve.
        const to = dnatDestination(rule);
        if (to !== undefined)
          note(
            to.startsWith('[') ? to.slice(1, to.indexOf(']')) : to.split(':')[0],
            doomed.get(rule.chain),
          );
      }
      for (const rule of table.rules) {
        if (doomed.has(rule.chain)) continue;
        const tag = tagOf(rule);
        if (wanted(tag) && rule.chain === 'POSTROUTING')
          note(matchOption(rule, '-s')?.split('/')[0], tag.allocId);
        const target = rule.target?.name;
        if (wanted(tag)) push(rule, tag.allocId);
        else if (target !== undefined && doomed.has(target)) push(rule, doomed.get(target));
      }
      for (const [chain, owner] of doomed) chains.push({ family, table: table.name, chain, owner });
    }
    const filter = tables.find((t) => t.name === 'filter');
    if (filter === undefined) continue;
    const forward = filter.rules.filter((r) => r.chain === 'CNI-FORWARD');
    // The firewall's rules by their spec, once: looking each address's specs up is then linear
    // in the rules (a filter per address made 1,000 leaks' reap quadratic: 1.1 s of 1.8 s).
    const bySpec = new Map<string, (typeof forward)[number][]>();
    for (const rule of forward) {
      const key = specKey(rule.spec);
      const same = bySpec.get(key);
      if (same === undefined) bySpec.set(key, [rule]);
      else same.push(rule);
    }
    const orphanAddresses = new Set<string>();
    if (selection.orphansOf !== undefined) {
      const reserved = new Set(found.reservations.map((r) => r.address));
      for (const rule of forward) {
        const host = firewallAddress(rule);
        if (
          host !== undefined &&
          !reserved.has(host) &&
          !addresses.has(host) &&
          selection.orphansOf.some((f) => inSubnets(f, host))
        )
          orphanAddresses.add(host);
      }
    }
    for (const address of [...addresses.keys(), ...orphanAddresses]) {
      const orphan = orphanAddresses.has(address);
      const keep = heldByOthers.has(address) && !orphan ? 1 : 0;
      for (const spec of firewallSpecs(address, family)) {
        const copies = bySpec.get(specKey(spec)) ?? [];
        for (const rule of copies.slice(keep))
          push(rule, orphan ? undefined : addresses.get(address));
      }
    }
  }
  const planned = { rules, chains, reservations, cache };
  return found.generations === undefined ? planned : { ...planned, generations: found.generations };
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
  const placed = [];
  for (const r of rules) {
    if (r.place === undefined) {
      generations.delete(family);
      return false;
    }
    placed.push({ rule: r.rule, ...r.place });
  }
  try {
    const next = await ipt.removeAt(at, { rules: placed, chains });
    if (next === undefined) generations.delete(family);
    else generations.set(family, next);
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
 * handle in one nf_tables transaction when the plan allows it (`removeByHandle`), else in one
 * iptables-restore; both families at once; then the reservation and cache files. Resolves the
 * families whose removal failed (their state is untouched).
 */
export async function apply(
  deps: SweepDeps,
  planned: Plan,
  call: CallOptions,
): Promise<{ readonly failed: ReadonlyMap<Family, Error> }> {
  const failed = new Map<Family, Error>();
  await Promise.all(
    (['ipv4', 'ipv6'] as const).map(async (family) => {
      const rules = planned.rules.filter((r) => r.family === family);
      const chains = planned.chains.filter((c) => c.family === family);
      if (rules.length + chains.length === 0) return;
      if (await removeByHandle(deps, planned, family, rules, chains)) return;
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
      c.kind === 'result'
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
