import { createHash } from 'node:crypto';
import { join } from 'node:path';
import ipaddr from 'ipaddr.js';
import type { CniCache, Logger } from '@allocnet/cni';
import { createBatch, formatArgs, isIptablesError } from '@allocnet/iptables-node';
import type { CallOptions, Family, Iptables, Rule, SavedTable } from '@allocnet/iptables-node';
import { messageOf } from './errors.js';
import { inSubnets } from './facts.js';
import type { NetworkFacts } from './facts.js';
import { listReservations, readReservation, removeReservation } from './ipam.js';
import type { FoundChain, FoundReservation, FoundRule, HostState } from './types.js';

/**
 * The sweep: find what is tagged with allocations on this host and remove it in one atomic
 * iptables-restore per family. What the plugins tag, measured on Debian's plugins 1.1.1:
 * - bridge (ipMasq): `nat POSTROUTING -s <ip>/32 -m comment --comment "name: \"<net>\" id:
 *   \"<id>\"" -j CNI-<h>`, and chain `CNI-<h>` whose rules carry the same comment;
 * - portmap: `nat CNI-HOSTPORT-DNAT … --comment "dnat name: \"<net>\" id: \"<id>\"" … -j
 *   CNI-DN-<h'>`, and chain `CNI-DN-<h'>` (its rules carry no comment);
 * - firewall: `filter CNI-FORWARD -d <ip>/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`
 *   and `-s <ip>/32 -j ACCEPT`, untagged: found by the allocation's addresses;
 * - host-local: `<dataDir>/<net>/<ip>` holding the id.
 * `<h>` is the first 24 hex digits of sha512(net + id), `<h'>` the first 21.
 */

const TAG = /^(?:dnat )?name: "([^"]*)" id: "([^"]*)"$/;
const ALLOC_CHAIN = /^CNI-(?:DN-[0-9a-f]{21}|[0-9a-f]{24})$/;

export interface Tag {
  readonly network: string;
  readonly allocId: string;
}

export function tagOf(rule: Rule): Tag | undefined {
  const match = rule.comment === undefined ? null : TAG.exec(rule.comment);
  if (match === null) return undefined;
  return { network: match[1] ?? '', allocId: match[2] ?? '' };
}

/** The chains the bridge and portmap plugins name after (network, container id). */
export function allocChains(network: string, allocId: string): { masq: string; dnat: string } {
  const hash = createHash('sha512')
    .update(network + allocId)
    .digest('hex');
  return { masq: `CNI-${hash.slice(0, 24)}`, dnat: `CNI-DN-${hash.slice(0, 21)}` };
}

/** The firewall plugin's two accept rules for one address, as iptables-save prints them. */
export function firewallSpecs(address: string, family: Family): string[][] {
  const host = `${address}/${family === 'ipv4' ? 32 : 128}`;
  return [
    ['-d', host, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', 'ACCEPT'],
    ['-s', host, '-j', 'ACCEPT'],
  ];
}

export function familyOf(address: string): Family | undefined {
  if (!ipaddr.isValid(address)) return undefined;
  return ipaddr.parse(address).kind() === 'ipv6' ? 'ipv6' : 'ipv4';
}

/** A cache file of the CNI runtime (a result, or an ADD-in-progress marker). */
export interface CacheFile {
  readonly kind: 'result' | 'adding';
  readonly network: string;
  readonly allocId: string;
  readonly ifName: string;
  readonly path: string;
}

/** What one look at the host found. */
export interface Scan {
  readonly tables: ReadonlyMap<Family, readonly SavedTable[]>;
  readonly reservations: readonly FoundReservation[];
  readonly cache: readonly CacheFile[];
}

export interface SweepDeps {
  readonly iptables: Readonly<Record<Family, Iptables>>;
  readonly cache: CniCache;
  readonly logger: Logger;
}

export interface ScanOptions extends CallOptions {
  /** Networks whose IPAM directories are read whole. */
  readonly fullIpam: readonly NetworkFacts[];
  /** Only these reservation files are read (a teardown knows its addresses). */
  readonly addressesIn?: readonly { readonly facts: NetworkFacts; readonly address: string }[];
  readonly withCache: boolean;
  /** Parse only the iptables-save lines this keeps (see `linesAbout`); default all. */
  readonly lines?: (line: string) => boolean;
}

/**
 * A line filter for one allocation's state: its id (every tag), its chains in the given networks,
 * and its addresses (the firewall's untagged rules). Only for allocations whose addresses are all
 * known: a rule about an address not listed here would be missed.
 */
export function linesAbout(
  allocId: string,
  networks: readonly string[],
  addresses: readonly string[],
): (line: string) => boolean {
  const needles = [allocId];
  for (const net of networks) {
    const c = allocChains(net, allocId);
    needles.push(c.masq, c.dnat);
  }
  for (const a of addresses) needles.push(`${a}/32`, `${a}/128`);
  return (line) => needles.some((n) => line.includes(n));
}

/** A tag as iptables-save prints it: `… id: \"<id>\""`. */
const RAW_TAG_ID = /id: \\"([^"\\]*)\\""/;

/**
 * A line filter that drops what belongs to the allocations in `known`: rules in their chains,
 * rules tagged with their ids, rules jumping to their chains, their chains' declarations. What is
 * left is what a leak search can care about; on a node with 1,000 live allocations that keeps a
 * few hundred of 13,000 lines (the firewall's untagged rules stay: they are judged by address).
 */
export function linesNotAbout(
  known: ReadonlySet<string>,
  networks: readonly string[],
): (line: string) => boolean {
  const chains = new Set<string>();
  for (const id of known)
    for (const net of networks) {
      const c = allocChains(net, id);
      chains.add(c.masq);
      chains.add(c.dnat);
    }
  return (line) => {
    if (line.startsWith(':')) return !chains.has(line.slice(1, line.indexOf(' ')));
    if (!line.startsWith('-A ')) return true;
    if (chains.has(line.slice(3, line.indexOf(' ', 3)))) return false;
    const id = RAW_TAG_ID.exec(line)?.[1];
    if (id !== undefined && known.has(id)) return false;
    const jump = line.lastIndexOf(' -j ');
    return !(jump >= 0 && chains.has(line.slice(jump + 4).split(' ', 1)[0] ?? ''));
  };
}

/** Reads iptables (both families at once), the reservations asked for and the CNI cache. */
export async function scanHost(deps: SweepDeps, options: ScanOptions): Promise<Scan> {
  const call = options.signal === undefined ? {} : { signal: options.signal };
  const save = { ...call, ...(options.lines === undefined ? {} : { lines: options.lines }) };
  const [v4, v6, full, some, cache] = await Promise.all([
    deps.iptables.ipv4.save(save),
    deps.iptables.ipv6.save(save),
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

/** A rule to delete, and the allocation it belongs to (undefined: no one's, an orphan). */
export interface PlannedRule {
  readonly family: Family;
  readonly rule: Rule;
  readonly owner: string | undefined;
}

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
export function planSweep(scan: Scan, selection: Selection): Plan {
  const selected = (id: string | undefined, network: string | undefined) =>
    id !== undefined &&
    selection.allocIds.has(id) &&
    (selection.network === undefined || network === selection.network);
  const wanted = (tag: Tag | undefined): tag is Tag =>
    tag !== undefined && selected(tag.allocId, tag.network);
  const rules: PlannedRule[] = [];
  const chains: PlannedChain[] = [];
  const reservations = scan.reservations.filter((r) => selected(r.allocId, r.network));
  const cache = scan.cache.filter((c) => selected(c.allocId, c.network));
  // Addresses held by a live reservation of someone else keep one copy of their firewall rules.
  const heldByOthers = new Set(
    scan.reservations.filter((r) => !selection.allocIds.has(r.allocId)).map((r) => r.address),
  );
  const only = selection.allocIds.size === 1 ? [...selection.allocIds][0] : undefined;

  // Chain names the selected allocations own, over every network they could have used.
  const networks = new Set(
    selection.network === undefined ? selection.networks : [selection.network],
  );
  for (const tables of scan.tables.values())
    for (const table of tables)
      for (const rule of table.rules) {
        const tag = tagOf(rule);
        if (wanted(tag)) networks.add(tag.network);
      }
  const owned = new Map<string, string>();
  for (const id of selection.allocIds)
    for (const net of networks) {
      const c = allocChains(net, id);
      owned.set(c.masq, id);
      owned.set(c.dnat, id);
    }
  const knownChains = new Set<string>();
  for (const id of selection.known ?? [])
    for (const net of networks) {
      const c = allocChains(net, id);
      knownChains.add(c.masq);
      knownChains.add(c.dnat);
    }

  for (const [family, tables] of scan.tables) {
    // Address -> owner, for the firewall's untagged rules.
    const addresses = new Map<string, string | undefined>();
    const note = (address: string | undefined, owner: string | undefined) => {
      if (address !== undefined && familyOf(address) === family && !addresses.has(address))
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
        if (ALLOC_CHAIN.test(rule.chain)) doomed.set(rule.chain, tag.allocId);
        const target = rule.target?.name;
        if (target !== undefined && ALLOC_CHAIN.test(target) && existing.has(target))
          doomed.set(target, tag.allocId);
      }
      if (selection.orphansOf !== undefined) {
        const referenced = new Set(
          table.rules.flatMap((r) =>
            r.target === undefined || r.chain === r.target.name ? [] : [r.target.name],
          ),
        );
        const othersTagged = new Set(
          table.rules.flatMap((r) => (tagOf(r) === undefined || wanted(tagOf(r)) ? [] : [r.chain])),
        );
        for (const chain of table.chains)
          if (
            ALLOC_CHAIN.test(chain.name) &&
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
        if (rule.target?.name === 'DNAT') {
          const to = rule.target.options.find((o) => o.option === '--to-destination')?.values[0];
          note(
            to?.startsWith('[') ? to.slice(1, to.indexOf(']')) : to?.split(':')[0],
            doomed.get(rule.chain),
          );
        }
      }
      for (const rule of table.rules) {
        if (doomed.has(rule.chain)) continue;
        const tag = tagOf(rule);
        if (wanted(tag) && rule.chain === 'POSTROUTING')
          note(optionValue(rule, '-s')?.split('/')[0], tag.allocId);
        const target = rule.target?.name;
        if (wanted(tag)) rules.push({ family, rule, owner: tag.allocId });
        else if (target !== undefined && doomed.has(target))
          rules.push({ family, rule, owner: doomed.get(target) });
      }
      for (const [chain, owner] of doomed) chains.push({ family, table: table.name, chain, owner });
    }
    const filter = tables.find((t) => t.name === 'filter');
    if (filter === undefined) continue;
    const forward = filter.rules.filter((r) => r.chain === 'CNI-FORWARD');
    const orphanAddresses = new Set<string>();
    if (selection.orphansOf !== undefined) {
      const reserved = new Set(scan.reservations.map((r) => r.address));
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
        const copies = forward.filter((r) => r.spec.join('\0') === spec.join('\0'));
        for (const rule of copies.slice(keep))
          rules.push({ family, rule, owner: orphan ? undefined : addresses.get(address) });
      }
    }
  }
  return { rules, chains, reservations, cache };
}

function optionValue(rule: Rule, option: string): string | undefined {
  return rule.matches.flatMap((m) => m.options).find((o) => o.option === option)?.values[0];
}

/** A plan split by owner (undefined: the orphans), in one pass. */
export function groupPlan(plan: Plan): Map<string | undefined, Plan> {
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
  for (const r of plan.rules) group(r.owner).rules.push(r);
  for (const c of plan.chains) group(c.owner).chains.push(c);
  for (const r of plan.reservations) group(r.allocId).reservations.push(r);
  for (const c of plan.cache) group(c.allocId).cache.push(c);
  return groups;
}

/** Several plans as one. */
export function joinPlans(plans: readonly Plan[]): Plan {
  return {
    rules: plans.flatMap((p) => p.rules),
    chains: plans.flatMap((p) => p.chains),
    reservations: plans.flatMap((p) => p.reservations),
    cache: plans.flatMap((p) => p.cache),
  };
}

/** The part of a plan that belongs to `owners` (undefined in the set: the orphans). */
export function planFor(plan: Plan, owners: ReadonlySet<string | undefined>): Plan {
  return {
    rules: plan.rules.filter((r) => owners.has(r.owner)),
    chains: plan.chains.filter((c) => owners.has(c.owner)),
    reservations: plan.reservations.filter((r) => owners.has(r.allocId)),
    cache: plan.cache.filter((c) => owners.has(c.allocId)),
  };
}

/** The address of one of the firewall plugin's accept rules, or undefined for any other rule. */
function firewallAddress(rule: Rule): string | undefined {
  const s = rule.spec;
  const isAccept =
    (s.length === 4 && s[0] === '-s' && s[2] === '-j' && s[3] === 'ACCEPT') ||
    (s.length === 8 &&
      s[0] === '-d' &&
      s.slice(2).join(' ') === '-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT');
  if (!isAccept) return undefined;
  const [host, prefix] = (s[1] ?? '').split('/');
  return host !== undefined && (prefix === '32' || prefix === '128') ? host : undefined;
}

export function planIsEmpty(plan: Plan): boolean {
  return (
    plan.rules.length === 0 &&
    plan.chains.length === 0 &&
    plan.reservations.length === 0 &&
    plan.cache.length === 0
  );
}

/** The plan as a report. */
export function describePlan(plan: Plan): HostState {
  return {
    rules: plan.rules.map(({ family, rule }): FoundRule => ({
      family,
      table: rule.table,
      chain: rule.chain,
      line: `-A ${rule.chain} ${formatArgs(rule.spec)}`,
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

export function mergeStates(states: readonly HostState[]): HostState {
  return {
    rules: states.flatMap((s) => s.rules),
    chains: states.flatMap((s) => s.chains),
    reservations: states.flatMap((s) => s.reservations),
    cacheFiles: states.flatMap((s) => s.cacheFiles),
  };
}

export const EMPTY_STATE: HostState = { rules: [], chains: [], reservations: [], cacheFiles: [] };

/**
 * Applies a plan: per family one iptables-restore that deletes the rules, then flushes and
 * deletes the chains (all or nothing); both families at once; then the reservation and cache
 * files. Resolves the families whose restore failed (their state is untouched).
 */
export async function applyPlan(
  deps: SweepDeps,
  plan: Plan,
  call: CallOptions,
): Promise<{ readonly failed: ReadonlyMap<Family, Error> }> {
  const failed = new Map<Family, Error>();
  await Promise.all(
    (['ipv4', 'ipv6'] as const).map(async (family) => {
      const batch = createBatch();
      for (const r of plan.rules) if (r.family === family) batch.deleteRule(r.rule);
      const chains = plan.chains.filter((c) => c.family === family);
      for (const c of chains) batch.clearChain(c.table, c.chain);
      for (const c of chains) batch.deleteChain(c.table, c.chain);
      if (batch.size === 0) return;
      try {
        await deps.iptables[family].restore(batch, call);
      } catch (error) {
        if (isIptablesError(error) && error.code === 'aborted') throw error;
        failed.set(family, error instanceof Error ? error : new Error(messageOf(error)));
      }
    }),
  );
  // A reservation goes only with its rules: an address back in the pool while its masquerade
  // rules stay would hand them to the next allocation that gets it.
  if (failed.size > 0) return { failed };
  await Promise.all(plan.reservations.map((r) => removeReservation(r)));
  await Promise.all(
    plan.cache.map((c) =>
      c.kind === 'result'
        ? deps.cache.removeResult(c.network, c.allocId, c.ifName)
        : deps.cache.clearAdding(c.network, c.allocId, c.ifName),
    ),
  );
  return { failed };
}

/**
 * Scan, plan, apply; when a family's restore fails (its rules changed between the scan and the
 * restore: another allocation's plugin was at work), scan again and retry, up to `attempts`
 * times. Resolves what was removed; throws the last failure when state stays behind.
 */
export async function sweep(
  deps: SweepDeps,
  scanOptions: ScanOptions,
  selection: (scan: Scan) => Selection,
  options: CallOptions & { readonly dryRun?: boolean; readonly attempts?: number },
): Promise<HostState> {
  const attempts = options.attempts ?? 3;
  const removed: HostState[] = [];
  const call = options.signal === undefined ? {} : { signal: options.signal };
  for (let attempt = 1; ; attempt++) {
    const scan = await scanHost(deps, scanOptions);
    const plan = planSweep(scan, selection(scan));
    if (planIsEmpty(plan)) return mergeStates(removed);
    if (options.dryRun === true) return describePlan(plan);
    const { failed } = await applyPlan(deps, plan, call);
    removed.push(
      describePlan({
        ...plan,
        rules: plan.rules.filter((r) => !failed.has(r.family)),
        chains: plan.chains.filter((c) => !failed.has(c.family)),
      }),
    );
    if (failed.size === 0) return mergeStates(removed);
    const first = [...failed.values()][0];
    if (attempt >= attempts) throw first ?? new Error('iptables-restore failed');
    deps.logger.warn('sweep: iptables changed under the batch; scanning again', {
      attempt,
      error: messageOf(first),
    });
  }
}
