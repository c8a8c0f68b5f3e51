// allocnet's native ADD of the firewall and portmap (cni-configurator native-add.ts) against the
// plugins' own, on the real Debian plugins and iptables, in throwaway namespaces: for the same
// network name and container id, the whole ruleset (iptables-save and ip6tables-save, counters
// zeroed) and portmap's sysctl after the plugins' ADD in one node namespace equal those after
// allocnet's setup in another; a DEL by the plugins of allocnet's ADD, and allocnet's teardown,
// each leave what the plugins' own DEL leaves. Needs root and containernetworking-plugins.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createCniRuntime, createNodePluginExec, parseNetworkConfig } from '@allocnet/cni';
import { tempDir } from '@allocnet/cni/testing';
import { createCniConfigurator } from '@allocnet/cni-configurator';
import type { AllocNetworkSpec, CniConfigurator } from '@allocnet/cni-configurator';
import { createIptables } from '@allocnet/iptables-node';
import { createNetnsLab, requireNetworkTestHost } from '@allocnet/testns';
import type { NetnsLab, TestNetns } from '@allocnet/testns';

const PLUGIN_DIR = '/usr/lib/cni';
const BRIDGE = 'natbr0';
const ALLOC_ID = '00000000-0000-4000-8000-00000000a030';

let lab: NetnsLab;
let tmp: Awaited<ReturnType<typeof tempDir>>;
let configurator: CniConfigurator | undefined;

beforeAll(async () => {
  await requireNetworkTestHost(['ip', 'iptables', 'nsenter', `${PLUGIN_DIR}/portmap`]);
});

beforeEach(async () => {
  lab = createNetnsLab();
  tmp = await tempDir();
});

afterEach(async () => {
  try {
    await configurator?.close();
    configurator = undefined;
    await lab.dispose();
  } finally {
    await tmp.remove();
  }
});

/** The test's network, dual-stack, with its host-local data in `ipamDir`. */
function conflist(ipamDir: string, portmap: Record<string, unknown>) {
  return {
    cniVersion: '1.0.0',
    name: 'natnet',
    plugins: [
      { type: 'loopback' },
      {
        type: 'bridge',
        bridge: BRIDGE,
        ipMasq: true,
        isGateway: true,
        ipam: {
          type: 'host-local',
          ranges: [[{ subnet: '10.77.0.0/24' }], [{ subnet: 'fd00:77::/64' }]],
          dataDir: ipamDir,
        },
      },
      { type: 'firewall', backend: 'iptables', iptablesAdminChainName: 'NATNET-ADMIN' },
      { type: 'portmap', capabilities: { portMappings: true }, ...portmap },
    ],
  };
}

/** A configurator on `node` whose conf dir holds the network. */
async function configuratorOn(node: TestNetns, portmap: Record<string, unknown>) {
  const confDir = join(tmp.path, `conf-${node.name}`);
  await mkdir(confDir, { recursive: true });
  await writeFile(
    join(confDir, 'natnet.conflist'),
    JSON.stringify(conflist(join(tmp.path, `ipam-${node.name}`), portmap)),
  );
  configurator = await createCniConfigurator({
    runtime: runtimeOn(node),
    iptables: {
      ipv4: createIptables({ netns: node.path }),
      ipv6: createIptables({ family: 'ipv6', netns: node.path }),
    },
    defaultNetwork: { ipamDataDir: join(tmp.path, `default-ipam-${node.name}`) },
    confDir,
    watchConfDir: false,
  });
  return configurator;
}

function runtimeOn(node: TestNetns) {
  return createCniRuntime({
    pluginDirs: [PLUGIN_DIR],
    cacheDir: join(tmp.path, `cache-${node.name}`),
    exec: createNodePluginExec({ netns: node.name }),
  });
}

/** portmap's and bridge's sysctls in the node. */
async function sysctls(node: TestNetns): Promise<string[]> {
  const names = [`net/ipv4/conf/${BRIDGE}/route_localnet`, 'net/ipv4/ip_forward'];
  return Promise.all(
    names.map(async (n) => `${n}=${(await node.exec(['cat', `/proc/sys/${n}`])).stdout.trim()}`),
  );
}

const spec: AllocNetworkSpec = {
  allocId: ALLOC_ID,
  namespace: 'default',
  jobId: 'web',
  groupName: 'frontend',
  network: 'natnet',
  ports: [
    { label: 'both', value: 8080, to: 80 },
    { label: 'dns', value: 5353, to: 53, protocol: 'udp' },
    { label: 'v4host', value: 9090, to: 90, protocol: 'tcp', hostIp: '10.99.0.1' },
    { label: 'v6host', value: 7070, to: 70, protocol: 'udp', hostIp: 'fd00:99::1' },
  ],
};

describe('the native ADD of the firewall and portmap', () => {
  it.each<[string, { snat?: boolean; markMasqBit?: number }]>([
    ['snat on', { snat: true }],
    ['snat off', { snat: false }],
    ['snat by default, another mark bit', { markMasqBit: 5 }],
  ])(
    'writes the ruleset and sysctls the plugins write (%s), and a DEL by either removes it',
    async (_, portmap) => {
      const [byPlugins, byAllocnet] = await Promise.all([lab.node('plug'), lab.node('nat')]);

      // allocnet's setup in one node.
      const c = await configuratorOn(byAllocnet, portmap);
      const ctr = await lab.container();
      const { status, attachment } = await c.setup(spec, ctr.path);
      expect(status.address).toBe('10.77.0.2');
      expect(status.addressIpv6).toBe('fd00:77::2');
      expect(await c.check(attachment)).toEqual({ ran: true });

      // The plugins' own ADD in the other, for the same network name, id and port mappings.
      const network = parseNetworkConfig(
        conflist(join(tmp.path, 'ipam-plugins'), portmap),
        'plugins',
      );
      const plain = runtimeOn(byPlugins);
      const ctr2 = await lab.container();
      const cni = {
        containerId: ALLOC_ID,
        netns: ctr2.path,
        ifName: 'eth0',
        args: attachment.args,
        capabilityArgs: { portMappings: attachment.portMappings },
      };
      await plain.add(network, cni);

      const ruleset = await byPlugins.ruleset();
      expect(ruleset).toContain('CNI-DN-');
      expect(ruleset).toContain('-j CNI-HOSTPORT-DNAT');
      expect(await byAllocnet.ruleset()).toEqual(ruleset);
      const routeLocalnet = `net/ipv4/conf/${BRIDGE}/route_localnet=${portmap.snat === false ? 0 : 1}`;
      expect(await sysctls(byPlugins)).toContain(routeLocalnet);
      expect(await sysctls(byAllocnet)).toEqual(await sysctls(byPlugins));

      // What the plugins' DEL leaves: the shared chains and rules.
      await plain.del(network, cni);
      const baseline = await byPlugins.ruleset();
      expect(baseline).not.toContain('CNI-DN-');

      // A DEL by the plugins (another runtime, from the configurator's cache) of allocnet's ADD.
      await runtimeOn(byAllocnet).del(
        parseNetworkConfig(
          conflist(join(tmp.path, `ipam-${byAllocnet.name}`), portmap),
          'allocnet',
        ),
        { ...cni, netns: ctr.path },
      );
      expect(await byAllocnet.ruleset()).toEqual(baseline);

      // allocnet's own teardown of its ADD.
      const again = await c.setup(spec, ctr.path);
      // host-local hands out the next addresses: the same rules about them.
      const renamed = (await byAllocnet.ruleset())
        .replaceAll(`${again.status.address}/`, `${status.address}/`)
        .replaceAll(`${again.status.address}:`, `${status.address}:`)
        .replaceAll(`${again.status.addressIpv6}/`, `${status.addressIpv6}/`)
        .replaceAll(`${again.status.addressIpv6}]`, `${status.addressIpv6}]`);
      expect(again.status.address).not.toBe(status.address);
      expect(renamed).toEqual(ruleset);
      await c.teardown(ALLOC_ID, again.attachment);
      expect(await byAllocnet.ruleset()).toEqual(baseline);
    },
  );

  it('runs portmap itself for an option it does not know (conditionsV4)', async () => {
    const node = await lab.node('fallback');
    const c = await configuratorOn(node, { snat: true, conditionsV4: ['!', '-d', '192.0.2.1'] });
    const ctr = await lab.container();
    const { attachment } = await c.setup(spec, ctr.path);
    const v4 = (await node.exec(['iptables', '-t', 'nat', '-S', 'CNI-HOSTPORT-DNAT'])).stdout;
    // The plugin's jumps carry the condition; the native path could not have written it.
    expect(v4).toMatch(/ ! -d 192\.0\.2\.1\/32 .*-j CNI-DN-/);
    await c.teardown(ALLOC_ID, attachment);
    expect((await node.exec(['iptables', '-t', 'nat', '-S'])).stdout).not.toContain('CNI-DN-');
  });
});
