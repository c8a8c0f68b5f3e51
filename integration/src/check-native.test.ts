// The native CHECK of loopback, bridge and host-local (cni-configurator's check-plugins.ts)
// against the plugins' own CHECK, on the real Debian plugins in throwaway namespaces (a node
// namespace stands for the host). Each case sets an allocation up, breaks one thing the plugins'
// CHECK looks at (or one it does not), and asserts that the native CHECK fails, naming it,
// exactly when the plugins' CHECK (loopback and bridge with host-local, exec'd) fails. Needs
// root and containernetworking-plugins.
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createCniRuntime, createNodePluginExec, parseNetworkConfigText } from '@allocnet/cni';
import type { CniRuntime } from '@allocnet/cni';
import { createCniConfigurator, createRouteReader } from '@allocnet/cni-configurator';
import type { AllocAttachment, CniConfigurator } from '@allocnet/cni-configurator';
import { createIptables } from '@allocnet/iptables-node';
import { requireNetworkTestHost } from '@allocnet/testns';
import type { TestNetns } from '@allocnet/testns';
import { labPerTest } from './fixtures/lab-per-test.js';

const PLUGIN_DIR = '/usr/lib/cni';

const t = labPerTest({ node: true });

let runtime: CniRuntime;

beforeAll(async () => {
  await requireNetworkTestHost(['ip', 'iptables', 'nsenter', `${PLUGIN_DIR}/bridge`]);
});

async function make(ipv6 = false): Promise<CniConfigurator> {
  runtime = createCniRuntime({
    pluginDirs: [PLUGIN_DIR],
    cacheDir: join(t.tmp.path, 'cache'),
    exec: createNodePluginExec({ netns: t.node.name }),
  });
  t.configurator = await createCniConfigurator({
    runtime,
    routeReader: createRouteReader({ netns: t.node.path }),
    iptables: {
      ipv4: createIptables({ netns: t.node.path }),
      ipv6: createIptables({ family: 'ipv6', netns: t.node.path }),
    },
    defaultNetwork: {
      ipamDataDir: join(t.tmp.path, 'ipam'),
      ...(ipv6 ? { ipv6Subnet: 'fd00:a:b::/64' } : {}),
    },
    watchConfDir: false,
  });
  return t.configurator;
}

let seq = 0;

/** The plugins' own CHECK of loopback and bridge (with host-local): its error, or undefined. */
async function pluginCheck(a: AllocAttachment): Promise<string | undefined> {
  const whole = JSON.parse(a.network.config) as { plugins: { type: string }[] };
  const chain = parseNetworkConfigText(
    JSON.stringify({
      ...whole,
      plugins: whole.plugins.filter((p) => p.type === 'loopback' || p.type === 'bridge'),
    }),
    'test',
  );
  try {
    await runtime.check(chain, {
      containerId: a.allocId,
      netns: a.netns,
      ifName: a.ifName,
      args: a.args,
      capabilityArgs: {},
    });
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

/** The configurator's (native) CHECK: its error, or undefined. */
async function nativeCheck(c: CniConfigurator, a: AllocAttachment): Promise<string | undefined> {
  try {
    await c.check(a);
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

interface Setup {
  readonly a: AllocAttachment;
  readonly ctr: TestNetns;
  readonly address: string;
  readonly veth: string;
  readonly ipamFile: string;
}

/** What breaks, and what the native CHECK says then (undefined: the plugins find nothing either). */
type Case = readonly [string, (s: Setup) => Promise<unknown>, ((s: Setup) => string) | undefined];

const CASES: readonly Case[] = [
  ['nothing', () => Promise.resolve(), undefined],
  [
    'the address removed',
    (s) => s.ctr.exec(['ip', 'addr', 'del', `${s.address}/20`, 'dev', 'eth0']),
    (s) => `bridge: address ${s.address}/20 is not on "eth0" in the sandbox`,
  ],
  [
    'the default route removed',
    (s) => s.ctr.exec(['ip', 'route', 'del', 'default']),
    () => 'bridge: the sandbox has no route to 0.0.0.0/0',
  ],
  [
    'the subnet route removed',
    (s) => s.ctr.exec(['ip', 'route', 'del', '172.26.64.0/20', 'dev', 'eth0']),
    (s) => `bridge: the sandbox has no route to 172.26.64.0/20 (the subnet of ${s.address}/20)`,
  ],
  [
    'the veth detached from the bridge',
    (s) => t.node.exec(['ip', 'link', 'set', s.veth, 'nomaster']),
    () =>
      'bridge: no veth of the result on the node is the peer of "eth0" enslaved to bridge "nomad"',
  ],
  [
    'the host veth given another MAC',
    (s) => t.node.exec(['ip', 'link', 'set', s.veth, 'address', '02:00:00:00:aa:01']),
    (s) => `bridge: interface "${s.veth}" has MAC 02:00:00:00:aa:01, the result says`,
  ],
  [
    'the sandbox interface deleted',
    (s) => s.ctr.exec(['ip', 'link', 'del', 'eth0']),
    () => 'bridge: interface "eth0" is not there in the sandbox',
  ],
  [
    'the bridge in promiscuous mode',
    () => t.node.exec(['ip', 'link', 'set', 'nomad', 'promisc', 'on']),
    () => 'bridge: bridge "nomad" is in promiscuous mode, its config says promiscMode false',
  ],
  [
    'lo down',
    (s) => s.ctr.exec(['ip', 'link', 'set', 'lo', 'down']),
    () => 'loopback: interface "lo" is down in the sandbox',
  ],
  [
    'the reservation file deleted',
    (s) => rm(s.ipamFile),
    (s) => `host-local: no address of "${s.a.allocId}" (eth0) is reserved in`,
  ],
  [
    'the reservation file rewritten for another container',
    (s) => writeFile(s.ipamFile, '00000000-0000-4000-8000-ffffffffffff\r\neth0'),
    (s) => `host-local: no address of "${s.a.allocId}" (eth0) is reserved in`,
  ],
  // Neither CHECK looks at the bridge's own address (the plugin's CHECK does not): both pass.
  [
    'the bridge’s address removed',
    () => t.node.exec(['ip', 'addr', 'flush', 'dev', 'nomad']),
    undefined,
  ],
];

describe('the native CHECK against the plugins’ CHECK', () => {
  it('fails, naming what broke, exactly when the plugins’ CHECK fails', async () => {
    const c = await make();
    for (const [what, breakIt, says] of CASES) {
      const ctr = await t.lab.container('ctr');
      const allocId = `00000000-0000-4000-8000-${(++seq).toString(16).padStart(12, '0')}`;
      const { status, attachment } = await c.setup(
        { allocId, namespace: 'default', jobId: 'j', groupName: 'g' },
        ctr.path,
      );
      const veth = attachment.result?.interfaces.find((i) => i.name.startsWith('veth'))?.name ?? '';
      const s: Setup = {
        a: attachment,
        ctr,
        address: status.address,
        veth,
        ipamFile: join(t.tmp.path, 'ipam', 'nomad', status.address),
      };
      expect([what, await pluginCheck(attachment), await nativeCheck(c, attachment)]).toEqual([
        what,
        undefined,
        undefined,
      ]);
      await breakIt(s);
      const plugin = await pluginCheck(attachment);
      const native = await nativeCheck(c, attachment);
      const expected = says?.(s);
      expect([what, plugin === undefined, native === undefined]).toEqual([
        what,
        expected === undefined,
        expected === undefined,
      ]);
      if (expected !== undefined)
        expect(native).toContain(`CHECK of "${allocId}" in network "nomad" failed: ${expected}`);
      if (what === 'the bridge in promiscuous mode')
        await t.node.exec(['ip', 'link', 'set', 'nomad', 'promisc', 'off']);
      if (what === 'the bridge’s address removed')
        await t.node.exec(['ip', 'addr', 'add', '172.26.64.1/20', 'dev', 'nomad']);
      await c.teardown(allocId, attachment);
    }
  });

  it('passes a healthy dual-stack allocation as the plugins do, and fails when its IPv6 address goes', async () => {
    const c = await make(true);
    const ctr = await t.lab.container('ctr');
    const { status, attachment } = await c.setup(
      {
        allocId: '00000000-0000-4000-8000-00000000ffff',
        namespace: 'default',
        jobId: 'j',
        groupName: 'g',
      },
      ctr.path,
    );
    const v6 = attachment.addresses.find((a) => a.includes(':')) ?? '';
    expect(v6).not.toBe('');
    expect(await pluginCheck(attachment)).toBeUndefined();
    expect(await nativeCheck(c, attachment)).toBeUndefined();
    await ctr.exec(['ip', 'addr', 'del', `${v6}/64`, 'dev', 'eth0']);
    expect(await pluginCheck(attachment)).toContain('Failed to match addr');
    expect(await nativeCheck(c, attachment)).toBe(
      `CHECK of "${status.allocId}" in network "nomad" failed: bridge: address ${v6}/64 is not on "eth0" in the sandbox`,
    );
    await c.teardown(status.allocId, attachment);
  });
});
