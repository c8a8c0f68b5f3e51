// What the plugins leave on the node for one allocation, and how to recognise it, as Debian's
// plugins 1.1.1 leave it (docs/cni.md, "What the plugins leave"):
// - bridge (ipMasq): `nat POSTROUTING -s <ip>/32 -m comment --comment "name: \"<net>\" id:
//   \"<id>\"" -j CNI-<h>`, and chain `CNI-<h>` whose rules carry the same comment;
// - portmap: `nat CNI-HOSTPORT-DNAT … --comment "dnat name: \"<net>\" id: \"<id>\"" … -j
//   CNI-DN-<h'>`, and chain `CNI-DN-<h'>` (its rules carry no comment);
// - firewall: `filter CNI-FORWARD -d <ip>/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`
//   and `-s <ip>/32 -j ACCEPT`, untagged: found by the allocation's addresses;
// - host-local: `<dataDir>/<net>/<ip>` holding the id (ipam.ts).
// `<h>` is the first 24 hex digits of sha512(net + id), `<h'>` the first 21.
//
// Every reading of a tag, every chain name and every firewall accept rule is made here, so that a
// change in the plugins' shapes is one change. Pure: no I/O.
import { hash as cryptoHash } from 'node:crypto';
import ipaddr from 'ipaddr.js';
import { runWhole } from '@allocnet/base';
import type { Sliceable } from '@allocnet/base';
import type { Family, Rule } from '@allocnet/iptables-node';

/** The allocation (and network) a plugin tagged a rule with. */
export interface Tag {
  readonly network: string;
  readonly allocId: string;
}

/** bridge's `name: "<net>" id: "<id>"`, or portmap's the same with `dnat ` before it. */
const TAG = /^(?:dnat )?name: "([^"]*)" id: "([^"]*)"$/;

/** The tag a rule comment is, or undefined for any other comment (or none). */
export function parseTag(comment: string | undefined): Tag | undefined {
  const match = comment === undefined ? null : TAG.exec(comment);
  if (match === null) return undefined;
  return { network: match[1] ?? '', allocId: match[2] ?? '' };
}

/** Each parsed rule's tag, once: a plan asks about every rule of a scan several times. */
const tags = new WeakMap<Rule, Tag | null>();

/** The tag of a parsed rule. */
export function tagOf(rule: Rule): Tag | undefined {
  if (rule.comment === undefined) return undefined;
  let tag = tags.get(rule);
  if (tag === undefined) {
    tag = parseTag(rule.comment) ?? null;
    tags.set(rule, tag);
  }
  return tag ?? undefined;
}

/**
 * The same tag's id in an unparsed iptables-save line, where the comment is quoted (`… id:
 * \"<id>\""`): for line filters, which run before a line is parsed and must stay cheap.
 */
const SAVED_TAG_ID = /id: \\"([^"\\]*)\\""/;

const ALLOC_CHAIN = /^CNI-(?:DN-[0-9a-f]{21}|[0-9a-f]{24})$/;

/** The chains the bridge and portmap plugins name after (network, container id). */
export function allocChains(network: string, allocId: string): { masq: string; dnat: string } {
  // One-shot: a leak scan names the chains of every allocation it plans for, and a Hash object
  // each cost more than twice as much in a cold process.
  const hash = cryptoHash('sha512', network + allocId, 'hex');
  return { masq: `CNI-${hash.slice(0, 24)}`, dnat: `CNI-DN-${hash.slice(0, 21)}` };
}

/**
 * The comment bridge and ptp tag their masquerade with, `name: "<net>" id: "<id>"`; undefined when
 * it would pass the 256 bytes the plugins cut comments at (their own ADD then writes it).
 */
export function masqueradeComment(network: string, allocId: string): string | undefined {
  const comment = `name: "${network}" id: "${allocId}"`;
  return Buffer.byteLength(comment) > 256 ? undefined : comment;
}

/** What bridge and ptp (ipMasq) write for one address, as iptables specs. */
export interface Masquerade {
  readonly family: Family;
  readonly chain: string;
  /** The chain's rules for the address: its subnet's ACCEPT, then the MASQUERADE. */
  readonly rules: readonly (readonly string[])[];
  /** The POSTROUTING rule that sends the address's packets to the chain. */
  readonly jump: readonly string[];
}

/**
 * bridge's and ptp's masquerade for one address of their result (`<ip>/<prefix>`): chain
 * `CNI-<h>` with `-d <ip>/<prefix> … -j ACCEPT` (iptables keeps it as the subnet) and `! -d
 * 224.0.0.0/4 … -j MASQUERADE` (IPv6: `ff00::/8`), and `POSTROUTING -s <ip>/32 … -j CNI-<h>`
 * (`/128`), each with the comment `name: "<net>" id: "<id>"`. Undefined when the address is not
 * one, or the comment would pass the 256 bytes the plugins cut comments at.
 */
export function masqueradeOf(
  network: string,
  allocId: string,
  address: string,
): Masquerade | undefined {
  const slash = address.indexOf('/');
  const ip = slash < 0 ? address : address.slice(0, slash);
  if (slash < 0 || !ipaddr.isValid(ip)) return undefined;
  const v6 = ipaddr.parse(ip).kind() === 'ipv6';
  const comment = masqueradeComment(network, allocId);
  if (comment === undefined) return undefined;
  const tagged = ['-m', 'comment', '--comment', comment];
  const chain = allocChains(network, allocId).masq;
  return {
    family: v6 ? 'ipv6' : 'ipv4',
    chain,
    rules: [
      ['-d', address, ...tagged, '-j', 'ACCEPT'],
      ['!', '-d', v6 ? 'ff00::/8' : '224.0.0.0/4', ...tagged, '-j', 'MASQUERADE'],
    ],
    jump: ['-s', `${ip}/${v6 ? 128 : 32}`, ...tagged, '-j', chain],
  };
}

/** The chains of `allocIds` in each of `networks`, each with the allocation it belongs to. */
export function chainsOf(
  allocIds: Iterable<string>,
  networks: Iterable<string>,
): Map<string, string> {
  return runWhole(chainsOfSteps(allocIds, networks));
}

/** Chain names hashed between two pause points of `chainsOfSteps` (well under a millisecond). */
const HASHES_PER_STEP = 256;

/**
 * `chainsOf`, yielding every `HASHES_PER_STEP` names (`runSliced` of @allocnet/base): a reap of
 * 5,000 leaked allocations hashes 5,000 names per network, tens of milliseconds in all.
 */
export function* chainsOfSteps(
  allocIds: Iterable<string>,
  networks: Iterable<string>,
): Sliceable<Map<string, string>> {
  const owners = new Map<string, string>();
  const nets = [...networks];
  let n = 0;
  for (const id of allocIds)
    for (const net of nets) {
      const c = allocChains(net, id);
      owners.set(c.masq, id);
      owners.set(c.dnat, id);
      if (++n % HASHES_PER_STEP === 0) yield;
    }
  return owners;
}

/** True for a name shaped like `allocChains` gives (some allocation's, in some network). */
export function isAllocChain(name: string): boolean {
  // Both shapes are 28 characters: most names (POSTROUTING, ACCEPT) are told apart without
  // the expression, which a leak scan asks of every chain and jump target.
  return name.length === 28 && ALLOC_CHAIN.test(name);
}

/** The value of one of a rule's match options (`-s`, `-p`, `--dport`), or undefined. */
export function matchOption(rule: Rule, option: string): string | undefined {
  for (const m of rule.matches)
    for (const o of m.options) if (o.option === option) return o.values[0];
  return undefined;
}

/**
 * A rule's `-s` value, as `matchOption(rule, '-s')` gives it, read from where iptables prints it
 * (first, before any other match, after its `!`) without reading the rule's matches: a leak scan
 * asks it of every masquerade jump, and reading their matches was a third of choosing the chains
 * to read after its first pass (`chainsToRead`, sweep.ts).
 */
export function sourceOf(rule: Rule): string | undefined {
  const s = rule.spec;
  const at = s[0] === '!' ? 1 : 0;
  return s[at] === '-s' ? s[at + 1] : undefined;
}

/** Where a DNAT rule (portmap's) sends traffic, `<ip>:<port>` or `[<ip6>]:<port>`; else undefined. */
export function dnatDestination(rule: Rule): string | undefined {
  if (rule.target?.name !== 'DNAT') return undefined;
  return rule.target.options.find((o) => o.option === '--to-destination')?.values[0];
}

/** The firewall plugin's two accept rules for one address, as iptables-save prints them. */
export function firewallSpecs(address: string, family: Family): string[][] {
  const host = `${address}/${family === 'ipv4' ? 32 : 128}`;
  return [
    ['-d', host, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', 'ACCEPT'],
    ['-s', host, '-j', 'ACCEPT'],
  ];
}

/**
 * What a rule's nf_tables message must hold when it is `spec` (`Iptables.searchRules`): its
 * comment, else its /32 or /128 address's bytes; undefined when it has neither.
 */
export function needleOf(spec: readonly string[]): Buffer | undefined {
  const comment = spec.indexOf('--comment');
  if (comment >= 0 && spec[comment + 1] !== undefined) return Buffer.from(spec[comment + 1] ?? '');
  for (const flag of ['-s', '-d']) {
    const at = spec.indexOf(flag);
    const [ip = '', bits] = (at >= 0 ? (spec[at + 1] ?? '') : '').split('/');
    if ((bits === '32' || bits === '128') && ipaddr.isValid(ip))
      return Buffer.from(ipaddr.parse(ip).toByteArray());
  }
  return undefined;
}

/** The address of one of the firewall plugin's accept rules, or undefined for any other rule. */
export function firewallAddress(rule: Rule): string | undefined {
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

/** A word of a spec that may be an address with a prefix (`10.0.0.2/32`, `fd00::2/128`). */
const CIDR_LIKE = /^[0-9a-fA-F:.]+\/\d{1,3}$/;

/** An IPv4 CIDR word already in its one spelling (no leading zeros): ipaddr would give it back. */
const OCTET = '(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)';
const CANONICAL_V4_CIDR = new RegExp(`^${OCTET}(?:\\.${OCTET}){3}/(?:3[0-2]|[12]?\\d)$`);

/** A CIDR word in one spelling (`fd00:0::2/128` and `fd00::2/128` alike), else the word itself. */
function canonicalWord(word: string): string {
  if (!CIDR_LIKE.test(word)) return word;
  // The common case, without a parse: a reap of 5,000 allocations reads 20,000 such words.
  if (CANONICAL_V4_CIDR.test(word)) return `\u0001ipv4:${word}`;
  try {
    // Parsed by its family directly: ipaddr.parseCIDR tries IPv6 first and throws for every
    // IPv4 word, which made CHECKs of 1,000 allocations spend seconds in exceptions.
    const [address, prefix] = word.includes(':')
      ? ipaddr.IPv6.parseCIDR(word)
      : ipaddr.IPv4.parseCIDR(word);
    return `\u0001${address.kind()}:${address.toString()}/${String(prefix)}`;
  } catch {
    return word;
  }
}

/**
 * A spec as one string, with every address as an address (`fd00::2/128` however it is
 * written): two specs are the same rule exactly when their keys are equal.
 */
export function specKey(spec: readonly string[]): string {
  return spec.map(canonicalWord).join('\0');
}

/** The `specKey` of every rule of a listing, computed once per listing (a batched read is shared). */
const specKeys = new WeakMap<readonly Rule[], ReadonlySet<string>>();
/** The `specKey` of a rule, once per rule (a chain read again gives the same `Rule` objects). */
const ruleKeys = new WeakMap<Rule, string>();

function ruleKey(rule: Rule): string {
  let key = ruleKeys.get(rule);
  if (key === undefined) {
    key = specKey(rule.spec);
    ruleKeys.set(rule, key);
  }
  return key;
}

/**
 * Whether a listing has a rule with this spec (as `specKey` compares them). The listing's keys
 * are computed on the first look and kept with it: a restore CHECKs every allocation against
 * one listing of CNI-FORWARD, which a comparison per rule made quadratic.
 */
export function hasSpec(rules: readonly Rule[], spec: readonly string[]): boolean {
  let keys = specKeys.get(rules);
  if (keys === undefined) {
    keys = new Set(rules.map(ruleKey));
    specKeys.set(rules, keys);
  }
  return keys.has(specKey(spec));
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
  const needles = [allocId, ...chainsOf([allocId], networks).keys()];
  for (const a of addresses) needles.push(`${a}/32`, `${a}/128`);
  return (line) => needles.some((n) => line.includes(n));
}

/**
 * A line filter for the firewall plugin's accept rules (CNI-FORWARD, untagged) about these
 * addresses, and no other rule: what teardown.ts removes before a DEL that has no result to give
 * the firewall plugin.
 */
export function linesFirewallAbout(addresses: readonly string[]): (line: string) => boolean {
  const needles = addresses.flatMap((a) => [` ${a}/32 `, ` ${a}/128 `]);
  return (line) => line.startsWith('-A CNI-FORWARD ') && needles.some((n) => line.includes(n));
}

/** What a read over netlink leaves out (`Iptables.readAt`), as `linesNotAbout` does for a save. */
export interface LeaveOut {
  /** The rule (by its chain, comment and target) is about a known allocation. */
  readonly rule: (
    chain: string,
    comment: string | undefined,
    target: string | undefined,
  ) => boolean;
  /** The known allocations' chains: never read. */
  readonly chains: ReadonlySet<string>;
}

/** `linesNotAbout` for a read over netlink: what belongs to the allocations in `known`. */
export function leaveOutAbout(known: ReadonlySet<string>, networks: readonly string[]): LeaveOut {
  const chains = new Set(chainsOf(known, networks).keys());
  return {
    rule(chain, comment, target) {
      if (chains.has(chain) || (target !== undefined && chains.has(target))) return true;
      const id = parseTag(comment)?.allocId;
      return id !== undefined && known.has(id);
    },
    chains,
  };
}

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
  // Named when the first line comes: a leak scan that reads over netlink never asks
  // (`leaveOutAbout` names them for it), and at 1,000 live they are 1,000 hashes.
  let named: Map<string, string> | undefined;
  return (line) => {
    const chains = (named ??= chainsOf(known, networks));
    if (line.startsWith(':')) return !chains.has(line.slice(1, line.indexOf(' ')));
    if (!line.startsWith('-A ')) return true;
    if (chains.has(line.slice(3, line.indexOf(' ', 3)))) return false;
    const id = SAVED_TAG_ID.exec(line)?.[1];
    if (id !== undefined && known.has(id)) return false;
    const jump = line.lastIndexOf(' -j ');
    return !(jump >= 0 && chains.has(line.slice(jump + 4).split(' ', 1)[0] ?? ''));
  };
}
