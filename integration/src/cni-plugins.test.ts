// @allocnet/cni against the real Debian plugins (loopback, bridge, host-local, firewall, portmap,
// ptp), run inside a throwaway namespace standing for the node. Needs root and
// containernetworking-plugins in /usr/lib/cni; nothing runs in the root namespace.
import { mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import {
  createCniRuntime,
  createNodePluginExec,
  isCniError,
  parseNetworkConfig,
} from '@allocnet/cni';
import type { CniError, CniRuntime, NetworkConfig } from '@allocnet/cni';
import { installFakePlugin, nomadBridgeConflist, tempDir } from '@allocnet/cni/testing';
import { createNetnsLab, requireNetworkTestHost } from '@allocnet/testns';
import type { NetnsLab, TestNetns } from '@allocnet/testns';

const PLUGIN_DIR = '/usr/lib/cni';
const ID = '6b235529-8111-4bbe-520b-d639b1d2a94e';

let lab: NetnsLab;
let node: TestNetns;
let tmp: Awaited<ReturnType<typeof tempDir>>;
let runtime: CniRuntime;

beforeAll(async () => {
  await requireNetworkTestHost([
    'ip',
    'iptables',
    `${PLUGIN_DIR}/bridge`,
    `${PLUGIN_DIR}/portmap`,
    `${PLUGIN_DIR}/ptp`,
  ]);
});

beforeEach(async () => {
  lab = createNetnsLab();
  node = await lab.node();
  tmp = await tempDir();
  runtime = createCniRuntime({
    pluginDirs: [PLUGIN_DIR],
    cacheDir: join(tmp.path, 'cache'),
    exec: createNodePluginExec({ netns: node.name }),
  });
});

afterEach(async () => {
  try {
    await lab.dispose();
  } finally {
    await tmp.remove();
  }
});

/** Nomad's default bridge network (loopback, bridge + host-local, firewall, portmap). */
function nomadBridge(options: { ipv6?: boolean; cniVersion?: string } = {}): NetworkConfig {
  return parseNetworkConfig(nomadBridgeConflist({ ipamDir: join(tmp.path, 'ipam'), ...options }));
}

const ports = (hostPort: number, containerPort: number) => ({
  portMappings: ['tcp', 'udp'].map((protocol) => ({ hostPort, containerPort, protocol })),
});

async function ruleset(): Promise<string> {
  return `${(await node.exec(['iptables-save'])).stdout}${(await node.exec(['ip6tables-save'])).stdout}`;
}

async function reserved(): Promise<string[]> {
  try {
    // host-local keeps one file per reserved address, beside `lock` and `last_reserved_ip.N`.
    return (await readdir(join(tmp.path, 'ipam', 'nomad'))).filter(
      (f) => f !== 'lock' && !f.startsWith('last_reserved_ip'),
    );
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

async function caught(promise: Promise<unknown>): Promise<CniError> {
  try {
    await promise;
  } catch (error) {
    if (isCniError(error)) return error;
    throw error;
  }
  throw new Error('expected a CniError');
}

describe('the Nomad bridge chain on the real plugins', () => {
  it('ADD gives the container its address and the node its rules; DEL takes all of it back', async () => {
    const ctr = await lab.container();
    const net = nomadBridge();
    const before = await ruleset();
    const added = await runtime.add(net, {
      containerId: ID,
      netns: ctr.path,
      ifName: 'eth0',
      capabilityArgs: ports(25000, 8080),
    });
    expect(added.cniVersion).toBe('1.0.0');
    expect(added.result.interfaces.map((i) => i.name)).toEqual([
      'nomad',
      expect.stringMatching(/^veth/),
      'eth0',
    ]);
    expect(added.result.ips).toEqual([
      { address: '172.26.64.2/20', gateway: '172.26.64.1', interface: 2 },
    ]);
    expect((await ctr.exec(['ip', '-4', '-o', 'addr', 'show', 'eth0'])).stdout).toContain(
      'inet 172.26.64.2/20',
    );
    const rules = await ruleset();
    expect(rules).toContain(
      `-A POSTROUTING -s 172.26.64.2/32 -m comment --comment "name: \\"nomad\\" id: \\"${ID}\\"" -j CNI-50e58ea77dc52e0c731e3799`,
    );
    expect(rules).toMatch(
      /-A CNI-DN-50e58ea77dc52e0c731e3 -p tcp -m tcp --dport 25000 -j DNAT --to-destination 172\.26\.64\.2:8080/,
    );
    expect(await reserved()).toEqual(['172.26.64.2']);

    await runtime.del(net, {
      containerId: ID,
      netns: ctr.path,
      ifName: 'eth0',
      capabilityArgs: ports(25000, 8080),
    });
    expect(await runtime.cache.readResult('nomad', ID, 'eth0')).toBeUndefined();
    expect(await reserved()).toEqual([]);
    expect((await node.links()).filter((l) => l.startsWith('veth'))).toEqual([]);
    expect(await ruleset()).not.toContain(ID);
    expect(before).toBe('');
  });

  it('CHECK passes when no plugin of the chain trips over its own CHECK (no port mappings for portmap)', async () => {
    const ctr = await lab.container();
    const net = nomadBridge({ ipv6: true });
    const attachment = { containerId: ID, netns: ctr.path, ifName: 'eth0' };
    const added = await runtime.add(net, attachment);
    expect(added.result.ips.map((ip) => ip.address)).toEqual(['172.26.64.2/20', 'fd00:a:b::2/64']);
    await expect(runtime.check(net, attachment)).resolves.toEqual({ ran: true });
    // CHECK notices what it checks: with the container's default route gone, bridge's CHECK fails.
    await ctr.exec(['ip', '-4', 'route', 'del', 'default']);
    const error = await caught(runtime.check(net, attachment));
    expect(error.plugin).toBe('bridge');
    expect(error.message).toMatch(/Expected Route .* not found in routing table$/);
    await runtime.del(net, attachment);
    expect(await ruleset()).not.toContain(ID);
  });

  it('CHECK reports portmap 1.1.1’s IPv4-only bug as the plugin’s error (containernetworking/plugins#819)', async () => {
    const ctr = await lab.container();
    const net = nomadBridge();
    const attachment = {
      containerId: ID,
      netns: ctr.path,
      ifName: 'eth0',
      capabilityArgs: ports(25000, 8080),
    };
    await runtime.add(net, attachment);
    const error = await caught(runtime.check(net, attachment));
    expect(error).toMatchObject({ plugin: 'portmap', verb: 'CHECK', specCode: 999 });
    expect(error.message).toBe(
      `plugin "portmap" failed (CHECK) for "${ID}": could not check ipv6 dnat: chain CNI-DN-50e58ea77dc52e0c731e3 not found in iptables table nat`,
    );
    await runtime.del(net, attachment);
  });

  it('DEL after the netns was deleted out of band succeeds, and so does a second DEL', async () => {
    const ctr = await lab.container();
    const net = nomadBridge();
    const attachment = {
      containerId: ID,
      netns: ctr.path,
      ifName: 'eth0',
      capabilityArgs: ports(25000, 8080),
    };
    await runtime.add(net, attachment);
    await execa('ip', ['netns', 'del', ctr.name]);
    await runtime.del(net, attachment);
    await runtime.del(net, attachment);
    expect(await runtime.cache.readResult('nomad', ID, 'eth0')).toBeUndefined();
    expect(await reserved()).toEqual([]);
    // What the runtime cannot see: the bridge plugin returns early without its netns and leaves
    // its masquerade rules (measured; docs/cni.md). Removing them is the configurator's job.
    expect(await ruleset()).toContain(
      `-A POSTROUTING -s 172.26.64.2/32 -m comment --comment "name: \\"nomad\\" id: \\"${ID}\\""`,
    );
  });

  it('a failure in the middle of the chain leaves no veth, no IP reservation and no rule behind', async () => {
    const ctr = await lab.container();
    const net = nomadBridge();
    // portmap writes its SETMARK rules, then iptables refuses container port 70000.
    const attachment = {
      containerId: ID,
      netns: ctr.path,
      ifName: 'eth0',
      capabilityArgs: ports(25000, 70000),
    };
    const error = await caught(runtime.add(net, attachment));
    expect(error).toMatchObject({ plugin: 'portmap', verb: 'ADD' });
    expect(error.message).toMatch(/Port `70000' not valid/);
    expect((await node.links()).filter((l) => l.startsWith('veth'))).toEqual([]);
    expect(await ctr.links()).toEqual(['lo']);
    expect(await reserved()).toEqual([]);
    const rules = await ruleset();
    expect(rules).not.toContain(ID);
    expect(rules).not.toContain('CNI-DN-50e58ea77dc52e0c731e3');
    expect(await runtime.pendingAdds()).toEqual([]);
  });
});

describe('the ptp chain on the real plugins', () => {
  it('ADD, CHECK and DEL', async () => {
    const ctr = await lab.container();
    const net = parseNetworkConfig({
      cniVersion: '1.0.0',
      name: 'ptpnet',
      plugins: [
        { type: 'loopback' },
        {
          type: 'ptp',
          ipMasq: true,
          mtu: 1400,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: '10.99.0.0/24' }]],
            routes: [{ dst: '0.0.0.0/0' }],
            dataDir: join(tmp.path, 'ipam'),
          },
        },
      ],
    });
    const attachment = { containerId: ID, netns: ctr.path, ifName: 'eth0' };
    const added = await runtime.add(net, attachment);
    expect(added.result.ips).toEqual([
      { address: '10.99.0.2/24', gateway: '10.99.0.1', interface: 1 },
    ]);
    expect((await ctr.exec(['ip', '-o', 'link', 'show', 'eth0'])).stdout).toContain('mtu 1400');
    await expect(runtime.check(net, attachment)).resolves.toEqual({ ran: true });
    await runtime.del(net, attachment);
    expect(await ctr.links()).toEqual(['lo']);
    expect(await ruleset()).not.toContain(ID);
  });
});

describe('where plugins run', () => {
  it('runs them inside the node namespace it was given', async () => {
    const plugins = join(tmp.path, 'plugins');
    await mkdir(plugins);
    const fake = await installFakePlugin(plugins, 'fake');
    const rt = createCniRuntime({
      pluginDirs: [plugins],
      cacheDir: join(tmp.path, 'c2'),
      exec: createNodePluginExec({ netns: node.name }),
    });
    await rt.versions(parseNetworkConfig({ cniVersion: '1.0.0', name: 'n', type: 'fake' }));
    const nodeInode = (await node.exec(['readlink', '/proc/self/ns/net'])).stdout.trim();
    expect((await fake.calls()).map((c) => c.netns)).toEqual([nodeInode]);
  });
});
