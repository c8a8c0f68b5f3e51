import { isIPv4 } from 'node:net';

/** The subnet of `NetnsLab.client`'s link when none is given: clear of the CNI ranges the tests use. */
export const DEFAULT_CLIENT_SUBNET = '10.99.0.0/24';

/** The addresses `NetnsLab.client` puts on each end of its veth: `.1` on the node, `.2` on the client. */
export interface ClientLinkAddresses {
  readonly node: string;
  readonly client: string;
}

/** Reads an IPv4 /24 given as its network address (`192.0.2.0/24`); anything else is refused. */
export function clientLinkAddresses(subnet: string): ClientLinkAddresses {
  const match = /^(\d{1,3}\.\d{1,3}\.\d{1,3})\.0\/24$/.exec(subnet);
  const base = match?.[1];
  if (base === undefined || !isIPv4(`${base}.0`)) {
    throw new Error(
      `client subnet ${JSON.stringify(subnet)} is not an IPv4 /24 written as its network address (a.b.c.0/24)`,
    );
  }
  return { node: `${base}.1`, client: `${base}.2` };
}
