import { join } from 'node:path';
import ipaddr from 'ipaddr.js';
import type { NetworkConfig } from '@allocnet/cni';
import type { Family } from '@allocnet/iptables-node';
import { HOST_LOCAL_DATA_DIR } from './networks.js';

/** What the configurator needs to know about a network's plugins, read from its config. */
export interface NetworkFacts {
  readonly name: string;
  /** host-local's reservation directory for this network, if it uses host-local. */
  readonly ipamDir: string | undefined;
  readonly subnets: readonly {
    readonly family: Family;
    readonly cidr: [ipaddr.IPv4 | ipaddr.IPv6, number];
  }[];
  readonly families: readonly Family[];
  /**
   * Every address the network gives is IPv4: each IPAM of its plugins is host-local, without the
   * ipRanges capability (ranges a runtime may swap), and every subnet of theirs is IPv4. False
   * when any IPAM is another (dhcp, static: what it gives is not known here).
   */
  readonly ipv4Only: boolean;
  /** The bridge the bridge plugin makes, if any. */
  readonly bridge: string | undefined;
  /** The firewall plugin's admin chain, when it uses the iptables backend. */
  readonly firewallAdminChain: string | undefined;
  /** portmap; `setMarkChain`: it makes CNI-HOSTPORT-SETMARK and -MASQ (snat, no external chain). */
  readonly portmap: { readonly setMarkChain: boolean } | undefined;
}

function record(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

function subnetsOf(ipam: Record<string, unknown>): string[] {
  const found: string[] = [];
  if (typeof ipam.subnet === 'string') found.push(ipam.subnet);
  if (Array.isArray(ipam.ranges)) {
    for (const set of ipam.ranges) {
      if (!Array.isArray(set)) continue;
      for (const range of set) {
        const subnet = record(range)?.subnet;
        if (typeof subnet === 'string') found.push(subnet);
      }
    }
  }
  return found;
}

/** Reads a network's facts; fields a plugin does not set get the plugin's own default. */
export function networkFacts(network: NetworkConfig): NetworkFacts {
  let ipamDir: string | undefined;
  const subnets: NetworkFacts['subnets'][number][] = [];
  let bridge: string | undefined;
  let firewallAdminChain: string | undefined;
  let portmap: NetworkFacts['portmap'];
  let onlyHostLocal = true;
  for (const plugin of network.plugins) {
    const raw = plugin.raw;
    const ipam = record(raw.ipam);
    if (ipam !== undefined) {
      if (ipam.type !== 'host-local' || plugin.capabilities.includes('ipRanges'))
        onlyHostLocal = false;
      if (ipam.type === 'host-local') {
        // host-local takes an empty dataDir as none (its `disk.New`).
        const dataDir =
          typeof ipam.dataDir === 'string' && ipam.dataDir !== ''
            ? ipam.dataDir
            : HOST_LOCAL_DATA_DIR;
        ipamDir = join(dataDir, network.name);
      }
      for (const subnet of subnetsOf(ipam)) {
        try {
          const cidr = ipaddr.parseCIDR(subnet);
          subnets.push({ family: cidr[0].kind() === 'ipv6' ? 'ipv6' : 'ipv4', cidr });
        } catch {
          // The plugin refuses a bad subnet at ADD; there is nothing of it on the host to find.
        }
      }
    }
    if (plugin.type === 'bridge') bridge = typeof raw.bridge === 'string' ? raw.bridge : 'cni0';
    if (plugin.type === 'firewall' && (raw.backend ?? 'iptables') === 'iptables') {
      firewallAdminChain =
        typeof raw.iptablesAdminChainName === 'string' ? raw.iptablesAdminChainName : 'CNI-ADMIN';
    }
    if (plugin.type === 'portmap')
      portmap = {
        setMarkChain: raw.snat !== false && typeof raw.externalSetMarkChain !== 'string',
      };
  }
  const families: Family[] = subnets.some((s) => s.family === 'ipv6')
    ? subnets.some((s) => s.family === 'ipv4')
      ? ['ipv4', 'ipv6']
      : ['ipv6']
    : ['ipv4'];
  const ipv4Only = onlyHostLocal && subnets.length > 0 && subnets.every((s) => s.family === 'ipv4');
  return {
    name: network.name,
    ipamDir,
    subnets,
    families,
    ipv4Only,
    bridge,
    firewallAdminChain,
    portmap,
  };
}

/** True when `address` lies in one of the network's subnets. */
export function inSubnets(facts: NetworkFacts, address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const parsed = ipaddr.parse(address);
  return facts.subnets.some((s) => s.cidr[0].kind() === parsed.kind() && parsed.match(s.cidr));
}
