// allocnet's own part of host-local's work (cni-configurator native-pick.ts and
// native-release.ts), on the real Debian plugins, in throwaway namespaces. A setup picks the
// address host-local's iterator would and asks host-local for it: the reservation files and
// last-reserved files equal those host-local alone leaves for the same ADDs and DELs, round its
// ranges and past their gateways. A teardown runs the bridge plugin's DEL without IPAM (ptp's with
// the static IPAM) and removes the allocation's reservation files itself, exactly those
// host-local's DEL would remove; anything it does not know runs host-local's own DEL. The plugins
// are found through a directory of links to /usr/lib/cni, so that a test can take host-local away
// after the ADD: a DEL that still runs it then fails. Needs root and containernetworking-plugins.
import { mkdir, readFile, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createCniRuntime, createNodePluginExec, parseNetworkConfig } from '@allocnet/cni';
import { createCniConfigurator } from '@allocnet/cni-configurator';
import type {
  AllocAttachment,
  AllocNetworkSpec,
  CniConfiguratorOptions,
} from '@allocnet/cni-configurator';
import { createIptables } from '@allocnet/iptables-node';
import { requireNetworkTestHost } from '@allocnet/testns';
import type { TestNetns } from '@allocnet/testns';
import { labPerTest } from './fixtures/lab-per-test.js';

const PLUGIN_DIR = '/usr/lib/cni';
const NETWORK = 'relnet';
const ALLOC_ID = '00000000-0000-4000-8000-00000000a040';

const t = labPerTest();

beforeAll(async () => {
  await requireNetworkTestHost(['ip', 'iptables', 'nsenter', `${PLUGIN_DIR}/host-local`]);
});

const spec: AllocNetworkSpec = {
  allocId: ALLOC_ID,
  namespace: 'default',
  jobId: 'web',
  groupName: 'frontend',
  network: NETWORK,
  ports: [],
};

type Logger = NonNullable<CniConfiguratorOptions['logger']>;

const RANGES = [[{ subnet: '10.78.0.0/24' }], [{ subnet: 'fd00:78::/64' }]];

/**
 * The test's network, dual-stack, its host-local data in `dataDir`, its IPAM with `ipam` too;
 * its main plugin bridge, or ptp.
 */
function conflist(
  dataDir: string,
  ipam: Record<string, unknown>,
  main: 'bridge' | 'ptp' = 'bridge',
) {
  const own = main === 'bridge' ? { bridge: 'relbr0', isGateway: true } : {};
  return {
    cniVersion: '1.0.0',
    name: NETWORK,
    plugins: [
      { type: 'loopback' },
      {
        type: main,
        ...own,
        ipMasq: true,
        ipam: { type: 'host-local', ranges: RANGES, dataDir, ...ipam },
      },
      { type: 'firewall', backend: 'iptables' },
    ],
  };
}

/** A configurator on `node` for the test's network. */
async function setUp(
  node: TestNetns,
  options: { ipam?: Record<string, unknown>; logger?: Logger; main?: 'bridge' | 'ptp' } = {},
) {
  const plugins = join(t.tmp.path, 'plugins');
  await mkdir(plugins);
  for (const name of await readdir(PLUGIN_DIR))
    await symlink(join(PLUGIN_DIR, name), join(plugins, name));
  const confDir = join(t.tmp.path, 'conf');
  await mkdir(confDir);
  const ipamDir = join(t.tmp.path, 'ipam');
  await writeFile(
    join(confDir, `${NETWORK}.conflist`),
    JSON.stringify(conflist(ipamDir, options.ipam ?? {}, options.main)),
  );
  const made = await createCniConfigurator({
    runtime: createCniRuntime({
      pluginDirs: [plugins],
      cacheDir: join(t.tmp.path, 'cache'),
      exec: createNodePluginExec({ netns: node.name }),
    }),
    iptables: {
      ipv4: createIptables({ netns: node.path }),
      ipv6: createIptables({ family: 'ipv6', netns: node.path }),
    },
    defaultNetwork: { ipamDataDir: join(t.tmp.path, 'default-ipam') },
    confDir,
    watchConfDir: false,
    retry: { attempts: 1 },
    ...(options.logger === undefined ? {} : { logger: options.logger }),
  });
  t.configurator = made;
  return {
    c: made,
    dir: join(ipamDir, NETWORK),
    /** Takes host-local away: a DEL that runs it fails from now on. */
    dropHostLocal: () => rm(join(plugins, 'host-local')),
    /** Takes another plugin away. */
    drop: (name: string) => rm(join(plugins, name)),
  };
}

/** The files of `dir` and their texts, the lock left out; with `last`, the last-reserved ones too. */
async function reservations(dir: string, last = false): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of await readdir(dir))
    if (name !== 'lock' && (last || !name.startsWith('last_reserved_ip')))
      out[name] = await readFile(join(dir, name), 'utf8');
  return out;
}

describe("the teardown's own release of host-local's reservations", () => {
  it('removes the allocation’s reservations itself and runs the bridge DEL without its IPAM', async () => {
    const node = await t.lab.node('rel');
    const { c, dir, dropHostLocal } = await setUp(node);
    const ctr = await t.lab.container();
    const { attachment } = await c.setup(spec, ctr.path);
    const own = `${ALLOC_ID}\r\neth0`;
    expect(await reservations(dir)).toEqual({ '10.78.0.2': own, 'fd00:78::2': own });
    // Another container's reservation, and a hold of another allocation: host-local's DEL
    // leaves both.
    await writeFile(join(dir, '10.78.0.9'), 'other-container\r\neth0');
    await writeFile(join(dir, '10.78.0.10'), 'other-alloc\r\neth0\r\nallocnet-hold');
    // With host-local gone, a DEL that ran it would fail.
    await dropHostLocal();

    const report = await c.teardown(ALLOC_ID, attachment);
    expect(report.delError).toBeUndefined();
    // The audit's probes found the reservations gone: it removed nothing.
    expect(report.removed).toEqual({ rules: [], chains: [], reservations: [], cacheFiles: [] });
    expect(await reservations(dir)).toEqual({
      '10.78.0.9': 'other-container\r\neth0',
      '10.78.0.10': 'other-alloc\r\neth0\r\nallocnet-hold',
    });
    // The bridge DEL ran: the container's end of the veth is gone.
    expect(await ctr.links()).not.toContain('eth0');
  });

  it('runs ptp’s DEL with the static IPAM and removes the reservations itself', async () => {
    const node = await t.lab.node('ptp');
    const { c, dir, dropHostLocal } = await setUp(node, { main: 'ptp' });
    const ctr = await t.lab.container();
    const { attachment } = await c.setup(spec, ctr.path);
    const own = `${ALLOC_ID}\r\neth0`;
    expect(await reservations(dir)).toEqual({ '10.78.0.2': own, 'fd00:78::2': own });
    await writeFile(join(dir, '10.78.0.9'), 'other-container\r\neth0');
    await dropHostLocal();

    const report = await c.teardown(ALLOC_ID, attachment);
    expect(report.delError).toBeUndefined();
    expect(report.removed).toEqual({ rules: [], chains: [], reservations: [], cacheFiles: [] });
    expect(await reservations(dir)).toEqual({ '10.78.0.9': 'other-container\r\neth0' });
    // ptp's DEL ran: the container's interface is gone.
    expect(await ctr.links()).not.toContain('eth0');
  });

  it.each<[string, { ipam?: Record<string, unknown>; rewrite?: string; main?: 'ptp' }]>([
    ['an option the native path does not know', { ipam: { someOption: true } }],
    ['a reservation in the older text (the id alone)', { rewrite: ALLOC_ID }],
    ['ptp when no static plugin is there', { main: 'ptp' }],
  ])('runs host-local’s own DEL for %s', async (_, { ipam = {}, rewrite, main }) => {
    const node = await t.lab.node('plug');
    const { c, dir, dropHostLocal, drop } = await setUp(node, { ipam, ...(main && { main }) });
    const ctr = await t.lab.container();
    const { attachment } = await c.setup(spec, ctr.path);
    if (rewrite !== undefined) await writeFile(join(dir, '10.78.0.2'), rewrite);
    if (main === 'ptp') await drop('static');
    await dropHostLocal();

    const report = await c.teardown(ALLOC_ID, attachment);
    // The main plugin's DEL exec'd its IPAM, which is gone now; the audit then swept the
    // reservations.
    expect(report.delError).toMatch(/host-local/);
    expect(report.removed.reservations.map((r) => r.address).sort()).toEqual([
      '10.78.0.2',
      'fd00:78::2',
    ]);
    expect(await reservations(dir)).toEqual({});
  });
});

describe("the setup's own choice of host-local's address", () => {
  it('asks host-local for the address it would choose: the same files as host-local alone, round the ranges', async () => {
    // Three addresses a family: v4 from .2 to .5 with the gateway .3 in the middle, v6 ::10–::12.
    const ipam = {
      ranges: [
        [
          {
            subnet: '10.78.0.0/24',
            rangeStart: '10.78.0.2',
            rangeEnd: '10.78.0.5',
            gateway: '10.78.0.3',
          },
        ],
        [{ subnet: 'fd00:78::/64', rangeStart: 'fd00:78::10', rangeEnd: 'fd00:78::12' }],
      ],
    };
    const picked: unknown[] = [];
    const logger: Logger = {
      debug: (message: string, fields?: Record<string, unknown>) => {
        if (message.startsWith('host-local asked for')) picked.push(fields?.addresses);
      },
      info: () => undefined,
      warn: () => undefined,
      error: () => undefined,
    };
    const [node, other] = await Promise.all([t.lab.node('pick'), t.lab.node('host')]);
    const { c, dir } = await setUp(node, { ipam, logger });
    // host-local alone, in a node and directory of its own, for the same ids.
    const hostDir = join(t.tmp.path, 'host-ipam');
    const plain = createCniRuntime({
      pluginDirs: [PLUGIN_DIR],
      cacheDir: join(t.tmp.path, 'host-cache'),
      exec: createNodePluginExec({ netns: other.name }),
    });
    const network = parseNetworkConfig(conflist(hostDir, ipam), 'host-local alone');
    const id = (n: number) => `00000000-0000-4000-8000-00000000b04${n}`;
    const attachments = new Map<number, AllocAttachment>();
    const cni = (n: number, netns = '') => ({ containerId: id(n), netns, ifName: 'eth0' });
    const add = async (n: number) => {
      const [mine, theirs] = [await t.lab.container(), await t.lab.container()];
      attachments.set(n, (await c.setup({ ...spec, allocId: id(n) }, mine.path)).attachment);
      await plain.add(network, cni(n, theirs.path));
    };
    const same = async () => {
      const alone = await reservations(join(hostDir, NETWORK), true);
      expect(await reservations(dir, true)).toEqual(alone);
    };

    await add(1);
    await add(2);
    await same();
    await c.teardown(id(1), attachments.get(1));
    await plain.del(network, cni(1));
    await same();
    // After the last reserved: .5 and ::12, then round to .2 and ::10 (.4 and ::11 are taken).
    await add(3);
    await add(4);
    await same();
    expect(Object.keys(await reservations(dir)).sort()).toEqual([
      '10.78.0.2', '10.78.0.4', '10.78.0.5', 'fd00:78::10', 'fd00:78::11', 'fd00:78::12',
    ]); // prettier-ignore
    expect(picked).toEqual([
      ['10.78.0.2', 'fd00:78::10'],
      ['10.78.0.4', 'fd00:78::11'],
      ['10.78.0.5', 'fd00:78::12'],
      ['10.78.0.2', 'fd00:78::10'],
    ]);
    const fourth = attachments.get(4);
    if (fourth === undefined) throw new Error('no attachment of the fourth setup');
    expect(await c.check(fourth)).toEqual({ ran: true });
    // Full: host-local is left to say so, as it says it alone.
    const last = await t.lab.container();
    await expect(c.setup({ ...spec, allocId: id(5) }, last.path)).rejects.toThrow(
      /no IP addresses available in range set/,
    );
    expect(picked).toHaveLength(4);
  });
});
