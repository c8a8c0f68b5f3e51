// Which of a network's firewall and portmap plugins a setup writes itself (native-add.ts), and
// what they write, as Debian's plugins 1.1.1 write it (plugins/meta/firewall/iptables.go,
// plugins/meta/portmap/{portmap.go,chain.go,main.go}; docs/cni.md, "What a setup and a teardown
// do themselves"). Pure: no I/O.
//
// The decision is an allow-list: a plugin's configuration is decoded with io-ts against the keys
// and values this code knows, and anything else — a key it does not know, firewalld or no
// `backend` (the plugin then picks firewalld when it runs), an `ingressPolicy` other than open,
// portmap's `conditionsV4`/`conditionsV6`, `externalSetMarkChain`, `masqAll` — leaves that plugin
// to run itself, as before. So a key a later plugin version adds falls back by itself.
//
// Every spec here is written the way iptables-save prints it (`-s` and `-d` first, then `-p`, the
// protocol's own match, the others in the plugin's order, the target): iptables-restore makes of
// it the rule the plugin's argv makes, and CHECK (check.ts) compares listings with the same specs.
import { isRight } from 'fp-ts/lib/Either.js';
import * as t from 'io-ts';
import ipaddr from 'ipaddr.js';
import type { CniResult, NetworkConfig, PluginConfig } from '@allocnet/cni';
import type { Family, Table } from '@allocnet/iptables-node';
import { allocChains } from './marks.js';
import type { PortMapping } from './types.js';

/** The firewall plugin, iptables backend, written natively. */
export interface NativeFirewall {
  readonly adminChain: string;
}

/** The portmap plugin written natively: its `snat` and mark bit (defaults true and 13). */
export interface NativePortmap {
  readonly snat: boolean;
  readonly markBit: number;
}

/** What a network's chain leaves to the setup to write: each plugin, or why it runs itself. */
export interface NativePlugins {
  readonly firewall?: NativeFirewall;
  readonly portmap?: NativePortmap;
  /** Plugins that run themselves, each with the reason (a field path and what is wrong). */
  readonly fallbacks: readonly { readonly type: string; readonly reason: string }[];
}

/** A rule one of the plugins keeps once in a chain every allocation shares. */
export interface SharedRule {
  readonly family: Family;
  readonly table: Table;
  readonly chain: string;
  readonly spec: readonly string[];
  /** Inserted at the head of its chain (when missing), as the plugin does; else appended. */
  readonly first: boolean;
}

/** Keys every plugin object may carry, which the runtime handles (stdin is made without them). */
const COMMON = { type: t.string, cniVersion: t.string, name: t.string };
const Capabilities = t.record(t.string, t.boolean);

/** A chain name an admin chain may have: not a built-in, not the firewall's own. */
const ADMIN_CHAIN = /^[A-Za-z][A-Za-z0-9_-]{0,27}$/;
const RESERVED_CHAINS = new Set(['INPUT', 'OUTPUT', 'FORWARD', 'PREROUTING', 'POSTROUTING']);

const FirewallConf = t.intersection([
  t.type({ backend: t.literal('iptables') }),
  t.partial({
    ...COMMON,
    capabilities: Capabilities,
    iptablesAdminChainName: t.string,
    ingressPolicy: t.union([t.literal(''), t.literal('open')]),
    // Only the firewalld backend reads it.
    firewalldZone: t.string,
  }),
]);
const FIREWALL_KEYS = new Set([
  ...Object.keys(COMMON),
  'backend',
  'capabilities',
  'iptablesAdminChainName',
  'ingressPolicy',
  'firewalldZone',
]);

const MarkBit = t.refinement(t.Int, (n) => n >= 0 && n <= 31, 'a whole number 0–31');
const PortmapConf = t.intersection([
  t.type({
    capabilities: t.intersection([Capabilities, t.type({ portMappings: t.literal(true) })]),
  }),
  t.partial({ ...COMMON, snat: t.boolean, markMasqBit: MarkBit }),
]);
const PORTMAP_KEYS = new Set([...Object.keys(COMMON), 'capabilities', 'snat', 'markMasqBit']);

/** Why `raw` is not for the native path: the first field not allowed or not as decoded, else undefined. */
function refusal(raw: Readonly<Record<string, unknown>>, type: t.Mixed, keys: ReadonlySet<string>) {
  const unknown = Object.keys(raw).find((k) => !keys.has(k));
  if (unknown !== undefined) return `${unknown}: not known to the native path`;
  const decoded = type.decode(raw);
  if (isRight(decoded)) return undefined;
  const [first] = decoded.left;
  const path = (first?.context ?? [])
    .map((c) => c.key)
    .filter((k) => k !== '' && !/^\d+$/.test(k))
    .join('.');
  return `${path === '' ? 'config' : path}: ${JSON.stringify(first?.value)} is not what the native path writes`;
}

function firewallOf(p: PluginConfig): NativeFirewall | string {
  const why = refusal(p.raw, FirewallConf, FIREWALL_KEYS);
  if (why !== undefined) return why;
  const name = p.raw.iptablesAdminChainName;
  const adminChain = typeof name === 'string' && name !== '' ? name : 'CNI-ADMIN';
  if (
    !ADMIN_CHAIN.test(adminChain) ||
    RESERVED_CHAINS.has(adminChain) ||
    adminChain === 'CNI-FORWARD'
  )
    return `iptablesAdminChainName: ${JSON.stringify(adminChain)} is not an admin chain the native path expects`;
  return { adminChain };
}

function portmapOf(p: PluginConfig): NativePortmap | string {
  const why = refusal(p.raw, PortmapConf, PORTMAP_KEYS);
  if (why !== undefined) return why;
  const { snat, markMasqBit } = p.raw;
  return {
    snat: typeof snat === 'boolean' ? snat : true,
    markBit: typeof markMasqBit === 'number' ? markMasqBit : 13,
  };
}

/** The versions the firewall plugin speaks: a chain without it negotiates the same one. */
const FIREWALL_VERSIONS = new Set(['0.4.0', '1.0.0']);

/**
 * Which of `network`'s firewall and portmap plugins the setup writes itself: each at most once,
 * right after the main plugin (bridge or ptp) or after the other one, so that the result it
 * would get is the main plugin's.
 */
export function nativePlugins(network: NetworkConfig): NativePlugins {
  const fallbacks: { type: string; reason: string }[] = [];
  const out: { firewall?: NativeFirewall; portmap?: NativePortmap } = {};
  const main = network.plugins.findIndex((p) => p.type === 'bridge' || p.type === 'ptp');
  const once = (type: string) => network.plugins.filter((p) => p.type === type).length === 1;
  network.plugins.forEach((p, i) => {
    if (p.type !== 'firewall' && p.type !== 'portmap') return;
    const between = network.plugins.slice(main + 1, i);
    let verdict: NativeFirewall | NativePortmap | string;
    if (main < 0 || i < main) verdict = 'the chain has no bridge or ptp before it';
    else if (!once(p.type)) verdict = `the chain has more than one ${p.type}`;
    else if (between.some((b) => b.type !== 'firewall' && b.type !== 'portmap'))
      verdict = `plugin ${JSON.stringify(between.find((b) => b.type !== 'firewall' && b.type !== 'portmap')?.type)} runs between it and the main plugin`;
    else if (p.type === 'firewall') {
      const versions = [
        ...(network.cniVersion === undefined ? [] : [network.cniVersion]),
        ...network.cniVersions,
      ];
      verdict = versions.every((v) => FIREWALL_VERSIONS.has(v))
        ? firewallOf(p)
        : `cniVersion: the network offers ${versions.join(', ')}; the firewall speaks 0.4.0 and 1.0.0`;
    } else verdict = portmapOf(p);
    if (typeof verdict === 'string') fallbacks.push({ type: p.type, reason: verdict });
    else if (p.type === 'firewall') out.firewall = verdict as NativeFirewall;
    else out.portmap = verdict as NativePortmap;
  });
  return { ...out, fallbacks };
}

/** The jump the firewall puts first in FORWARD, and the one to the admin chain first in CNI-FORWARD. */
export function firewallSharedRules(family: Family, adminChain: string): SharedRule[] {
  const jump = (comment: string, to: string) => ['-m', 'comment', '--comment', comment, '-j', to];
  return [
    {
      family,
      table: 'filter',
      chain: 'FORWARD',
      spec: jump('CNI firewall plugin rules', 'CNI-FORWARD'),
      first: true,
    },
    {
      family,
      table: 'filter',
      chain: 'CNI-FORWARD',
      spec: jump('CNI firewall plugin admin overrides', adminChain),
      first: true,
    },
  ];
}

/** portmap's chain names, shared by every allocation. */
export const HOSTPORT = {
  dnat: 'CNI-HOSTPORT-DNAT',
  setMark: 'CNI-HOSTPORT-SETMARK',
  masq: 'CNI-HOSTPORT-MASQ',
} as const;

/**
 * portmap's rules in its shared chains: with snat, the mark rule in CNI-HOSTPORT-SETMARK, the
 * masquerade of marked packets in CNI-HOSTPORT-MASQ and the jump to it first in POSTROUTING; then
 * PREROUTING's and OUTPUT's jumps to CNI-HOSTPORT-DNAT for local destinations.
 */
export function portmapSharedRules(family: Family, conf: NativePortmap): SharedRule[] {
  const mark = `0x${(2 ** conf.markBit).toString(16)}`;
  const markDef = `${mark}/${mark}`;
  const nat = (chain: string, spec: string[], first = false): SharedRule => ({
    family,
    table: 'nat',
    chain,
    spec,
    first,
  });
  const toDnat = ['-m', 'addrtype', '--dst-type', 'LOCAL', '-j', HOSTPORT.dnat];
  return [
    ...(conf.snat
      ? [
          nat(HOSTPORT.setMark, [
            '-m',
            'comment',
            '--comment',
            'CNI portfwd masquerade mark',
            '-j',
            'MARK',
            '--set-xmark',
            markDef,
          ]),
          nat(HOSTPORT.masq, ['-m', 'mark', '--mark', markDef, '-j', 'MASQUERADE']),
          nat(
            'POSTROUTING',
            ['-m', 'comment', '--comment', 'CNI portfwd requiring masquerade', '-j', HOSTPORT.masq],
            true,
          ),
        ]
      : []),
    nat('PREROUTING', toDnat),
    nat('OUTPUT', toDnat),
  ];
}

/**
 * The container addresses portmap forwards to, `<ip>/<prefix>`, one per family: the first of
 * each family in the result, skipping those whose interface is not `ifName` in a sandbox.
 */
export function portmapAddresses(result: CniResult, ifName: string): Map<Family, string> {
  const found = new Map<Family, string>();
  for (const ip of result.ips) {
    const [host = ''] = ip.address.split('/');
    if (!ipaddr.isValid(host)) continue;
    const family: Family = ipaddr.parse(host).kind() === 'ipv6' ? 'ipv6' : 'ipv4';
    if (found.has(family)) continue;
    const intf = ip.interface === undefined ? undefined : result.interfaces[ip.interface];
    if (intf !== undefined && (intf.name !== ifName || (intf.sandbox ?? '') === '')) continue;
    found.set(family, ip.address);
  }
  return found;
}

/** What portmap writes for one family of an allocation: its chain's rules and the jumps to it. */
export interface PortmapWrite {
  readonly chain: string;
  readonly rules: readonly (readonly string[])[];
  /** CNI-HOSTPORT-DNAT's jumps to the chain, per protocol and 15 ports. */
  readonly entries: readonly (readonly string[])[];
}

/**
 * portmap's tag on its jumps, `dnat name: "<net>" id: "<id>"`; undefined past the 255 bytes at
 * which the plugin cuts it (its own ADD then runs).
 */
export function dnatComment(network: string, allocId: string): string | undefined {
  const comment = `dnat name: "${network}" id: "${allocId}"`;
  return Buffer.byteLength(comment) > 255 ? undefined : comment;
}

/** `<ip>/<prefix>` as its network, the way iptables prints a masked address. */
function networkOf(address: string): string {
  const [ip, prefix] = ipaddr.parseCIDR(address);
  const net =
    ip.kind() === 'ipv6'
      ? ipaddr.IPv6.networkAddressFromCIDR(address)
      : ipaddr.IPv4.networkAddressFromCIDR(address);
  return `${net.toString()}/${prefix}`;
}

const hostBits = (family: Family) => (family === 'ipv4' ? 32 : 128);

/**
 * portmap's rules for one family of an allocation whose address in it is `address`
 * (`<ip>/<prefix>`): per mapping of that family (a host IP of the other family skips it), with
 * snat the hairpin mark rule and (IPv4) the localhost one, then the DNAT; and per protocol, in
 * sorted order, the jumps from CNI-HOSTPORT-DNAT with every mapping's host port, 15 a rule.
 */
export function portmapWrite(
  network: string,
  allocId: string,
  mappings: readonly PortMapping[],
  address: string,
  conf: NativePortmap,
): PortmapWrite {
  const chain = allocChains(network, allocId).dnat;
  const [ip = ''] = address.split('/');
  const family: Family = ipaddr.parse(ip).kind() === 'ipv6' ? 'ipv6' : 'ipv4';
  const comment = dnatComment(network, allocId) ?? '';
  const byProto = new Map<string, number[]>();
  for (const m of mappings)
    byProto.set(m.protocol, [...(byProto.get(m.protocol) ?? []), m.hostPort]);
  const entries: string[][] = [];
  for (const proto of [...byProto.keys()].sort())
    for (let i = 0, ports = byProto.get(proto) ?? []; i < ports.length; i += 15)
      entries.push([
        '-p',
        proto,
        '-m',
        'comment',
        '--comment',
        comment,
        '-m',
        'multiport',
        '--dports',
        ports.slice(i, i + 15).join(','),
        '-j',
        chain,
      ]);
  const rules: string[][] = [];
  for (const m of mappings) {
    let dst: string[] = [];
    if (m.hostIP !== undefined && m.hostIP !== '') {
      // An address portmap cannot parse is refused before (ports.ts); IPv4-mapped is IPv4, as Go reads it.
      if (!ipaddr.isValid(m.hostIP)) continue;
      const host = ipaddr.process(m.hostIP);
      if ((host.kind() === 'ipv6') !== (family === 'ipv6')) continue;
      if (host.range() !== 'unspecified') dst = ['-d', `${host.toString()}/${hostBits(family)}`];
    }
    const match = ['-p', m.protocol, '-m', m.protocol, '--dport', String(m.hostPort)];
    if (conf.snat) {
      rules.push(['-s', networkOf(address), ...dst, ...match, '-j', HOSTPORT.setMark]);
      if (family === 'ipv4')
        rules.push(['-s', '127.0.0.1/32', ...dst, ...match, '-j', HOSTPORT.setMark]);
    }
    const to = family === 'ipv4' ? `${ip}:${m.containerPort}` : `[${ip}]:${m.containerPort}`;
    rules.push([...dst, ...match, '-j', 'DNAT', '--to-destination', to]);
  }
  return { chain, rules, entries };
}
