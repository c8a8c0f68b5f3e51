// The native CHECK's pure parts: decoding rtnetlink answers, which plugins it checks, and the
// comparisons against a healthy bridge setup broken one piece at a time (testing/kernel.ts).
import { parseNetworkConfigText } from '@allocnet/cni';
import { splitNative } from './check-plugins.js';
import {
  bridgeProblem,
  loopbackProblem,
  nativePluginOf,
  reservationTexts,
} from './native-check.js';
import type { BridgeState } from './native-check.js';
import { decodeAddress, decodeLink, decodeRoute, request } from './rtnetlink.js';
import { addResult, healthyKernel } from './testing/index.js';

/** A message's payload (after the netlink header) with `body` and `attrs`. */
function payload(body: Buffer, attrs: readonly (readonly [number, Buffer])[]): Buffer {
  return request(0, 0, 0, body, attrs).subarray(16);
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
}

describe('rtnetlink decoding', () => {
  it('reads a veth link: index, name, flags, kind, master, peer and MAC', () => {
    const body = Buffer.alloc(16);
    body.writeInt32LE(7, 4);
    body.writeUInt32LE(0x1103, 8);
    const kind = request(0, 0, 0, Buffer.alloc(0), [[1, Buffer.from('veth\0')]]).subarray(16);
    const link = decodeLink(
      payload(body, [
        [3, Buffer.from('veth0abc\0')],
        [1, Buffer.from([2, 0, 0, 0, 0, 0xab])],
        [10, u32(3)],
        [5, u32(2)],
        [18 | 0x8000, kind],
      ]),
    );
    expect(link).toEqual({
      index: 7,
      name: 'veth0abc',
      flags: 0x1103,
      kind: 'veth',
      master: 3,
      peer: 2,
      mac: '02:00:00:00:00:ab',
    });
  });

  it('reads IPv4 and IPv6 addresses as the plugins do, a peer address with a full prefix', () => {
    const v4 = Buffer.from([2, 20, 0, 0, 2, 0, 0, 0]);
    const ip = Buffer.from([172, 26, 64, 2]);
    expect(
      decodeAddress(
        payload(v4, [
          [1, ip],
          [2, ip],
        ]),
      ),
    ).toEqual({
      index: 2,
      family: 'ipv4',
      ip: '172.26.64.2',
      prefixLength: 20,
    });
    expect(
      decodeAddress(
        payload(v4, [
          [1, Buffer.from([10, 0, 0, 1])],
          [2, ip],
        ]),
      ),
    ).toEqual({
      index: 2,
      family: 'ipv4',
      ip: '172.26.64.2',
      prefixLength: 32,
    });
    const v6 = Buffer.from([10, 64, 0, 0, 2, 0, 0, 0]);
    const ip6 = Buffer.alloc(16);
    ip6[0] = 0xfd;
    ip6[15] = 2;
    expect(decodeAddress(payload(v6, [[1, ip6]]))).toEqual({
      index: 2,
      family: 'ipv6',
      ip: 'fd00::2',
      prefixLength: 64,
    });
    expect(decodeAddress(payload(Buffer.from([17, 0, 0, 0, 2, 0, 0, 0]), []))).toBeUndefined();
  });

  it('reads routes: table, flags, destination (none for a default route) and gateway', () => {
    const main = Buffer.from([2, 0, 0, 0, 254, 3, 0, 1, 0, 0, 0, 0]);
    expect(decodeRoute(payload(main, [[5, Buffer.from([172, 26, 64, 1])]]))).toEqual({
      family: 'ipv4',
      table: 254,
      flags: 0,
      dst: undefined,
      gateway: '172.26.64.1',
    });
    const subnet = Buffer.from([2, 20, 0, 0, 254, 2, 253, 1, 0, 2, 0, 0]);
    expect(decodeRoute(payload(subnet, [[1, Buffer.from([172, 26, 64, 0])]]))).toEqual({
      family: 'ipv4',
      table: 254,
      flags: 0x200,
      dst: { ip: '172.26.64.0', prefixLength: 20 },
      gateway: undefined,
    });
  });
});

const NETNS = '/run/netns/a1';
const { result } = addResult('172.26.64.2/20', { sandbox: NETNS });
const plugin = { type: 'bridge', bridge: 'nomad', promiscMode: false, ipamDir: '/x' } as const;

function healthy(): BridgeState {
  const kernel = healthyKernel(result, NETNS);
  const sandbox = kernel.sandboxes.get(NETNS);
  if (sandbox === undefined) throw new Error('no sandbox');
  return { plugin, result, netns: NETNS, ifName: 'eth0', host: kernel.host, sandbox };
}

describe('bridgeProblem', () => {
  it('finds nothing wrong with a healthy setup', () => {
    expect(bridgeProblem(healthy())).toBeUndefined();
    expect(loopbackProblem(healthy().sandbox)).toBeUndefined();
  });

  it('names each thing bridge’s CHECK verifies when it is broken', () => {
    const h = healthy();
    const host = (name: string, change: object) =>
      new Map([...h.host].map(([n, l]) => [n, n === name ? { ...l, ...change } : l]));
    const without = (name: string) => new Map([...h.host].filter(([n]) => n !== name));
    const sandbox = (change: object) => ({ ...h, sandbox: { ...h.sandbox, ...change } });
    const cases: [BridgeState, string][] = [
      [{ ...h, host: without('nomad') }, 'interface "nomad" is not there on the node'],
      [{ ...h, host: host('nomad', { kind: 'dummy' }) }, 'interface "nomad" is not a bridge'],
      [
        { ...h, host: host('nomad', { mac: '02:00:00:00:00:99' }) },
        'interface "nomad" has MAC 02:00:00:00:00:99, the result says 02:00:00:00:00:01',
      ],
      [
        { ...h, host: host('nomad', { flags: 0x101 }) },
        'bridge "nomad" is in promiscuous mode, its config says promiscMode false',
      ],
      [{ ...h, host: without('veth0abc') }, 'interface "veth0abc" is not there on the node'],
      [
        { ...h, host: host('veth0abc', { master: undefined }) },
        'no veth of the result on the node is the peer of "eth0" enslaved to bridge "nomad"',
      ],
      [
        { ...h, netns: '/run/netns/other' },
        'the result has no interface "eth0" in the sandbox "/run/netns/other"',
      ],
      [
        sandbox({ links: h.sandbox.links.filter((l) => l.name !== 'eth0') }),
        'interface "eth0" is not there in the sandbox',
      ],
      [sandbox({ addresses: [] }), 'address 172.26.64.2/20 is not on "eth0" in the sandbox'],
      [
        sandbox({ addresses: h.sandbox.addresses.map((a) => ({ ...a, prefixLength: 24 })) }),
        'address 172.26.64.2/20 is not on "eth0" in the sandbox',
      ],
      [
        sandbox({ routes: h.sandbox.routes.filter((r) => r.dst === undefined) }),
        'the sandbox has no route to 172.26.64.0/20 (the subnet of 172.26.64.2/20)',
      ],
      [
        sandbox({ routes: h.sandbox.routes.map((r) => ({ ...r, table: 100 })) }),
        'the sandbox has no route to 172.26.64.0/20 (the subnet of 172.26.64.2/20)',
      ],
      [
        sandbox({ routes: h.sandbox.routes.filter((r) => r.dst !== undefined) }),
        'the sandbox has no route to 0.0.0.0/0',
      ],
    ];
    for (const [state, problem] of cases) expect(bridgeProblem(state)).toBe(`bridge: ${problem}`);
  });

  it('takes any default route of the family, whatever its gateway (as the plugin does)', () => {
    const h = healthy();
    const routes = h.sandbox.routes.map((r) =>
      r.dst === undefined ? { ...r, gateway: '172.26.64.9' } : r,
    );
    expect(bridgeProblem({ ...h, sandbox: { ...h.sandbox, routes } })).toBeUndefined();
  });

  it('says when lo is down or gone', () => {
    const { sandbox } = healthy();
    const down = sandbox.links.map((l) => (l.name === 'lo' ? { ...l, flags: 0 } : l));
    expect(loopbackProblem({ ...sandbox, links: down })).toBe(
      'loopback: interface "lo" is down in the sandbox',
    );
    expect(loopbackProblem({ ...sandbox, links: [] })).toBe(
      'loopback: the sandbox has no interface "lo"',
    );
  });

  it('reads host-local’s reservation as its FindByID does', () => {
    expect(reservationTexts(' 6b23 ', 'eth0')).toEqual(['6b23\r\neth0', '6b23']);
  });
});

describe('which plugins are checked natively', () => {
  const chain = (plugins: object[], cniVersion = '1.0.0') =>
    parseNetworkConfigText(JSON.stringify({ cniVersion, name: 'n', plugins }), 'test');
  const loopback = { type: 'loopback' };
  const bridge = {
    type: 'bridge',
    bridge: 'br0',
    ipMasq: true,
    ipam: { type: 'host-local', subnet: '10.0.0.0/24', dataDir: '/d' },
  };

  it('takes loopback and bridge with host-local whose keys it knows, and keeps the rest', () => {
    const split = splitNative(chain([loopback, bridge, { type: 'tuning' }]), []);
    expect(split.native).toEqual([
      { type: 'loopback' },
      { type: 'bridge', bridge: 'br0', promiscMode: false, ipamDir: '/d/n' },
    ]);
    expect(split.chain?.plugins.map((p) => p.type)).toEqual(['tuning']);
    expect(splitNative(chain([loopback, bridge]), []).chain).toBeUndefined();
  });

  it('leaves to the plugin an unknown key, another IPAM, an old version or CNI_ARGS IP', () => {
    const n = chain([loopback]);
    const of = (raw: object) =>
      nativePluginOf(
        {
          type: (raw as { type: string }).type,
          capabilities: [],
          raw: raw as Record<string, unknown>,
        },
        n,
      );
    expect(of({ ...loopback, extra: 1 })).toBeUndefined();
    expect(of({ ...bridge, vlan: 2 })).toBeUndefined();
    expect(of({ ...bridge, ipam: { type: 'dhcp' } })).toBeUndefined();
    expect(of({ ...bridge, ipam: { ...bridge.ipam, resolvConf: '/etc/r' } })).toBeUndefined();
    expect(of({ ...bridge, promiscMode: 'yes' })).toBeUndefined();
    expect(of({ type: 'ptp', ipam: bridge.ipam })).toBeUndefined();
    expect(of({ type: 'bridge', ipam: { type: 'host-local' } })).toEqual({
      type: 'bridge',
      bridge: 'cni0',
      promiscMode: false,
      ipamDir: '/var/lib/cni/networks/n',
    });
    expect(splitNative(chain([loopback, bridge], '0.3.1'), []).native).toEqual([]);
    expect(splitNative(chain([loopback, bridge]), [['IP', '10.0.0.5']]).native).toEqual([]);
  });
});
