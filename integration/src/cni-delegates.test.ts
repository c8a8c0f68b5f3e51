// allocnet-cni with a conflist's `delegates` (issue 29): the real plugin exec'd as a runtime does,
// the real agent in a throwaway node namespace, Debian's plugins in a namespace the "runtime"
// (this test) made. One ADD gives the sandbox eth0 and net1, all or nothing: a second network
// whose chain fails leaves nothing of either; CHECK covers the second network; GC of the
// conflist takes every attachment back. Needs root, iproute2, iptables,
// containernetworking-plugins and the built plugin; never touches the root namespace.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { unary } from '@allocnet/proto';
import { requireNetworkTestHost } from '@allocnet/testns';
import type { TestNetns } from '@allocnet/testns';
import { CNI_PLUGIN, PLUGIN_DIR, createAgentHost } from './fixtures/agent-host.js';
import type { AgentHost } from './fixtures/agent-host.js';
import { cniNodeState, pluginConfig, runPlugin, sandboxId } from './fixtures/cni-call.js';
import { interfaceAddresses, writeBridgeNetwork, writeFailingPlugin } from './fixtures/networks.js';

let host: AgentHost;

beforeAll(async () => {
  await requireNetworkTestHost(['ip', 'iptables', 'nsenter', `${PLUGIN_DIR}/bridge`, CNI_PLUGIN]);
});

beforeEach(async () => {
  host = await createAgentHost();
});

afterEach(async () => {
  await host.dispose();
});

const K8S_ARGS = 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0';

function config(delegates: readonly string[], extra: Record<string, unknown> = {}) {
  return pluginConfig(host.cniSocket, host.cniQueueDir, { delegates, ...extra });
}

/** ADD then DEL of a throwaway sandbox on `delegates`: the bridges and shared chains then stay. */
async function warm(delegates: readonly string[]): Promise<void> {
  const ns = await host.lab.container('warm');
  const id = sandboxId();
  const call = { containerId: id, netns: ns.path, config: config(delegates) };
  expect((await runPlugin({ ...call, command: 'ADD' })).code).toBe(0);
  expect((await runPlugin({ ...call, command: 'DEL' })).code).toBe(0);
}

/** The sandbox's interfaces other than lo, with their IPv4 addresses. */
async function interfacesOf(ns: TestNetns): Promise<Record<string, string[]>> {
  const all = await interfaceAddresses(ns.path);
  return Object.fromEntries(Object.entries(all).filter(([name]) => name !== 'lo'));
}

describe('allocnet-cni with delegates', () => {
  it('fails the ADD naming the second network when its chain fails, and leaves nothing of either network', async () => {
    // A second network whose chain fails on ADD after bridge made net1 and reserved its address.
    const plugins = join(host.dir, 'fault-plugins');
    await writeFailingPlugin(plugins, 'fail-add', { code: 999, msg: 'broken on purpose' });
    await writeFile(
      join(host.confDir, '50-broken.conflist'),
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 'broken',
        plugins: [
          {
            type: 'bridge',
            bridge: 'alnbroken0',
            isGateway: true,
            ipMasq: true,
            ipam: {
              type: 'host-local',
              ranges: [[{ subnet: '10.91.0.0/24' }]],
              dataDir: host.ipamDir,
            },
          },
          { type: 'fail-add' },
        ],
      }),
    );
    await host.start({ args: ['--plugin-dir', PLUGIN_DIR, '--plugin-dir', plugins] });
    await warm(['nomad']);
    const baseline = await cniNodeState(host, 'broken');

    const pod = await host.lab.container('pod');
    const id = sandboxId();
    const added = await runPlugin({
      command: 'ADD',
      containerId: id,
      netns: pod.path,
      args: K8S_ARGS,
      config: config(['nomad', 'broken']),
    });

    expect(added.code).toBe(1);
    expect(added.json).toMatchObject({ cniVersion: '1.0.0', code: 999 });
    const msg = String(added.json?.msg);
    expect(msg).toContain(
      `setup of allocation "${id}" failed: attachment 1 (net1, network "broken"): `,
    );
    expect(msg).toContain('broken on purpose');
    // Nothing of either network: no interface in the sandbox, no rule, reservation or record.
    expect(await interfacesOf(pod)).toEqual({});
    expect(await cniNodeState(host, 'broken')).toEqual(baseline);
    // The runtime's DEL after a failed ADD (containerd sends one) succeeds.
    expect(
      (
        await runPlugin({
          command: 'DEL',
          containerId: id,
          netns: pod.path,
          config: config(['nomad', 'broken']),
        })
      ).code,
    ).toBe(0);
    expect(await cniNodeState(host, 'broken')).toEqual(baseline);
  });

  it('CHECKs the second network too: net1 gone is code 102 naming it; DEL takes both back', async () => {
    await writeBridgeNetwork(host, { name: 'storage', bridge: 'alnstor0', subnet: '10.89.0.0/24' });
    await host.start();
    await warm(['nomad', 'storage']);
    const baseline = await cniNodeState(host, 'storage');

    const pod = await host.lab.container('pod');
    const id = sandboxId();
    const call = {
      containerId: id,
      netns: pod.path,
      args: K8S_ARGS,
      config: config(['nomad', 'storage']),
    };
    const added = await runPlugin({ ...call, command: 'ADD' });
    expect(added.code).toBe(0);
    const inside = await interfacesOf(pod);
    expect(Object.keys(inside).sort()).toEqual(['eth0', 'net1']);
    // The result lists both, eth0's first, each address on its interface.
    const interfaces = added.json?.interfaces as { name: string; sandbox?: string }[];
    const ips = added.json?.ips as { address: string; interface: number }[];
    const inSandbox = (name: string) =>
      interfaces.findIndex((i) => i.name === name && i.sandbox === pod.path);
    expect(inSandbox('eth0')).toBeGreaterThanOrEqual(0);
    expect(inSandbox('net1')).toBeGreaterThan(inSandbox('eth0'));
    expect(ips.map((ip) => [interfaces[ip.interface]?.name, ip.address.split('/')[0]])).toEqual([
      ['eth0', inside.eth0?.[0]],
      ['net1', inside.net1?.[0]],
    ]);
    expect((await runPlugin({ ...call, command: 'CHECK' })).code).toBe(0);

    // The second network's interface removed behind the agent's back: CHECK fails naming it.
    await execa('nsenter', [`--net=${pod.path}`, 'ip', 'link', 'del', 'net1']);
    const checked = await runPlugin({ ...call, command: 'CHECK' });
    expect(checked.code).toBe(1);
    expect(checked.json).toMatchObject({ code: 102 });
    expect(String(checked.json?.msg)).toContain('attachment 1 (net1, network "storage")');

    expect((await runPlugin({ ...call, command: 'DEL' })).code).toBe(0);
    expect(await interfacesOf(pod)).toEqual({});
    expect(await cniNodeState(host, 'storage')).toEqual(baseline);
  });

  it('GC of the conflist tears down every attachment of the sandboxes the runtime no longer has', async () => {
    await writeBridgeNetwork(host, { name: 'storage', bridge: 'alnstor0', subnet: '10.89.0.0/24' });
    await host.start();
    await warm(['nomad', 'storage']);
    const baseline = await cniNodeState(host, 'storage');
    const kept = await host.lab.container('kept');
    const gone = await host.lab.container('gone');
    const keptId = sandboxId();
    const goneId = sandboxId();
    for (const [id, ns] of [
      [keptId, kept],
      [goneId, gone],
    ] as const)
      expect(
        (
          await runPlugin({
            command: 'ADD',
            containerId: id,
            netns: ns.path,
            config: config(['nomad', 'storage']),
          })
        ).code,
      ).toBe(0);
    expect(Object.values(await host.reservations('storage')).sort()).toEqual(
      [keptId, goneId].sort(),
    );

    const gc = await runPlugin({
      command: 'GC',
      config: config(['nomad', 'storage'], {
        cniVersion: '1.1.0',
        'cni.dev/valid-attachments': [{ containerID: keptId, ifname: 'eth0' }],
      }),
    });

    expect(gc.code).toBe(0);
    const { allocations } = await unary(host.alloc(), 'ListAllocNetworks', {});
    expect(allocations.map((s) => s.allocId)).toEqual([keptId]);
    expect(Object.values(await host.reservations())).toEqual([keptId]);
    expect(Object.values(await host.reservations('storage'))).toEqual([keptId]);
    expect(Object.keys(await interfacesOf(gone))).toEqual([]);
    expect(Object.keys(await interfacesOf(kept)).sort()).toEqual(['eth0', 'net1']);
    const rules = await host.ruleset();
    expect(rules).toContain(keptId);
    expect(rules).not.toContain(goneId);

    // And the kept one's DEL brings the node back to its baseline.
    expect(
      (
        await runPlugin({
          command: 'DEL',
          containerId: keptId,
          netns: kept.path,
          config: config(['nomad', 'storage']),
        })
      ).code,
    ).toBe(0);
    expect(await cniNodeState(host, 'storage')).toEqual(baseline);
  });
});
