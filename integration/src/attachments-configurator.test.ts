// Several networks in one allocation namespace through @allocnet/cni-configurator alone, on the
// real Debian plugins (issue 29): the primary (the default bridge network, with a host port), a
// macvlan secondary (host-local asked for an address through the `ips` capability, tuning setting
// a MAC through the `mac` capability) and a second bridge (its own bridge and subnet, an address
// asked through host-local's `args.cni.ips`, its own masquerade). A node namespace stands for the
// host; the macvlan's master is a veth whose peer is a client namespace on that segment; another
// client is plugged into the second bridge. Needs root and containernetworking-plugins.
import { readdir, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createCniCache, createCniRuntime, createNodePluginExec } from '@allocnet/cni';
import { createCniConfigurator, createRouteReader } from '@allocnet/cni-configurator';
import type { AllocNetworkSpec, CniConfigurator } from '@allocnet/cni-configurator';
import { createIptables } from '@allocnet/iptables-node';
import { echo, requireNetworkTestHost, startEchoServer } from '@allocnet/testns';
import type { TestNetns } from '@allocnet/testns';
import { labPerTest } from './fixtures/lab-per-test.js';

const PLUGIN_DIR = '/usr/lib/cni';
const ALLOC = '00000000-0000-4000-8000-0000000a29c1';
const identity = { allocId: ALLOC, namespace: 'default', jobId: 'web', groupName: 'g' };

const t = labPerTest({ node: true });

beforeAll(async () => {
  await requireNetworkTestHost(
    ['ip', 'iptables', 'nsenter', 'ping'].concat(
      ['bridge', 'macvlan', 'tuning', 'host-local'].map((p) => `${PLUGIN_DIR}/${p}`),
    ),
  );
});

/** The two secondary networks' conflists, as an operator writes them. */
async function writeNetworks(): Promise<void> {
  const conf = join(t.tmp.path, 'conf');
  await mkdir(conf, { recursive: true });
  /** host-local on `subnet` from `start` to `end`, and on the whole of each of `more`. */
  const hostLocal = (subnet: string, start: string, end: string, more: string[] = []) => ({
    type: 'host-local',
    dataDir: join(t.tmp.path, 'ipam'),
    ranges: [[{ subnet, rangeStart: start, rangeEnd: end }], ...more.map((m) => [{ subnet: m }])],
    routes: [{ dst: '0.0.0.0/0' }, { dst: '::/0' }],
  });
  const vlan = {
    cniVersion: '1.0.0',
    name: 'vlan',
    plugins: [
      {
        type: 'macvlan',
        master: 'vl0',
        mode: 'bridge',
        capabilities: { ips: true },
        ipam: hostLocal('10.88.0.0/24', '10.88.0.10', '10.88.0.100', ['fd88::/64']),
      },
      { type: 'tuning', capabilities: { mac: true } },
    ],
  };
  const storage = {
    cniVersion: '1.0.0',
    name: 'storage',
    plugins: [
      {
        type: 'bridge',
        bridge: 'storage0',
        isGateway: true,
        ipMasq: true,
        ipam: hostLocal('10.77.0.0/24', '10.77.0.10', '10.77.0.100'),
      },
    ],
  };
  await writeFile(join(conf, 'vlan.conflist'), JSON.stringify(vlan));
  await writeFile(join(conf, 'storage.conflist'), JSON.stringify(storage));
}

async function make(): Promise<CniConfigurator> {
  await writeNetworks();
  t.configurator = await createCniConfigurator({
    runtime: createCniRuntime({
      pluginDirs: [PLUGIN_DIR],
      cacheDir: join(t.tmp.path, 'cache'),
      exec: createNodePluginExec({ netns: t.node.name }),
    }),
    // The bridge and the host veths are in the node namespace: CHECK reads them there.
    routeReader: createRouteReader({ netns: t.node.path }),
    iptables: {
      ipv4: createIptables({ netns: t.node.path }),
      ipv6: createIptables({ family: 'ipv6', netns: t.node.path }),
    },
    defaultNetwork: { ipamDataDir: join(t.tmp.path, 'ipam') },
    confDir: join(t.tmp.path, 'conf'),
    watchConfDir: false,
  });
  return t.configurator;
}

/** host-local's reservation files under the test's IPAM dir, as `network/address`. */
async function reservations(): Promise<string[]> {
  const root = join(t.tmp.path, 'ipam');
  const found: string[] = [];
  let networks: string[];
  try {
    networks = await readdir(root);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  for (const net of networks)
    for (const file of await readdir(join(root, net)))
      if (file !== 'lock' && !file.startsWith('last_reserved_ip')) found.push(`${net}/${file}`);
  return found.sort();
}

interface IpAddr {
  readonly ifname: string;
  readonly address: string;
  readonly addr_info: readonly {
    family: string;
    local: string;
    prefixlen: number;
    scope: string;
  }[];
}

/** `ip -j addr` inside `ns`: each interface's MAC and global addresses. */
async function addressesIn(ns: TestNetns): Promise<Record<string, { mac: string; ips: string[] }>> {
  const links = JSON.parse((await ns.exec(['ip', '-j', 'addr'])).stdout) as IpAddr[];
  return Object.fromEntries(
    links.map((l) => [
      l.ifname,
      {
        mac: l.address,
        ips: l.addr_info
          .filter((a) => a.scope === 'global')
          .map((a) => `${a.local}/${a.prefixlen}`),
      },
    ]),
  );
}

/** The default routes inside `ns`, both families, as `dev via gateway`. */
async function defaultRoutes(ns: TestNetns): Promise<string[]> {
  const found: string[] = [];
  for (const family of ['-4', '-6']) {
    const routes = JSON.parse(
      (await ns.exec(['ip', family, '-j', 'route', 'show', 'default'])).stdout,
    ) as { dev: string; gateway?: string }[];
    for (const r of routes) found.push(`${r.dev} via ${r.gateway ?? '-'}`);
  }
  return found.sort();
}

async function ping(from: TestNetns, address: string): Promise<void> {
  await from.exec(['ping', '-c', '1', '-W', '2', address]);
}

describe('several networks in one allocation namespace', () => {
  it('sets up a primary, a macvlan and a second bridge as asked, and tears each down alone', async () => {
    const c = await make();
    const alloc = await t.lab.container('alloc');
    // The macvlan's segment: its master vl0 in the node, whose peer is a client's eth0.
    const vlanClient = await t.lab.container('vclient');
    await t.lab.veth(t.node, 'vl0', vlanClient, 'eth0');
    await vlanClient.exec(['ip', 'addr', 'add', '10.88.0.200/24', 'dev', 'eth0']);
    // Warm the node up, so that the plugins' shared chains exist before the baseline.
    const warm = await t.lab.container('warm');
    const first = await c.setup(
      {
        ...identity,
        allocId: `${ALLOC}-warm`,
        ports: [{ label: 'http', value: 23081, to: 8080 }],
      },
      warm.path,
    );
    await c.teardown(first.status.allocId, first.attachment);
    const baseline = await t.node.ruleset();

    const primarySpec: AllocNetworkSpec = {
      ...identity,
      ports: [{ label: 'http', value: 23080, to: 8080 }],
    };
    const primary = await c.setup(primarySpec, alloc.path);
    const withPrimary = await t.node.ruleset();
    const primaryReservations = await reservations();
    expect(primaryReservations).toEqual([`nomad/${primary.status.address}`]);

    const vlanSpec: AllocNetworkSpec = {
      ...identity,
      network: 'vlan',
      ifName: 'net1',
      ips: ['10.88.0.42/24'],
      mac: '02:a2:9c:00:00:42',
      defaultRoute: false,
    };
    const storageSpec: AllocNetworkSpec = {
      ...identity,
      network: 'storage',
      ifName: 'net2',
      ips: ['10.77.0.33'],
      defaultRoute: false,
    };
    for (const s of [vlanSpec, storageSpec]) c.checkSpec(s);
    const vlan = await c.setup(vlanSpec, alloc.path);
    const storage = await c.setup(storageSpec, alloc.path);
    expect([vlan.status.address, storage.status.address]).toEqual(['10.88.0.42', '10.77.0.33']);

    // What was asked is what the interfaces have.
    const inside = await addressesIn(alloc);
    expect(inside.net1?.mac).toBe('02:a2:9c:00:00:42');
    expect(inside.net1?.ips[0]).toBe('10.88.0.42/24');
    expect(inside.net1?.ips[1]).toMatch(/^fd88::[0-9a-f:]+\/64$/);
    expect(inside.net2?.ips).toEqual(['10.77.0.33/24']);
    expect(inside.eth0?.ips).toEqual([`${primary.status.address}/20`]);
    // Only the primary routes by default. The secondaries' plugins added theirs beside eth0's (a
    // default route per interface, v4 and v6: `net1 via 10.88.0.1`, `net1 via fd88::1`,
    // `net2 via 10.77.0.1`, `default dev net2`); every one of them went.
    expect(await defaultRoutes(alloc)).toEqual(['eth0 via 172.26.64.1']);
    for (const a of [vlan.attachment, storage.attachment])
      expect(a.result?.routes.filter((r) => r.dst.endsWith('/0'))).toEqual([]);
    // CHECK of every attachment passes. bridge's and macvlan's CHECK look for a route of each
    // destination of the cached result (any device): with `::/0` still in the secondaries'
    // results, no IPv6 default route being left, their CHECK would fail.
    for (const a of [primary.attachment, vlan.attachment, storage.attachment])
      expect(await c.check(a)).toEqual({ ran: true });
    // The same CHECK with the default routes back in the cached result fails: no route of `::/0`.
    const cache = createCniCache(join(t.tmp.path, 'cache'));
    const cached = await cache.readResult('vlan', ALLOC, 'net1');
    if (cached === undefined) throw new Error('no cached result of the macvlan attachment');
    const kept = cached.result as { routes: unknown[] };
    await cache.writeResult({
      ...cached,
      result: { ...kept, routes: [...kept.routes, { dst: '::/0' }] },
    });
    await expect(c.check(vlan.attachment)).rejects.toMatchObject({
      code: 'check-failed',
      message: expect.stringContaining(
        'Expected Route {Dst:{IP::: Mask:00000000000000000000000000000000} GW:<nil>} not found in routing table',
      ) as unknown,
    });
    await cache.writeResult(cached);
    expect(await c.check(vlan.attachment)).toEqual({ ran: true });

    // Traffic reaches each interface from its own segment; the port answers on the primary.
    const storageClient = await t.lab.container('sclient');
    await t.lab.veth(t.node, 'sc0', storageClient, 'eth0');
    await t.node.exec(['ip', 'link', 'set', 'sc0', 'master', 'storage0']);
    await storageClient.exec(['ip', 'addr', 'add', '10.77.0.200/24', 'dev', 'eth0']);
    await ping(vlanClient, '10.88.0.42');
    await ping(storageClient, '10.77.0.33');
    await ping(t.node, primary.status.address);
    const client = await t.lab.client(t.node);
    const server = await startEchoServer(alloc.name, 8080);
    try {
      expect(await echo(client.netns.name, 'tcp', client.nodeAddress, 23080, 'hi')).toBe('tcp:hi');
      expect(await echo(vlanClient.name, 'tcp', '10.88.0.42', 8080, 'vlan')).toBe('tcp:vlan');
      expect(await echo(storageClient.name, 'tcp', '10.77.0.33', 8080, 'st')).toBe('tcp:st');
    } finally {
      await server.stop();
    }

    // Each secondary's teardown, scoped to its network, leaves the primary's state as it was:
    // the second bridge's without its attachment (as after a crash before it was recorded: the
    // DEL from the CNI cache's entry of that network and interface), the macvlan's with it.
    const s = await c.teardown(ALLOC, undefined, { only: { network: 'storage', ifName: 'net2' } });
    expect([s.delRan, s.delError]).toEqual([true, undefined]);
    expect(await t.node.ruleset()).toEqual(withPrimary);
    expect((await reservations()).filter((r) => r.startsWith('storage/'))).toEqual([]);
    const v = await c.teardown(ALLOC, vlan.attachment, {
      only: { network: 'vlan', ifName: 'net1' },
    });
    expect([v.delRan, v.delError, v.removed.reservations]).toEqual([true, undefined, []]);
    expect(await t.node.ruleset()).toEqual(withPrimary);
    expect(await reservations()).toEqual(primaryReservations);
    expect(Object.keys(await addressesIn(alloc)).sort()).toEqual(['eth0', 'lo']);
    expect(await c.check(primary.attachment)).toEqual({ ran: true });

    const p = await c.teardown(ALLOC, primary.attachment);
    expect(p.delError).toBeUndefined();
    expect(await reservations()).toEqual([]);
    expect(await t.node.ruleset()).toEqual(baseline);
  });

  it('finds, cleans up and reaps a forgotten allocation’s state in every one of its networks', async () => {
    const c = await make();
    expect(c.catalog().networks.map((n) => [n.name, n.plugins.join(',')])).toEqual([
      ['nomad', 'loopback,bridge,firewall,portmap'],
      ['storage', 'bridge'],
      ['vlan', 'macvlan,tuning'],
    ]);
    const alloc = await t.lab.container('alloc');
    const vlanClient = await t.lab.container('vclient');
    await t.lab.veth(t.node, 'vl0', vlanClient, 'eth0');
    const warm = await t.lab.container('warm');
    const first = await c.setup(
      {
        ...identity,
        allocId: `${ALLOC}-warm`,
        ports: [{ label: 'http', value: 23081, to: 8080 }],
      },
      warm.path,
    );
    await c.teardown(first.status.allocId, first.attachment);
    const baseline = await t.node.ruleset();
    await c.setup({ ...identity, ports: [{ label: 'http', value: 23080, to: 8080 }] }, alloc.path);
    await c.setup({ ...identity, network: 'vlan', ifName: 'net1' }, alloc.path);
    await c.setup({ ...identity, network: 'storage', ifName: 'net2' }, alloc.path);

    // Known: nothing of it is a leak. Forgotten: one leak in its three networks.
    expect((await c.findLeaks([ALLOC])).leaks).toEqual([]);
    const found = await c.findLeaks([]);
    expect(found.leaks.map((l) => [l.allocId, l.networks])).toEqual([
      [ALLOC, ['nomad', 'storage', 'vlan']],
    ]);
    // A cleanup of one network takes that network's state only (the macvlan's: its two
    // reservations, v4 and v6, and its CNI cache entry; no iptables).
    const vlanOnly = await c.forceCleanup(ALLOC, { network: 'vlan' });
    expect(vlanOnly.removed.rules).toEqual([]);
    expect(vlanOnly.removed.reservations.map((r) => r.network)).toEqual(['vlan', 'vlan']);
    expect(vlanOnly.removed.cacheFiles).toEqual([
      join(t.tmp.path, 'cache', 'results', `vlan-${ALLOC}-net1`),
    ]);
    expect((await reservations()).map((r) => r.split('/')[0])).toEqual(['nomad', 'storage']);
    const reaped = await c.reapLeaks([]);
    expect([reaped.failed, reaped.reaped.map((l) => l.networks)]).toEqual([
      [],
      [['nomad', 'storage']],
    ]);
    expect(await reservations()).toEqual([]);
    expect(await t.node.ruleset()).toEqual(baseline);
  });
});
