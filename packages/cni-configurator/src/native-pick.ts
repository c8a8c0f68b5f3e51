// host-local's choice of a new setup's addresses, made by the setup itself (issue 30): the
// address host-local's iterator would take is found here and asked for in `args.cni.ips` of the
// bridge's conf (holds.ts's `withRequestedIps`, as a reclaim asks), so that host-local reserves it
// by name. host-local still writes the reservation and `last_reserved_ip.<set>`, under its lock,
// in its own format: everything that reads them (any runtime's DEL and CHECK, the audit, the
// reaper) sees what host-local alone would have left.
//
// Why: without a request, host-local's ADD (plugins 1.1.1, `allocator.Get`) first reads every
// file of its directory (`GetByID`, to refuse a second address for one container and
// interface), so the bridge's ADD grew with the node's reservations: 17–21 ms at 250 against
// 12–15 with a known address, 26–29 at 1,000 (docs/performance.md). A request skips that walk.
// The refusal it served cannot happen here: the runner never sets up one allocation twice, and a
// failed attempt is DEL'd (which releases) before the next.
//
// The choice is host-local's (`GetIter`, `Next`): per range set, from the address after
// `last_reserved_ip.<set>` when that lies in the set, else from the first range's start, round
// the set's ranges, skipping each range's gateway and every address that has a file (a
// reservation or a hold), and, here, those picked by a setup of this process whose ADD has not
// ended (`AddressPicks`). After 64 taken addresses it leaves the choice to host-local, whose walk
// then costs less than the search. Ranges are canonicalised as host-local does (`Canonicalize`):
// the gateway defaults to the address after the subnet's own, the start too, the end to the last
// but the IPv4 broadcast; a file is named by Go's form of the address (RFC 5952 for IPv6).
//
// Only for a bridge whose host-local has known options only (`nativePluginOf` of
// native-check.ts), no `args` or `ipRanges` of its own and no address asked for by the
// allocation (its `ips`, CNI_ARGS `IP`): anything else is host-local's own choice, as before. A
// race with another runtime's host-local in the same directory makes the ADD fail ("requested IP
// address ... is not available"); the attempt is then retried as any failed ADD is, with a new
// choice.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ipaddr from 'ipaddr.js';
import type { Logger } from '@allocnet/base';
import type { Attachment, NetworkConfig } from '@allocnet/cni';
import { withRequestedIps } from './holds.js';
import { argsNeedPlugin, nativePluginOf } from './native-check.js';
import { newHolder } from './picks.js';
import type { AddressPicks, Holder } from './picks.js';

/** One host-local range, canonical, as numbers. */
interface Range {
  readonly v6: boolean;
  /** The prefix length of the range's subnet: host-local's result gives the address with it. */
  readonly prefix: number;
  readonly start: bigint;
  readonly end: bigint;
  readonly gateway: bigint;
}

/** How many taken addresses the search passes over before it leaves the choice to host-local. */
const SEARCH_LIMIT = 64;

function numberOf(address: ipaddr.IPv4 | ipaddr.IPv6): bigint {
  return address.toByteArray().reduce((n, byte) => (n << 8n) | BigInt(byte), 0n);
}

function addressOf(n: bigint, v6: boolean): string {
  const bytes: number[] = [];
  for (let i = 0; i < (v6 ? 16 : 4); i++) bytes.unshift(Number((n >> BigInt(8 * i)) & 0xffn));
  return ipaddr.fromByteArray(bytes).toString();
}

function parsed(value: unknown): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  if (typeof value !== 'string' || !ipaddr.isValid(value)) return undefined;
  const a = ipaddr.parse(value);
  return a.kind() === 'ipv6' && (a as ipaddr.IPv6).isIPv4MappedAddress()
    ? (a as ipaddr.IPv6).toIPv4Address()
    : a;
}

/** host-local's `Canonicalize` of one range; undefined for anything it would refuse. */
function rangeOf(raw: unknown): Range | undefined {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  const r = raw as Record<string, unknown>;
  if (typeof r.subnet !== 'string' || !ipaddr.isValidCIDR(r.subnet)) return undefined;
  const [ip, prefix] = ipaddr.parseCIDR(r.subnet);
  const v6 = ip.kind() === 'ipv6';
  const bits = v6 ? 128 : 32;
  if (prefix > bits - 2) return undefined;
  const network = numberOf(ip);
  const host = (1n << BigInt(bits - prefix)) - 1n;
  if ((network & host) !== 0n) return undefined;
  const inside = (a: bigint) => a >= network && a <= network + host;
  const own = (value: unknown, fallback: bigint): bigint | undefined => {
    if (value === undefined) return fallback;
    const a = parsed(value);
    return a === undefined || (a.kind() === 'ipv6') !== v6 ? undefined : numberOf(a);
  };
  const gateway = own(r.gateway, network + 1n);
  const start = own(r.rangeStart, network + 1n);
  const end = own(r.rangeEnd, v6 ? network + host : network + host - 1n);
  if (gateway === undefined || start === undefined || end === undefined) return undefined;
  if (!inside(start) || !inside(end) || start > end) return undefined;
  return { v6, prefix, start, end, gateway };
}

/** host-local's range sets, the old-style range first; undefined when one is not understood. */
export function rangeSetsOf(ipam: Readonly<Record<string, unknown>>): Range[][] | undefined {
  const sets: unknown[] = [];
  if (ipam.subnet !== undefined) sets.push([ipam]);
  if (ipam.ranges !== undefined) {
    if (!Array.isArray(ipam.ranges)) return undefined;
    sets.push(...(ipam.ranges as unknown[]));
  }
  const out: Range[][] = [];
  for (const set of sets) {
    if (!Array.isArray(set) || set.length === 0) return undefined;
    const ranges = set.map(rangeOf);
    if (ranges.some((r) => r === undefined || r.v6 !== ranges[0]?.v6)) return undefined;
    out.push(ranges as Range[]);
  }
  return out.length === 0 ? undefined : out;
}

/** The candidates host-local's iterator gives for a set, from after `last` (if in the set). */
export function* candidates(set: readonly Range[], last: bigint | undefined): Generator<bigint> {
  const at = last === undefined ? -1 : set.findIndex((r) => last >= r.start && last <= r.end);
  let index = at === -1 ? 0 : at;
  let cur: bigint | undefined = at === -1 ? undefined : last;
  let first: bigint | undefined;
  for (;;) {
    const r = set[index] as Range;
    if (cur === undefined) cur = r.start;
    else if (cur === r.end) {
      index = (index + 1) % set.length;
      cur = (set[index] as Range).start;
    } else cur += 1n;
    if (first === undefined) first = cur;
    else if (cur === first) return;
    if (cur !== (set[index] as Range).gateway) yield cur;
  }
}

/** Picks for one attempt of an ADD of `chain`; undefined when host-local must choose. */
export type AddressPick = (chain: NetworkConfig) => Picked | undefined;

export interface Picked {
  /** The chain asking host-local for the picked addresses. */
  readonly network: NetworkConfig;
  /**
   * The addresses as host-local's result gives them once it reserved them (`address/prefix`,
   * one per range set, in the sets' order): what the setup writes its rules for while the ADD runs.
   */
  readonly addresses: readonly string[];
  /**
   * Lets the addresses go once the attempt ended (reserved then, or free again), after its rules
   * for them are in or removed (add.ts).
   */
  readonly done: () => void;
  /** The attempt's hold on them, for `AddressPicks.free`. */
  readonly holder: Holder;
}

function lastReserved(dir: string, set: number): bigint | undefined {
  try {
    // As host-local reads it: the whole text, not trimmed.
    const a = parsed(readFileSync(join(dir, `last_reserved_ip.${set}`), 'utf8'));
    return a === undefined ? undefined : numberOf(a);
  } catch {
    return undefined;
  }
}

/**
 * One set's address: the first candidate with no file that no setup here has picked. Synchronous
 * (a few microseconds a candidate): no other setup's pick can come between the look and the
 * taking.
 */
function pickIn(
  dir: string,
  index: number,
  set: readonly Range[],
  busy: ReadonlySet<string>,
): { address: string; prefix: number } | undefined {
  const v6 = (set[0] as Range).v6;
  let passed = 0;
  for (const n of candidates(set, lastReserved(dir, index))) {
    const address = addressOf(n, v6);
    if (!busy.has(address) && !existsSync(join(dir, address))) {
      const { prefix } = set.find((r) => n >= r.start && n <= r.end) as Range;
      return { address, prefix };
    }
    if (++passed >= SEARCH_LIMIT) return undefined;
  }
  return undefined;
}

/**
 * The setup's own choice for `network` (see the top), or undefined when host-local must choose.
 * Returns a function that picks anew for each attempt.
 */
export function addressPicker(
  network: NetworkConfig,
  attachment: Pick<Attachment, 'args' | 'capabilityArgs'>,
  { picks, logger }: { readonly picks: AddressPicks; readonly logger: Logger },
): AddressPick | undefined {
  const ipams = network.plugins.filter((p) => p.raw.ipam !== undefined);
  const main = ipams.length === 1 ? ipams[0] : undefined;
  if (main === undefined || main.raw.args !== undefined || main.capabilities.includes('ipRanges'))
    return undefined;
  const plugin = nativePluginOf(main, network);
  if (plugin?.type !== 'bridge') return undefined;
  if (argsNeedPlugin(attachment.args ?? []) || attachment.capabilityArgs?.ips !== undefined)
    return undefined;
  const sets = rangeSetsOf(main.raw.ipam as Record<string, unknown>);
  if (sets === undefined) return undefined;
  const dir = plugin.ipamDir;
  return (chain) => {
    const holder = newHolder();
    const addresses: string[] = [];
    const done = () => {
      picks.release(holder);
    };
    for (const [index, set] of sets.entries()) {
      const picked = pickIn(dir, index, set, picks.busy(dir));
      if (picked === undefined) {
        done();
        return undefined;
      }
      picks.hold(holder, dir, picked.address);
      holder.taken.push({ dir, address: picked.address });
      addresses.push(`${picked.address}/${picked.prefix}`);
    }
    const taken = holder.taken.map((t) => t.address);
    logger.debug('host-local asked for the addresses the setup picked', { dir, addresses: taken });
    return { network: withRequestedIps(chain, taken), addresses, done, holder };
  };
}
