// allocnet's native ADD of the firewall and portmap (cni-configurator native-add.ts) against the
// plugins' own, on the real Debian plugins and iptables, in throwaway namespaces: for the same
// network name and container id, the whole ruleset (iptables-save and ip6tables-save, counters
// zeroed) and portmap's sysctl after the plugins' ADD in one node namespace equal those after
// allocnet's setup in another; a DEL by the plugins of allocnet's ADD, and allocnet's teardown,
// each leave what the plugins' own DEL leaves. Needs root and containernetworking-plugins.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CniError,
  createCniRuntime,
  createNodePluginExec,
  parseNetworkConfig,
} from '@allocnet/cni';
import { allocChains, createCniConfigurator } from '@allocnet/cni-configurator';
import type { AllocAttachment, AllocNetworkSpec } from '@allocnet/cni-configurator';
import { createIptables } from '@allocnet/iptables-node';
import { requireNetworkTestHost } from '@allocnet/testns';
import type { TestNetns } from '@allocnet/testns';
import { labPerTest } from './fixtures/lab-per-test.js';
import { waitFor } from './fixtures/wait.js';

const PLUGIN_DIR = '/usr/lib/cni';
const BRIDGE = 'natbr0';
const ALLOC_ID = '00000000-0000-4000-8000-00000000a030';
const SECOND_ID = '00000000-0000-4000-8000-00000000a031';
const THIRD_ID = '00000000-0000-4000-8000-00000000a032';

const t = labPerTest();

beforeAll(async () => {
  await requireNetworkTestHost(['ip', 'iptables', 'nsenter', `${PLUGIN_DIR}/portmap`]);
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
async function configuratorOn(
  node: TestNetns,
  portmap: Record<string, unknown>,
  runtime = runtimeOn(node),
) {
  const confDir = join(t.tmp.path, `conf-${node.name}`);
  await mkdir(confDir, { recursive: true });
  await writeFile(
    join(confDir, 'natnet.conflist'),
    JSON.stringify(conflist(join(t.tmp.path, `ipam-${node.name}`), portmap)),
  );
  const made = await createCniConfigurator({
    runtime,
    iptables: {
      ipv4: createIptables({ netns: node.path }),
      ipv6: createIptables({ family: 'ipv6', netns: node.path }),
    },
    defaultNetwork: { ipamDataDir: join(t.tmp.path, `default-ipam-${node.name}`) },
    confDir,
    watchConfDir: false,
  });
  t.configurator = made;
  return made;
}

function runtimeOn(node: TestNetns) {
  return createCniRuntime({
    pluginDirs: [PLUGIN_DIR],
    cacheDir: join(t.tmp.path, `cache-${node.name}`),
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

/** The plugins' own ADD of an allocation allocnet set up with `attachment` (same args and ports). */
function pluginsCni(
  attachment: Pick<AllocAttachment, 'args' | 'portMappings'>,
  containerId: string,
  netns: string,
) {
  return {
    containerId,
    netns,
    ifName: 'eth0',
    args: attachment.args,
    capabilityArgs: { portMappings: attachment.portMappings },
  };
}

/** Removes CNI-FORWARD and CNI-HOSTPORT-DNAT, with the jumps to them, in both families. */
async function dropSharedChains(node: TestNetns): Promise<void> {
  for (const ipt of ['iptables', 'ip6tables']) {
    const run = (...args: string[]) => node.exec([ipt, ...args]);
    // The firewall's jump is FORWARD's first rule (and its only one here).
    expect((await run('-S', 'FORWARD', '1')).stdout).toContain('-j CNI-FORWARD');
    await run('-D', 'FORWARD', '1');
    await run('-F', 'CNI-FORWARD');
    await run('-X', 'CNI-FORWARD');
    for (const chain of ['PREROUTING', 'OUTPUT'])
      await run(
        '-t',
        'nat',
        '-D',
        chain,
        '-m',
        'addrtype',
        '--dst-type',
        'LOCAL',
        '-j',
        'CNI-HOSTPORT-DNAT',
      );
    await run('-t', 'nat', '-F', 'CNI-HOSTPORT-DNAT');
    await run('-t', 'nat', '-X', 'CNI-HOSTPORT-DNAT');
  }
}

/**
 * Copies every other rule that names one of `renames`' first strings, renamed, in both families,
 * with `chains` declared in nat (made: they are the second allocation's own).
 */
async function seed(node: TestNetns, renames: [string, string][], chains: string[]) {
  for (const [save, restore] of [
    ['iptables-save', 'iptables-restore'],
    ['ip6tables-save', 'ip6tables-restore'],
  ] as const) {
    let n = 0;
    const lines: string[] = [];
    for (const line of (await node.exec([save])).stdout.split('\n')) {
      if (line.startsWith('*') || line === 'COMMIT') lines.push(line);
      if (line === '*nat') lines.push(...chains.map((c) => `:${c} - [0:0]`));
      if (line.startsWith('-A ') && renames.some(([from]) => line.includes(from)) && n++ % 2 === 0)
        lines.push(renames.reduce((l, [from, to]) => l.replaceAll(from, to), line));
    }
    await node.exec([restore, '--noflush'], { input: `${lines.join('\n')}\n` });
  }
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
      const [byPlugins, byAllocnet] = await Promise.all([t.lab.node('plug'), t.lab.node('nat')]);

      // allocnet's setup in one node.
      const c = await configuratorOn(byAllocnet, portmap);
      const ctr = await t.lab.container();
      const { status, attachment } = await c.setup(spec, ctr.path);
      expect(status.address).toBe('10.77.0.2');
      expect(status.addressIpv6).toBe('fd00:77::2');
      expect(await c.check(attachment)).toEqual({ ran: true });

      // The plugins' own ADD in the other, for the same network name, id and port mappings.
      const network = parseNetworkConfig(
        conflist(join(t.tmp.path, 'ipam-plugins'), portmap),
        'plugins',
      );
      const plain = runtimeOn(byPlugins);
      const ctr2 = await t.lab.container();
      const cni = pluginsCni(attachment, ALLOC_ID, ctr2.path);
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
          conflist(join(t.tmp.path, `ipam-${byAllocnet.name}`), portmap),
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

  it("makes shared chains removed since the first setup again, and the ruleset is the plugins' again", async () => {
    const [byPlugins, byAllocnet] = await Promise.all([t.lab.node('plug'), t.lab.node('heal')]);
    const c = await configuratorOn(byAllocnet, {});
    const network = parseNetworkConfig(conflist(join(t.tmp.path, 'ipam-plugins'), {}), 'plugins');
    const plain = runtimeOn(byPlugins);
    const second = { ...spec, allocId: SECOND_ID };
    const { attachment } = await c.setup(spec, (await t.lab.container()).path);
    await plain.add(network, pluginsCni(attachment, ALLOC_ID, (await t.lab.container()).path));
    // Someone removes the firewall's and portmap's shared chains in both nodes.
    await Promise.all([dropSharedChains(byPlugins), dropSharedChains(byAllocnet)]);
    const again = await c.setup(second, (await t.lab.container()).path);
    await plain.add(
      network,
      pluginsCni(again.attachment, SECOND_ID, (await t.lab.container()).path),
    );
    expect(await byAllocnet.ruleset()).toContain('-j CNI-HOSTPORT-DNAT');
    expect(await byAllocnet.ruleset()).toEqual(await byPlugins.ruleset());
    expect(await c.check(again.attachment)).toEqual({ ran: true });
  });

  it('writes only what is not there yet and keeps a chain of the allocation that exists, as the plugins do', async () => {
    const [byPlugins, byAllocnet] = await Promise.all([t.lab.node('plug'), t.lab.node('uniq')]);
    const c = await configuratorOn(byAllocnet, {});
    const network = parseNetworkConfig(conflist(join(t.tmp.path, 'ipam-plugins'), {}), 'plugins');
    const plain = runtimeOn(byPlugins);
    const { attachment } = await c.setup(spec, (await t.lab.container()).path);
    await plain.add(network, pluginsCni(attachment, ALLOC_ID, (await t.lab.container()).path));
    // Left in both nodes as if by an earlier holder: half the second allocation's rules, and
    // its chains (the second gets the next addresses).
    const [a, b] = [allocChains('natnet', ALLOC_ID), allocChains('natnet', SECOND_ID)];
    const renames: [string, string][] = [
      [ALLOC_ID, SECOND_ID],
      [a.dnat, b.dnat],
      [a.masq, b.masq],
      ['10.77.0.2/', '10.77.0.3/'],
      ['10.77.0.2:', '10.77.0.3:'],
      ['fd00:77::2/', 'fd00:77::3/'],
      ['[fd00:77::2]', '[fd00:77::3]'],
    ];
    await Promise.all([byPlugins, byAllocnet].map((n) => seed(n, renames, [b.dnat, b.masq])));
    const seeded = await byPlugins.ruleset();
    expect(seeded).toContain(`-A CNI-FORWARD -d 10.77.0.3/32`);
    expect(await byAllocnet.ruleset()).toEqual(seeded);
    const second = await c.setup({ ...spec, allocId: SECOND_ID }, (await t.lab.container()).path);
    expect(second.status.address).toBe('10.77.0.3');
    await plain.add(
      network,
      pluginsCni(second.attachment, SECOND_ID, (await t.lab.container()).path),
    );
    expect(await byAllocnet.ruleset()).toEqual(await byPlugins.ruleset());
    expect(await c.check(second.attachment)).toEqual({ ran: true });
  });

  it("deletes the node's UDP conntrack entries to a mapped host port, and no others", async () => {
    const node = await t.lab.node('ct');
    const client = await t.lab.client(node);
    const c = await configuratorOn(node, {});
    const first = await c.setup(spec, (await t.lab.container()).path);
    // A flow through the mapped port 5353 (DNATed to the first allocation), one to 5354.
    for (const port of [5353, 5354])
      await client.netns.exec([
        'bash',
        '-c',
        `echo stale > /dev/udp/${client.nodeAddress}/${port}`,
      ]);
    const flows = async () =>
      (await node.exec(['cat', '/proc/net/nf_conntrack'])).stdout
        .split('\n')
        .filter((l) => / udp /.test(l) && l.includes(`src=${client.address} `))
        .map((l) => /dport=(\d+)/.exec(l)?.[1])
        .sort();
    expect(await flows()).toEqual(['5353', '5354']);
    await c.teardown(ALLOC_ID, first.attachment);
    expect(await flows()).toEqual(['5353', '5354']);
    // A new allocation on the same host port: the stale entry would keep sending it to the old one.
    const second = await c.setup({ ...spec, allocId: SECOND_ID }, (await t.lab.container()).path);
    expect(await flows()).toEqual(['5354']);
    await c.teardown(SECOND_ID, second.attachment);
  });

  it('a setup given an address another setup picked writes its rules once that setup removed its own', async () => {
    // 200 setups at once (alloc-runner.test.ts): a setup whose search passed 64 taken addresses
    // leaves the choice to host-local, which may give it one another setup picked, and wrote
    // rules for, while that one's ADD ran; that one's host-local then refuses it. Here the second
    // setup asks for the first one's picks itself (`ips`), which the search never touches either.
    const node = await t.lab.node('pick');
    const runtime = runtimeOn(node);
    const c = await configuratorOn(node, {}, runtime);
    // The bridge is there: the next setup writes its rules while its ADD runs.
    await c.setup(spec, (await t.lab.container()).path);
    const forward = async () => (await node.exec(['iptables', '-S', 'CNI-FORWARD'])).stdout;
    const add = runtime.add.bind(runtime);
    let second: Promise<unknown> | undefined;
    let secondAdded = false;
    let picked: string[] = [];
    runtime.add = async (network, attachment, call) => {
      if (attachment.containerId === SECOND_ID) {
        const added = await add(network, attachment, call);
        secondAdded = true;
        return added;
      }
      if (attachment.containerId !== THIRD_ID) return add(network, attachment, call);
      picked = (network.plugins[1]?.raw.args as { cni: { ips: string[] } }).cni.ips;
      expect(picked).toEqual(['10.77.0.3', 'fd00:77::3']);
      // Its rules for its picks are in while its ADD runs.
      await waitFor('the picked address’s firewall rules', async () =>
        (await forward()).includes('-d 10.77.0.3/32') ? true : undefined,
      );
      second = c.setup(
        { ...spec, allocId: SECOND_ID, ports: [], ips: picked },
        (await t.lab.container()).path,
      );
      await waitFor('the second setup’s ADD', () =>
        Promise.resolve(secondAdded ? true : undefined),
      );
      // Time for the second setup's write, had it not waited.
      await sleep(500);
      // host-local refuses the pick: it went to the second setup.
      throw new CniError('requested IP address 10.77.0.3 is not available', {
        code: 'invalid-config',
        msg: 'not available',
      });
    };
    await expect(
      c.setup({ ...spec, allocId: THIRD_ID, ports: [] }, (await t.lab.container()).path),
    ).rejects.toMatchObject({ code: 'setup-failed' });
    const given = (await second) as Awaited<ReturnType<typeof c.setup>>;
    expect([given.status.address, given.status.addressIpv6]).toEqual(picked);
    // Every rule of the second setup is there: the first one's removal came before its write.
    expect(await c.check(given.attachment)).toEqual({ ran: true });
    expect(await forward()).toContain('-A CNI-FORWARD -d 10.77.0.3/32 -m conntrack');
  });

  it('runs portmap itself for an option it does not know (conditionsV4)', async () => {
    const node = await t.lab.node('fallback');
    const c = await configuratorOn(node, { snat: true, conditionsV4: ['!', '-d', '192.0.2.1'] });
    const ctr = await t.lab.container();
    const { attachment } = await c.setup(spec, ctr.path);
    const v4 = (await node.exec(['iptables', '-t', 'nat', '-S', 'CNI-HOSTPORT-DNAT'])).stdout;
    // The plugin's jumps carry the condition; the native path could not have written it.
    expect(v4).toMatch(/ ! -d 192\.0\.2\.1\/32 .*-j CNI-DN-/);
    await c.teardown(ALLOC_ID, attachment);
    expect((await node.exec(['iptables', '-t', 'nat', '-S'])).stdout).not.toContain('CNI-DN-');
  });
});
