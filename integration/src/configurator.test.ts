// @allocnet/cni-configurator against the real Debian plugins, inside throwaway namespaces: a node
// namespace stands for the host (plugins run there through `ip netns exec`, iptables through
// nsenter), allocations get container namespaces. Needs root and containernetworking-plugins.
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createCniRuntime, createNodePluginExec } from '@allocnet/cni';
import {
  allocChains,
  createCniConfigurator,
  createRouteReader,
  defaultNetworkConfig,
  defaultNetworkSettings,
} from '@allocnet/cni-configurator';
import type { AllocNetworkSpec, CniConfigurator } from '@allocnet/cni-configurator';
import { addPluginShapes, sharedChains } from '@allocnet/cni-configurator/testing';
import { createBatch, createIptables } from '@allocnet/iptables-node';
import type { Iptables } from '@allocnet/iptables-node';
import { echo, requireNetworkTestHost, startEchoServer } from '@allocnet/testns';
import { labPerTest } from './fixtures/lab-per-test.js';

const PLUGIN_DIR = '/usr/lib/cni';

const t = labPerTest({ node: true });

beforeAll(async () => {
  await requireNetworkTestHost([
    'ip',
    'iptables',
    'nsenter',
    `${PLUGIN_DIR}/bridge`,
    `${PLUGIN_DIR}/ptp`,
  ]);
});

async function make(
  options: { attempts?: number; ipv6?: boolean; ipv4?: Iptables } = {},
): Promise<CniConfigurator> {
  t.configurator = await createCniConfigurator({
    runtime: createCniRuntime({
      pluginDirs: [PLUGIN_DIR],
      cacheDir: join(t.tmp.path, 'cache'),
      exec: createNodePluginExec({ netns: t.node.name }),
    }),
    // The bridge and the host veths are in the node namespace: CHECK reads them there.
    routeReader: createRouteReader({ netns: t.node.path }),
    iptables: {
      ipv4: options.ipv4 ?? createIptables({ netns: t.node.path }),
      ipv6: createIptables({ family: 'ipv6', netns: t.node.path }),
    },
    defaultNetwork: {
      ipamDataDir: join(t.tmp.path, 'ipam'),
      ...(options.ipv6 === true ? { ipv6Subnet: 'fd00:a:b::/64' } : {}),
    },
    confDir: join(t.tmp.path, 'conf'),
    retry: { attempts: options.attempts ?? 3 },
  });
  return t.configurator;
}

let seq = 0;
function spec(extra: Partial<AllocNetworkSpec> = {}): AllocNetworkSpec {
  seq++;
  return {
    allocId: `00000000-0000-4000-8000-${seq.toString(16).padStart(12, '0')}`,
    namespace: 'default',
    jobId: 'web',
    groupName: 'frontend',
    ...extra,
  };
}

/** host-local's reservation files under the test's IPAM dirs. */
async function reservations(): Promise<string[]> {
  const found: string[] = [];
  for (const root of [join(t.tmp.path, 'ipam'), join(t.tmp.path, 'ipam-custom')]) {
    let networks: string[];
    try {
      networks = await readdir(root);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw error;
    }
    for (const net of networks)
      for (const file of await readdir(join(root, net)))
        if (file !== 'lock' && !file.startsWith('last_reserved_ip')) found.push(`${net}/${file}`);
  }
  return found;
}

describe('the t.configurator on the real plugins', () => {
  it('sets up 16 allocations at once on a fresh node without a single retry, one bridge, 16 addresses', async () => {
    // One attempt each: a first-setup race would fail a setup instead of being retried away.
    const c = await make({ attempts: 1 });
    const containers = await Promise.all(Array.from({ length: 16 }, () => t.lab.container()));
    const outcomes = await Promise.all(
      containers.map((ctr, i) =>
        c.setup(spec({ ports: [{ label: 'http', value: 21000 + i, to: 8080 }] }), ctr.path),
      ),
    );
    expect(outcomes.map((o) => o.status.attempts)).toEqual(Array(16).fill(1));
    expect(new Set(outcomes.map((o) => o.status.address)).size).toBe(16);
    const bridges = (await t.node.exec(['ip', '-o', 'link', 'show', 'type', 'bridge'])).stdout
      .trim()
      .split('\n');
    expect(bridges).toHaveLength(1);
    expect(bridges[0]).toMatch(/^\d+: nomad:/);
    // Each shared jump exists once: no setup inserted a duplicate.
    const rules = await t.node.ruleset();
    expect(
      rules.match(/-A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD/g),
    ).toHaveLength(1);
    expect(
      rules.match(/-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT/g),
    ).toHaveLength(1);
    expect(rules.match(/-A NOMAD-ADMIN -d 172.26.64.0\/20 -o nomad -j ACCEPT/g)).toHaveLength(1);
    for (const o of outcomes) await c.teardown(o.status.allocId, o.attachment);
    expect(await reservations()).toEqual([]);
  });

  it('serves host port 8080 → 80 over tcp and udp to a client on another host', async () => {
    const c = await make();
    const alloc = await t.lab.container('alloc');
    const client = await t.lab.client(t.node);
    const { status, attachment } = await c.setup(
      spec({ ports: [{ label: 'http', value: 8080, to: 80 }] }),
      alloc.path,
    );
    const server = await startEchoServer(alloc.name, 80);
    try {
      expect(await echo(client.netns.name, 'tcp', client.nodeAddress, 8080, 'hello')).toBe(
        'tcp:hello',
      );
      expect(await echo(client.netns.name, 'udp', client.nodeAddress, 8080, 'hello')).toBe(
        'udp:hello',
      );
      // CHECK passes (portmap's own CHECK is broken in 1.1.1; the configurator checks its rules).
      await expect(c.check(attachment)).resolves.toEqual({ ran: true });
    } finally {
      await server.stop();
    }
    // Someone flushes portmap's jumps: CHECK says what is missing.
    await t.node.exec(['iptables', '-t', 'nat', '-F', 'CNI-HOSTPORT-DNAT']);
    const dnat = allocChains('nomad', status.allocId).dnat;
    // portmap's rules are the setup's own (native-add.ts): CHECK names the first one missing.
    await expect(c.check(attachment)).rejects.toThrow(
      `CHECK of "${status.allocId}" in network "nomad" failed: a portmap rule is missing (ipv4): -A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"nomad\\" id: \\"${status.allocId}\\"" -m multiport --dports 8080 -j ${dnat}`,
    );
    expect(status.address).toMatch(/^172\.26\.6[4-9]\.\d+$/);
    await c.teardown(status.allocId, attachment);
  });

  it('CHECKs the firewall rules of a dual-stack allocation itself, and names the one that went missing', async () => {
    const c = await make({ ipv6: true });
    const alloc = await t.lab.container('alloc');
    const { status, attachment } = await c.setup(spec(), alloc.path);
    const v6 = attachment.addresses.find((a) => a.includes(':'));
    expect(v6).toBeDefined();
    // ip6tables prints the address as it likes it; CHECK compares addresses, not strings.
    await expect(c.check(attachment)).resolves.toEqual({ ran: true });
    await t.node.exec(['ip6tables', '-D', 'CNI-FORWARD', '-s', `${v6}/128`, '-j', 'ACCEPT']);
    await expect(c.check(attachment)).rejects.toThrow(
      `CHECK of "${status.allocId}" in network "nomad" failed: a firewall rule is missing (ipv6): -A CNI-FORWARD -s ${v6}/128 -j ACCEPT`,
    );
    // The shared jump into the firewall's chain goes: every allocation on the node is broken.
    await t.node.exec(['ip6tables', '-A', 'CNI-FORWARD', '-s', `${v6}/128`, '-j', 'ACCEPT']);
    await expect(c.check(attachment)).resolves.toEqual({ ran: true });
    await t.node.exec(['iptables', '-F', 'FORWARD']);
    await expect(c.check(attachment)).rejects.toThrow(
      'failed: a firewall rule is missing (ipv4): -A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD',
    );
    await c.teardown(status.allocId, attachment);
    expect(await reservations()).toEqual([]);
  });

  const networks = {
    'the default network (dual-stack)': async () => ({
      c: await make({ ipv6: true }),
      network: undefined,
    }),
    'a custom-named bridge network': async () => {
      await mkdir(join(t.tmp.path, 'conf'), { recursive: true });
      await writeFile(
        join(t.tmp.path, 'conf', '10-custom.conflist'),
        JSON.stringify({
          cniVersion: '1.0.0',
          name: 'custom-br',
          plugins: [
            {
              type: 'bridge',
              bridge: 'custbr0',
              ipMasq: true,
              isGateway: true,
              ipam: {
                type: 'host-local',
                ranges: [[{ subnet: '10.77.0.0/24' }]],
                routes: [{ dst: '0.0.0.0/0' }],
                dataDir: join(t.tmp.path, 'ipam-custom'),
              },
            },
            { type: 'firewall', backend: 'iptables' },
            { type: 'portmap', capabilities: { portMappings: true }, snat: true },
          ],
        }),
      );
      return { c: await make(), network: 'custom-br' };
    },
    'a ptp network': async () => {
      await mkdir(join(t.tmp.path, 'conf'), { recursive: true });
      await writeFile(
        join(t.tmp.path, 'conf', '20-ptp.conflist'),
        JSON.stringify({
          cniVersion: '1.0.0',
          name: 'ptpnet',
          plugins: [
            {
              type: 'ptp',
              ipMasq: true,
              ipam: {
                type: 'host-local',
                ranges: [[{ subnet: '10.78.0.0/24' }]],
                routes: [{ dst: '0.0.0.0/0' }],
                dataDir: join(t.tmp.path, 'ipam-custom'),
              },
            },
            { type: 'portmap', capabilities: { portMappings: true }, snat: true },
          ],
        }),
      );
      return { c: await make(), network: 'ptpnet' };
    },
  };

  it.each(Object.keys(networks))(
    'leaves nothing after the netns was deleted out of band: %s',
    async (name) => {
      const { c, network } = await networks[name as keyof typeof networks]();
      const ports = [{ label: 'http', value: 8080, to: 80 }];
      // Warm the node up, so the shared chains exist before the snapshot.
      const warm = await t.lab.container();
      const first = await c.setup(
        spec({ ...(network === undefined ? {} : { network }), ports }),
        warm.path,
      );
      await c.teardown(first.status.allocId, first.attachment);
      const before = await t.node.ruleset();

      const ctr = await t.lab.container();
      const { status, attachment } = await c.setup(
        spec({
          ...(network === undefined ? {} : { network }),
          ports: [{ label: 'http', value: 8081, to: 80 }],
        }),
        ctr.path,
      );
      expect(await t.node.ruleset()).not.toEqual(before);
      await t.node.exec(['ip', 'netns', 'del', ctr.name]);
      const report = await c.teardown(status.allocId, attachment);
      expect(report.delError).toBeUndefined();
      // Without the namespace, bridge's DEL cannot learn the addresses to un-masquerade; the
      // teardown removed that chain beside the DEL (native-del.ts): the audit found nothing.
      expect(report.removed).toEqual({ rules: [], chains: [], reservations: [], cacheFiles: [] });
      expect(await t.node.ruleset()).toEqual(before);
      expect(await reservations()).toEqual([]);
    },
  );

  it('writes the masquerade rule for rule as the bridge plugin does, dual-stack, and removes it as its DEL does', async () => {
    const c = await make({ ipv6: true });
    const runtime = createCniRuntime({
      pluginDirs: [PLUGIN_DIR],
      cacheDir: join(t.tmp.path, 'plain-cache'),
      exec: createNodePluginExec({ netns: t.node.name }),
    });
    const network = defaultNetworkConfig(
      defaultNetworkSettings({
        ipamDataDir: join(t.tmp.path, 'ipam'),
        ipv6Subnet: 'fd00:a:b::/64',
      }),
    );
    const allocId = spec().allocId;
    const { masq } = allocChains(network.name, allocId);
    // Both families' nat lines about the allocation, its addresses written as <v4> and <v6>.
    const masquerade = async (v4: string, v6: string) => {
      const lines = await Promise.all(
        ['iptables', 'ip6tables'].map(
          async (cmd) => (await t.node.exec([cmd, '-t', 'nat', '-S'])).stdout,
        ),
      );
      return lines
        .join('\n')
        .split('\n')
        .filter((l) => l.includes(masq))
        .map((l) => l.replaceAll(v4, '<v4>').replaceAll(v6, '<v6>'));
    };
    // The plugin's own, through the CNI runtime alone.
    const ctr = await t.lab.container();
    const attachment = { containerId: allocId, netns: ctr.path, ifName: 'eth0' };
    const added = await runtime.add(network, attachment);
    const [pluginV4 = '', pluginV6 = ''] = added.result.ips.map((ip) => ip.address.split('/')[0]);
    const byPlugin = await masquerade(pluginV4, pluginV6);
    expect(byPlugin).toHaveLength(8);
    await runtime.del(network, attachment);

    // allocnet's, for the same allocation id in the same network.
    const { status, attachment: kept } = await c.setup(spec({ allocId }), ctr.path);
    expect(await masquerade(status.address, status.addressIpv6)).toEqual(byPlugin);
    await c.teardown(allocId, kept);
    expect(await masquerade(status.address, status.addressIpv6)).toEqual([]);
  });

  /** IPv4 iptables of the node that counts the sweep's calls, and runs `beforeRemoveAt` first. */
  function counted(beforeRemoveAt?: () => Promise<void>) {
    const real = createIptables({ netns: t.node.path });
    const calls = { restore: 0, removeAt: 0 };
    const ipt: Iptables = {
      ...real,
      restore: (batch, options) => {
        calls.restore++;
        return real.restore(batch, options);
      },
      removeAt: async (at, removal) => {
        calls.removeAt++;
        await beforeRemoveAt?.();
        return (real.removeAt as NonNullable<Iptables['removeAt']>)(at, removal);
      },
    };
    return { ipt, calls };
  }

  /** 1,000 leaked allocations in the plugins' shapes, a third with reservation files; their ids. */
  async function leak(): Promise<string[]> {
    const ipt = createIptables({ netns: t.node.path });
    const batch = createBatch();
    const ipamDir = join(t.tmp.path, 'ipam', 'nomad');
    await mkdir(ipamDir, { recursive: true });
    const ids: string[] = [];
    for (let i = 0; i < 1000; i++) {
      const id = `leak-${i.toString().padStart(4, '0')}`;
      const ip = `172.26.${64 + Math.floor(i / 250)}.${(i % 250) + 2}`;
      ids.push(id);
      addPluginShapes(batch, {
        network: 'nomad',
        allocId: id,
        ip,
        ports: [{ host: 20000 + i, container: 8080 }],
        firewall: i % 2 === 0,
      });
      if (i % 3 === 0) await writeFile(join(ipamDir, ip), `${id}\r\neth0`);
    }
    await ipt.restore(batch);
    return ids;
  }

  it('reaps 1,000 leaked allocations in one call, by rule handle, and brings iptables back to its baseline', async () => {
    const { ipt, calls } = counted();
    const c = await make({ ipv4: ipt });
    const warm = await t.lab.container();
    const first = await c.setup(spec({ ports: [{ label: 'p', value: 9000 }] }), warm.path);
    await c.teardown(first.status.allocId, first.attachment);
    const before = await t.node.ruleset();
    const ids = await leak();

    const found = await c.findLeaks([]);
    expect(found.leaks.map((l) => l.allocId)).toEqual(ids);
    const progress: number[] = [];
    calls.restore = 0;
    const report = await c.reapLeaks([], { onProgress: (p) => progress.push(p.done) });
    expect(report.failed).toEqual([]);
    expect(report.reaped).toHaveLength(1000);
    expect(progress.at(-1)).toBe(1000);
    // Two batches of 500, each one nf_tables transaction; no iptables-restore.
    expect(calls).toEqual({ restore: 0, removeAt: 2 });
    expect(await t.node.ruleset()).toEqual(before);
    expect(await reservations()).toEqual([]);
    expect((await c.findLeaks([])).leaks).toEqual([]);
  });

  it('takes its batches in the order the leaks sit in the chains, not their ids’, and reports them by id', async () => {
    // The kernel finds each rule a batch deletes by walking its chain from the head: batches
    // taken in the ids' order (random, for real allocations) would each walk the whole chain.
    const batches: string[][] = [];
    const { ipt } = counted();
    const c = await make({
      ipv4: {
        ...ipt,
        removeAt: (at, removal) => {
          const ids = removal.rules.flatMap(
            (r) => /id: "([^"]+)"/.exec(r.rule.comment ?? '')?.[1] ?? [],
          );
          batches.push([...new Set(ids)]);
          return (ipt.removeAt as NonNullable<Iptables['removeAt']>)(at, removal);
        },
      },
    });
    await ipt.restore(sharedChains());
    const before = await t.node.ruleset();
    // Made in the order 0, 1, …, 11; their ids sort the other way round.
    const made = Array.from({ length: 12 }, (_, i) => `leak-${String.fromCharCode(122 - i)}`);
    const batch = createBatch();
    made.forEach((id, i) =>
      addPluginShapes(batch, {
        network: 'nomad',
        allocId: id,
        ip: `172.26.64.${i + 2}`,
        ports: [{ host: 20000 + i, container: 8080 }],
        firewall: true,
      }),
    );
    await ipt.restore(batch);

    const report = await c.reapLeaks([], { batchSize: 4 });
    expect(report.failed).toEqual([]);
    expect(batches).toEqual([made.slice(0, 4), made.slice(4, 8), made.slice(8, 12)]);
    expect(report.reaped.map((l) => l.allocId)).toEqual([...made].sort());
    expect(await t.node.ruleset()).toEqual(before);
  });

  it('reaps by iptables-restore when the ruleset changed after the scan, keeping the newcomer', async () => {
    const real = createIptables({ netns: t.node.path });
    const newcomer = [
      '-s',
      '10.7.7.7/32',
      '-m',
      'comment',
      '--comment',
      'newcomer',
      '-j',
      'ACCEPT',
    ];
    let changed = false;
    const { ipt, calls } = counted(async () => {
      // Another program's rule lands between the reap's scan and its first removal.
      if (!changed) await real.append('filter', 'FORWARD', newcomer);
      changed = true;
    });
    const c = await make({ ipv4: ipt });
    await real.restore(sharedChains());
    const before = await t.node.ruleset();
    await leak();
    calls.restore = 0;

    const report = await c.reapLeaks([]);
    expect(report.failed).toEqual([]);
    expect(report.reaped).toHaveLength(1000);
    // The first batch found the generation moved on and went by iptables-restore; the scan's
    // generation is then given up, so the second batch does too.
    expect(calls).toEqual({ restore: 2, removeAt: 1 });
    await real.delete('filter', 'FORWARD', newcomer);
    expect(await t.node.ruleset()).toEqual(before);
  });
});
