import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import type { CniResult } from '@allocnet/cni';
import type { Family } from '@allocnet/iptables-node';
import type { DnsConfig } from './types.js';

export interface PickedAddress {
  readonly interfaceName: string;
  /** First IPv4 address of the interface, without prefix length, or empty. */
  readonly address: string;
  /** First IPv6 address of the interface, without prefix length, or empty. */
  readonly addressIpv6: string;
}

/** The exact message when a result gives no interface an address. */
export const NO_ADDRESS = 'no interface with an address';

function bare(cidr: string): string {
  const slash = cidr.indexOf('/');
  return slash < 0 ? cidr : cidr.slice(0, slash);
}

/**
 * The allocation's address from a CNI result. Interfaces are taken in the order the result lists
 * them: the first one inside the sandbox that has an address wins (its first IPv4 and first
 * IPv6); when none inside the sandbox has one, the first interface with any address. Addresses
 * that name no interface are not considered. Returns undefined when no interface has an address.
 */
export function pickAddress(result: CniResult): PickedAddress | undefined {
  const byInterface = new Map<number, string[]>();
  for (const ip of result.ips) {
    if (ip.interface === undefined) continue;
    const list = byInterface.get(ip.interface) ?? [];
    list.push(bare(ip.address));
    byInterface.set(ip.interface, list);
  }
  const withAddress = result.interfaces
    .map((iface, index) => ({ iface, addresses: byInterface.get(index) ?? [] }))
    .filter((x) => x.addresses.length > 0);
  const chosen = withAddress.find((x) => (x.iface.sandbox ?? '') !== '') ?? withAddress[0];
  if (chosen === undefined) return undefined;
  const kind = (a: string) => (ipaddr.isValid(a) ? ipaddr.parse(a).kind() : undefined);
  return {
    interfaceName: chosen.iface.name,
    address: chosen.addresses.find((a) => kind(a) === 'ipv4') ?? '',
    addressIpv6: chosen.addresses.find((a) => kind(a) === 'ipv6') ?? '',
  };
}

/** Every address of a result, without prefix length, in result order. */
export function resultAddresses(result: CniResult): string[] {
  return [...new Set(result.ips.map((ip) => bare(ip.address)))];
}

/** The result's DNS (its first and only DNS entry), or undefined when it names nothing. */
export function dnsOf(result: CniResult): DnsConfig | undefined {
  const dns = result.dns;
  const servers = dns.nameservers ?? [];
  const searches = dns.search ?? [];
  const options = dns.options ?? [];
  if (servers.length === 0 && searches.length === 0 && options.length === 0) return undefined;
  return { servers: [...servers], searches: [...searches], options: [...options] };
}

/** The family of an address (no prefix length), or undefined when it is not one. */
export function familyOf(address: string): Family | undefined {
  // Node's own check first (native, strict): the spellings iptables and host-local print.
  const version = isIP(address);
  if (version !== 0) return version === 6 ? 'ipv6' : 'ipv4';
  if (!ipaddr.isValid(address)) return undefined;
  return ipaddr.parse(address).kind() === 'ipv6' ? 'ipv6' : 'ipv4';
}
