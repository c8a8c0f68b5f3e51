// Which rule of a GETRULE dump is exactly one of the two accept rules the firewall plugin writes
// for an address (`-s A/32 -j ACCEPT`, `-d A/32 -m conntrack --ctstate RELATED,ESTABLISHED -j
// ACCEPT`; /128 for IPv6), or the same with the other direction (`-d A/32 -j ACCEPT`): the rule
// read back as iptables-save prints it (nft-rule.ts). Anything else — another match, a comment, a
// mask, another verdict — is not one. Pure: a buffer in.
import { Malformed, readBackRule } from './nft-rule.js';
import type { Family } from './validate.js';

/** One accept rule: its address as iptables prints it, which field, and whether it is the conntrack one. */
export interface AddressAccept {
  readonly address: string;
  readonly direction: 'source' | 'destination';
  readonly established: boolean;
}

const ESTABLISHED = ['-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED'];

/** The accept rule `body` (a GETRULE answer, from its nfgenmsg on) is, or undefined. */
export function addressAcceptOf(body: Buffer, family: Family): AddressAccept | undefined {
  let spec: string[] | undefined;
  try {
    spec = readBackRule(body, family).spec;
  } catch (error) {
    if (error instanceof Malformed) return undefined;
    throw error;
  }
  if (spec === undefined || spec.at(-2) !== '-j' || spec.at(-1) !== 'ACCEPT') return undefined;
  const [flag, cidr, ...rest] = spec.slice(0, -2);
  const [address, bits] = cidr?.split('/') ?? [];
  if (address === undefined || bits !== (family === 'ipv4' ? '32' : '128')) return undefined;
  const direction = flag === '-s' ? 'source' : flag === '-d' ? 'destination' : undefined;
  if (direction === undefined) return undefined;
  if (rest.length === 0) return { address, direction, established: false };
  const established =
    direction === 'destination' &&
    rest.length === ESTABLISHED.length &&
    rest.every((word, i) => word === ESTABLISHED[i]);
  return established ? { address, direction, established } : undefined;
}
