import ipaddr from 'ipaddr.js';
import { parseNetworkConfigText } from '@allocnet/cni';
import type { NetworkConfig } from '@allocnet/cni';
import type { Family, Rule } from '@allocnet/iptables-node';
import { allocChains, familyOf, firewallSpecs } from './sweep.js';
import type { ReadChain } from './chain-reader.js';
import type { AllocAttachment } from './types.js';

const FAMILIES = ['ipv4', 'ipv6'] as const;

function option(rule: Rule, name: string): string | undefined {
  return rule.matches.flatMap((m) => m.options).find((o) => o.option === name)?.values[0];
}

function addressesOf(attachment: AllocAttachment, family: Family): string[] {
  return attachment.addresses.filter((a) => familyOf(a) === family);
}

/**
 * Checks portmap's rules for an allocation against iptables (portmap's own CHECK is broken in
 * 1.1.1): per address family the allocation has, the `CNI-DN-<h>` chain, a jump to it from
 * CNI-HOSTPORT-DNAT, and a DNAT rule per mapping to the allocation's address. Returns what is
 * wrong, or undefined.
 */
export async function checkPortMappings(
  attachment: AllocAttachment,
  read: ReadChain,
  call: { readonly signal?: AbortSignal },
): Promise<string | undefined> {
  if (attachment.portMappings.length === 0) return undefined;
  const { dnat } = allocChains(attachment.network.name, attachment.allocId);
  for (const family of FAMILIES) {
    const address = addressesOf(attachment, family)[0];
    if (address === undefined) continue;
    const mappings = attachment.portMappings.filter(
      (m) => m.hostIP === undefined || familyOf(m.hostIP) === family,
    );
    if (mappings.length === 0) continue;
    const [rules, jumps] = await Promise.all([
      read(family, 'nat', dnat, call),
      read(family, 'nat', 'CNI-HOSTPORT-DNAT', call),
    ]);
    if (rules === undefined) return `portmap's chain ${dnat} is missing (${family})`;
    if (!(jumps ?? []).some((r) => r.target?.name === dnat))
      return `nothing in CNI-HOSTPORT-DNAT jumps to ${dnat} (${family})`;
    for (const m of mappings) {
      const to =
        family === 'ipv4' ? `${address}:${m.containerPort}` : `[${address}]:${m.containerPort}`;
      const found = rules.some(
        (r) =>
          r.target?.name === 'DNAT' &&
          r.target.options.find((o) => o.option === '--to-destination')?.values[0] === to &&
          option(r, '--dport') === String(m.hostPort) &&
          option(r, '-p') === m.protocol,
      );
      if (!found)
        return `no DNAT rule for host port ${m.hostPort}/${m.protocol} to ${to} in ${dnat} (${family})`;
    }
  }
  return undefined;
}

/** The jump the firewall plugin (iptables backend) puts first in FORWARD. */
const FORWARD_JUMP = [
  '-m',
  'comment',
  '--comment',
  'CNI firewall plugin rules',
  '-j',
  'CNI-FORWARD',
];

function adminJump(adminChain: string): string[] {
  return ['-m', 'comment', '--comment', 'CNI firewall plugin admin overrides', '-j', adminChain];
}

/** Same argv, an address compared as an address (`fd00::2/128` however it is written). */
export function sameSpec(found: readonly string[], wanted: readonly string[]): boolean {
  return (
    found.length === wanted.length &&
    found.every((word, i) => {
      const other = wanted[i] as string;
      if (word === other) return true;
      try {
        const [a, b] = [ipaddr.parseCIDR(word), ipaddr.parseCIDR(other)];
        return a[1] === b[1] && a[0].kind() === b[0].kind() && a[0].toString() === b[0].toString();
      } catch {
        return false;
      }
    })
  );
}

/**
 * Checks the firewall plugin's iptables rules for an allocation, the facts its own CHECK
 * (1.1.1, iptables backend) verifies: per address family the allocation has, the CNI-FORWARD and
 * admin chains, FORWARD's jump to CNI-FORWARD, CNI-FORWARD's jump to the admin chain, and the two
 * accept rules per address. Unlike the plugin's CHECK, a missing chain is reported, not created.
 * Returns what is wrong, or undefined.
 */
export async function checkFirewall(
  attachment: AllocAttachment,
  adminChain: string,
  read: ReadChain,
  call: { readonly signal?: AbortSignal },
): Promise<string | undefined> {
  const forward = 'CNI-FORWARD';
  for (const family of FAMILIES) {
    const addresses = addressesOf(attachment, family);
    if (addresses.length === 0) continue;
    const chains = ['FORWARD', forward, adminChain];
    const listed = await Promise.all(chains.map((c) => read(family, 'filter', c, call)));
    const rules = new Map(chains.map((c, i) => [c, listed[i]]));
    for (const chain of chains)
      if (rules.get(chain) === undefined)
        return `the firewall's chain ${chain} is missing (${family})`;
    const rulesOf = (chain: string) => rules.get(chain) ?? [];
    const expect: [string, readonly string[]][] = [
      ['FORWARD', FORWARD_JUMP],
      [forward, adminJump(adminChain)],
      ...addresses.flatMap((a) =>
        firewallSpecs(a, family).map((spec): [string, string[]] => [forward, spec]),
      ),
    ];
    for (const [chain, spec] of expect)
      if (!rulesOf(chain).some((r) => sameSpec(r.spec, spec)))
        return `a firewall rule is missing (${family}): -A ${chain} ${spec.map((w) => (/\s/.test(w) ? JSON.stringify(w) : w)).join(' ')}`;
  }
  return undefined;
}

/** A plugin of the chain whose CHECK the configurator does itself. */
export type CheckedHere =
  { readonly type: 'portmap' } | { readonly type: 'firewall'; readonly adminChain: string };

/**
 * The chain CHECK runs (the network without the plugins checked here) and those plugins: portmap
 * always; the firewall when it uses the iptables backend (named: with no backend it may pick
 * firewalld) and no ingress policy beyond the default `open` (whose isolation chains its CHECK
 * does not look at either, but which this code does not know).
 */
export function checkChainOf(network: NetworkConfig): {
  readonly chain: NetworkConfig;
  readonly checkedHere: readonly CheckedHere[];
} {
  const checkedHere: CheckedHere[] = [];
  const kept = network.plugins.filter((p) => {
    if (p.type === 'portmap') {
      checkedHere.push({ type: 'portmap' });
      return false;
    }
    const ingress = p.raw.ingressPolicy;
    if (
      p.type === 'firewall' &&
      p.raw.backend === 'iptables' &&
      (ingress === undefined || ingress === '' || ingress === 'open')
    ) {
      const admin = p.raw.iptablesAdminChainName;
      checkedHere.push({
        type: 'firewall',
        adminChain: typeof admin === 'string' && admin !== '' ? admin : 'CNI-ADMIN',
      });
      return false;
    }
    return true;
  });
  if (checkedHere.length === 0) return { chain: network, checkedHere };
  const chain = parseNetworkConfigText(
    JSON.stringify({
      ...(JSON.parse(network.bytes) as Record<string, unknown>),
      plugins: kept.map((p) => p.raw),
    }),
    network.source,
  );
  return { chain, checkedHere };
}
