// A fake `RouteReader` for unit tests of the native CHECK: the node's links and each sandbox's
// links, addresses and routes as a healthy bridge setup leaves them, which a test then breaks.
import type { CniResult } from '@allocnet/cni';
import type { NamespaceState, RouteReader } from '../route-reader.js';
import type { NetLink } from '../rtnetlink.js';

export interface FakeKernel extends RouteReader {
  /** The node's links by name. */
  readonly host: Map<string, NetLink>;
  /** Each sandbox's state by its path (a path not here does not exist: ENOENT). */
  readonly sandboxes: Map<string, NamespaceState>;
  /** Namespace reads and host lookups, in order (`ns <path>`, `host <names>`). */
  readonly calls: string[];
}

/** The state a healthy bridge ADD of `result` left: bridge, host veth, `ifName` in `netns`. */
export function healthyKernel(result: CniResult, netns: string, ifName = 'eth0'): FakeKernel {
  const [bridge, veth] = result.interfaces.filter((i) => i.sandbox === undefined);
  const inside = result.interfaces.find((i) => i.name === ifName && i.sandbox === netns);
  const link = (index: number, name: string, more: Partial<NetLink> = {}): NetLink => ({
    index,
    name,
    flags: 0x1,
    kind: undefined,
    master: undefined,
    peer: undefined,
    mac: undefined,
    ...more,
  });
  const host = new Map<string, NetLink>();
  if (bridge !== undefined)
    host.set(bridge.name, link(3, bridge.name, { kind: 'bridge', mac: bridge.mac }));
  if (veth !== undefined)
    host.set(veth.name, link(7, veth.name, { kind: 'veth', master: 3, peer: 2, mac: veth.mac }));
  const addresses = result.ips.map((ip) => {
    const [address = '', length = '0'] = ip.address.split('/');
    return {
      index: 2,
      family: address.includes(':') ? ('ipv6' as const) : ('ipv4' as const),
      ip: address,
      prefixLength: Number(length),
    };
  });
  const subnetRoutes = result.ips.map((ip) => {
    const [address = '', length = '0'] = ip.address.split('/');
    const v6 = address.includes(':');
    return {
      family: v6 ? ('ipv6' as const) : ('ipv4' as const),
      table: 254,
      flags: 0,
      // The tests' addresses sit in /20 and /64 subnets whose network the fixture names.
      dst: { ip: v6 ? 'fd00::' : '172.26.64.0', prefixLength: Number(length) },
      gateway: undefined,
    };
  });
  const defaults = result.ips.map((ip) => ({
    family: ip.address.includes(':') ? ('ipv6' as const) : ('ipv4' as const),
    table: 254,
    flags: 0,
    dst: undefined,
    gateway: ip.gateway,
  }));
  const sandboxes = new Map<string, NamespaceState>([
    [
      netns,
      {
        links: [
          link(1, 'lo', { flags: 0x49 }),
          link(2, inside?.name ?? ifName, { kind: 'veth', peer: 7, mac: inside?.mac }),
        ],
        addresses,
        routes: [...subnetRoutes, ...defaults],
      },
    ],
  ]);
  const calls: string[] = [];
  return {
    host,
    sandboxes,
    calls,
    namespace(path) {
      calls.push(`ns ${path}`);
      const state = sandboxes.get(path);
      if (state === undefined)
        return Promise.reject(
          Object.assign(new Error(`ENOENT: no such file or directory, open '${path}'`), {
            code: 'ENOENT',
          }),
        );
      return Promise.resolve(state);
    },
    hostLinks(names) {
      calls.push(`host ${names.join(' ')}`);
      return Promise.resolve(
        new Map(names.flatMap((n) => (host.has(n) ? [[n, host.get(n) as NetLink]] : []))),
      );
    },
  };
}
