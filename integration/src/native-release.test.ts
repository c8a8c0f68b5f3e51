// allocnet's release of host-local's reservations at teardown (cni-configurator
// native-release.ts), on the real Debian plugins, in throwaway namespaces: the bridge plugin's DEL
// runs without IPAM and the teardown removes the allocation's reservation files itself, exactly
// those host-local's DEL would remove; anything it does not know runs host-local's own DEL. The
// plugins are found through a directory of links to /usr/lib/cni, so that a test can take
// host-local away after the ADD: a DEL that still runs it then fails. Needs root and
// containernetworking-plugins.
import { mkdir, readFile, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createCniRuntime, createNodePluginExec } from '@allocnet/cni';
import { createCniConfigurator } from '@allocnet/cni-configurator';
import type { AllocNetworkSpec } from '@allocnet/cni-configurator';
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

/** A configurator on `node` for a dual-stack bridge network whose host-local has `ipam` too. */
async function setUp(node: TestNetns, ipam: Record<string, unknown> = {}) {
  const plugins = join(t.tmp.path, 'plugins');
  await mkdir(plugins);
  for (const name of await readdir(PLUGIN_DIR))
    await symlink(join(PLUGIN_DIR, name), join(plugins, name));
  const confDir = join(t.tmp.path, 'conf');
  await mkdir(confDir);
  const ipamDir = join(t.tmp.path, 'ipam');
  await writeFile(
    join(confDir, `${NETWORK}.conflist`),
    JSON.stringify({
      cniVersion: '1.0.0',
      name: NETWORK,
      plugins: [
        { type: 'loopback' },
        {
          type: 'bridge',
          bridge: 'relbr0',
          ipMasq: true,
          isGateway: true,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: '10.78.0.0/24' }], [{ subnet: 'fd00:78::/64' }]],
            dataDir: ipamDir,
            ...ipam,
          },
        },
        { type: 'firewall', backend: 'iptables' },
      ],
    }),
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
  });
  t.configurator = made;
  return {
    c: made,
    dir: join(ipamDir, NETWORK),
    /** Takes host-local away: a DEL that runs it fails from now on. */
    dropHostLocal: () => rm(join(plugins, 'host-local')),
  };
}

/** The reservation files of `dir` and their texts (the lock and last-reserved files left out). */
async function reservations(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of await readdir(dir))
    if (name !== 'lock' && !name.startsWith('last_reserved_ip'))
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

  it.each<[string, Record<string, unknown>, string | undefined]>([
    ['an option the native path does not know', { someOption: true }, undefined],
    ['a reservation in the older text (the id alone)', {}, ALLOC_ID],
  ])('runs host-local’s own DEL for %s', async (_, ipam, rewrite) => {
    const node = await t.lab.node('plug');
    const { c, dir, dropHostLocal } = await setUp(node, ipam);
    const ctr = await t.lab.container();
    const { attachment } = await c.setup(spec, ctr.path);
    if (rewrite !== undefined) await writeFile(join(dir, '10.78.0.2'), rewrite);
    await dropHostLocal();

    const report = await c.teardown(ALLOC_ID, attachment);
    // The bridge DEL exec'd its IPAM, which is gone now; the audit then swept the reservations.
    expect(report.delError).toMatch(/host-local/);
    expect(report.removed.reservations.map((r) => r.address).sort()).toEqual([
      '10.78.0.2',
      'fd00:78::2',
    ]);
    expect(await reservations(dir)).toEqual({});
  });
});
