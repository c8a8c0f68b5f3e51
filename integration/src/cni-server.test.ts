// The agent's CNI server as a runtime reaches it: the real allocnet-cni (packages/cni-plugin)
// exec'd with CNI_* and its configuration on stdin, talking to the real agent in a throwaway node
// namespace, which runs the Debian plugins in a namespace the "runtime" (this test) made and
// owns. Also the server's HTTP API directly, for requests no plugin would forward, and the agent
// down: allocnet-cni's wait on ADD, its queue on DEL, STATUS. Needs root, iproute2, iptables,
// containernetworking-plugins and the built plugin (tools/setup.sh builds it).
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { addPluginShapes } from '@allocnet/cni-configurator/testing';
import { createBatch, createIptables } from '@allocnet/iptables-node';
import { unary } from '@allocnet/proto';
import { echo, requireNetworkTestHost, startEchoServer } from '@allocnet/testns';
import { CNI_PLUGIN, PLUGIN_DIR, REPO, createAgentHost, httpGet } from './fixtures/agent-host.js';
import type { AgentHost } from './fixtures/agent-host.js';
import { cniHttp, cniNodeState, pluginConfig, runPlugin, sandboxId } from './fixtures/cni-call.js';

let host: AgentHost;
const INSTALL = join(REPO, 'tools', 'install-cni-plugin.sh');

beforeAll(async () => {
  await requireNetworkTestHost(['ip', 'iptables', 'nsenter', `${PLUGIN_DIR}/bridge`, CNI_PLUGIN]);
});

beforeEach(async () => {
  host = await createAgentHost();
});

afterEach(async () => {
  await host.dispose();
});

const K8S_ARGS = 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_UID=u1';

function config(extra: Record<string, unknown> = {}) {
  return pluginConfig(host.cniSocket, host.cniQueueDir, extra);
}

function withPort(hostPort: number, containerPort = 80) {
  // go-cni's spelling: Go field names, no JSON tags.
  return config({
    runtimeConfig: {
      portMappings: [
        { HostPort: hostPort, ContainerPort: containerPort, Protocol: 'tcp', HostIP: '' },
      ],
    },
  });
}

describe('allocnet-cni through the agent', () => {
  it('ADD, repeated ADD, CHECK, DEL and a second DEL without netns; the port answers; the runtime netns stays', async () => {
    await host.start();
    const warm = await host.lab.container('warm');
    const warmId = sandboxId();
    expect(
      (
        await runPlugin({
          command: 'ADD',
          containerId: warmId,
          netns: warm.path,
          config: withPort(19999),
        })
      ).code,
    ).toBe(0);
    expect(
      (await runPlugin({ command: 'DEL', containerId: warmId, netns: warm.path, config: config() }))
        .code,
    ).toBe(0);
    const baseline = await cniNodeState(host);
    const { netns: client, nodeAddress } = await host.lab.client(host.node);

    const pod = await host.lab.container('pod');
    const id = sandboxId();
    const add = {
      command: 'ADD',
      containerId: id,
      netns: pod.path,
      args: K8S_ARGS,
      config: withPort(8080),
    };
    const added = await runPlugin(add);
    expect(added.code).toBe(0);
    const result = added.json ?? {};
    expect(result.cniVersion).toBe('1.0.0');
    const interfaces = result.interfaces as { name: string; sandbox?: string }[];
    const ips = result.ips as { address: string; interface: number }[];
    // What containerd needs: eth0 in the sandbox, with an address on it.
    const eth0 = interfaces.findIndex((i) => i.name === 'eth0' && i.sandbox === pod.path);
    expect(eth0).toBeGreaterThanOrEqual(0);
    expect(ips.find((ip) => ip.interface === eth0)?.address).toMatch(/^172\.26\.6[4-9]\.\d+\/20$/);

    // A repeated ADD answers the stored result and runs nothing.
    const rules = await host.ruleset();
    const again = await runPlugin(add);
    expect(again.code).toBe(0);
    expect(again.json).toEqual(result);
    expect(await host.ruleset()).toBe(rules);

    // The same attachment answered in the version the runtime's config names.
    const old = await runPlugin({ ...add, config: { ...withPort(8080), cniVersion: '0.4.0' } });
    expect(old.json).toMatchObject({ cniVersion: '0.4.0' });

    const { allocations } = await unary(host.alloc(), 'ListAllocNetworks', {});
    expect(allocations).toHaveLength(1);
    expect(allocations[0]).toMatchObject({
      allocId: id,
      netnsPath: pod.path,
      netnsCreatedByAgent: false,
      origin: { runtime: 'kubernetes', containerId: id, ifname: 'eth0' },
    });

    const server = await startEchoServer(pod.name, 80);
    try {
      expect(await echo(client.name, 'tcp', nodeAddress, 8080, 'hello')).toBe('tcp:hello');
    } finally {
      await server.stop();
    }

    expect((await runPlugin({ ...add, command: 'CHECK', config: config() })).code).toBe(0);

    // StopPodSandbox's DEL, then RemovePodSandbox's: no netns, no prevResult.
    expect((await runPlugin({ ...add, command: 'DEL', config: config() })).code).toBe(0);
    expect((await runPlugin({ ...add, command: 'DEL', netns: '', config: config() })).code).toBe(0);
    const after = await cniNodeState(host);
    expect(after).toEqual({ ...baseline, rules: after.rules });
    expect(after.rules).toBe(baseline.rules);
    // The runtime's namespace is the runtime's: allocnet never removes it.
    expect((await pod.links()).sort()).toEqual(['lo']);
    expect(await readdir('/run/netns')).toContain(pod.name);
  });

  it('CHECK of an attachment it does not have fails with 101; DEL of one is a success', async () => {
    await host.start();
    const pod = await host.lab.container('pod');
    const id = sandboxId();
    const check = await runPlugin({
      command: 'CHECK',
      containerId: id,
      netns: pod.path,
      config: config(),
    });
    expect(check.code).toBe(1);
    expect(check.json).toMatchObject({ code: 101 });
    expect(String(check.json?.msg)).toContain(`allocation "${id}" is not set up`);
    expect(
      (await runPlugin({ command: 'DEL', containerId: id, netns: pod.path, config: config() }))
        .code,
    ).toBe(0);
  });

  it('refuses 18 malformed requests with the CNI error naming the field, and changes nothing', async () => {
    await host.start();
    const pod = await host.lab.container('pod');
    const before = await cniNodeState(host);
    const env = (extra: Record<string, unknown> = {}) => ({
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: sandboxId(),
      CNI_NETNS: pod.path,
      CNI_IFNAME: 'eth0',
      CNI_ARGS: K8S_ARGS,
      CNI_PATH: '/usr/lib/cni',
      ...extra,
    });
    const body = (e: Record<string, unknown>, c: Record<string, unknown> = {}) =>
      JSON.stringify({ env: e, config: { ...config(), ...c } });
    const ports = (mapping: Record<string, unknown>) => ({
      runtimeConfig: { portMappings: [mapping] },
    });
    const cases: [string, string | Buffer, number, number, string][] = [
      ['body not JSON', '{"env": {', 400, 4, 'the request body is not JSON'],
      [
        'body over the limit',
        Buffer.alloc(1024 * 1024 + 10, 0x20),
        413,
        4,
        'the request body is over 1048576 bytes',
      ],
      ['no env', JSON.stringify({ config: config() }), 400, 7, 'env is missing'],
      ['no config', JSON.stringify({ env: env() }), 400, 4, 'config is missing'],
      [
        'missing command',
        body(env({ CNI_COMMAND: undefined })),
        400,
        7,
        'env.CNI_COMMAND is missing',
      ],
      [
        'unknown command',
        body(env({ CNI_COMMAND: 'UP' })),
        400,
        7,
        'env.CNI_COMMAND should be one of',
      ],
      [
        'missing container id',
        body(env({ CNI_CONTAINERID: undefined })),
        400,
        7,
        'env.CNI_CONTAINERID is missing',
      ],
      [
        'bad container id',
        body(env({ CNI_CONTAINERID: 'a;b' })),
        400,
        7,
        'env.CNI_CONTAINERID "a;b" has',
      ],
      [
        'missing netns on ADD',
        body(env({ CNI_NETNS: '' })),
        400,
        7,
        'env.CNI_NETNS is missing or empty',
      ],
      [
        'relative netns',
        body(env({ CNI_NETNS: 'run/netns/x' })),
        400,
        7,
        'env.CNI_NETNS "run/netns/x" is not',
      ],
      [
        'a netns that is not one',
        body(env({ CNI_NETNS: '/run/netns/none-such' })),
        400,
        7,
        'env.CNI_NETNS "/run/netns/none-such" is not a network namespace',
      ],
      ['bad ifname', body(env({ CNI_IFNAME: 'eth0:1' })), 400, 7, 'env.CNI_IFNAME "eth0:1" is not'],
      ['bad CNI_ARGS', body(env({ CNI_ARGS: 'K8S_POD_NAME' })), 400, 7, 'env.CNI_ARGS part 1'],
      ['unknown delegate', body(env(), { delegate: 'nope' }), 400, 4, 'config.delegate "nope"'],
      [
        'unsupported cniVersion',
        body(env(), { cniVersion: '2.0.0' }),
        400,
        1,
        'config.cniVersion "2.0.0" is not a version allocnet answers in',
      ],
      [
        'host port out of range',
        body(env(), ports({ HostPort: 65536, ContainerPort: 80 })),
        400,
        4,
        'config.runtimeConfig.portMappings[0].HostPort should be a port number from 0 to 65535',
      ],
      [
        'container port missing',
        body(env(), ports({ hostPort: 8080 })),
        400,
        4,
        'config.runtimeConfig.portMappings[0].containerPort is missing',
      ],
      [
        'sctp',
        body(env(), ports({ hostPort: 8080, containerPort: 80, protocol: 'sctp' })),
        400,
        4,
        'config.runtimeConfig.portMappings[0].protocol should be "tcp" or "udp"',
      ],
    ];
    const problems: string[] = [];
    for (const [what, payload, status, code, msg] of cases) {
      const res = await cniHttp(host.cniSocket, 'POST', '/v1/cni', payload);
      if (res.status !== status || res.json?.code !== code || !String(res.json.msg).includes(msg))
        problems.push(`${what}: got ${res.status} ${res.text}`);
    }
    expect(problems).toEqual([]);
    expect(await cniNodeState(host)).toEqual(before);
  });

  it('answers VERSION without the agent, STATUS 50 while it is down and 0 when it serves', async () => {
    const version = await runPlugin({ command: 'VERSION', config: config() });
    expect(version.code).toBe(0);
    expect(version.json?.supportedVersions).toEqual(['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']);
    const down = await runPlugin({ command: 'STATUS', config: config({ cniVersion: '1.1.0' }) });
    expect(down.code).toBe(1);
    expect(down.json).toMatchObject({ code: 50 });
    await host.start();
    const up = await runPlugin({ command: 'STATUS', config: config({ cniVersion: '1.1.0' }) });
    expect(up.code).toBe(0);
  });

  it('queues a DEL while the agent is down and replays it at start; the node ends at its baseline', async () => {
    const agent = await host.start();
    const pod = await host.lab.container('pod');
    const warm = await host.lab.container('warm');
    const warmId = sandboxId();
    await runPlugin({
      command: 'ADD',
      containerId: warmId,
      netns: warm.path,
      config: withPort(19998),
    });
    await runPlugin({ command: 'DEL', containerId: warmId, netns: warm.path, config: config() });
    const baseline = await cniNodeState(host);
    const id = sandboxId();
    expect(
      (
        await runPlugin({
          command: 'ADD',
          containerId: id,
          netns: pod.path,
          args: K8S_ARGS,
          config: withPort(8081),
        })
      ).code,
    ).toBe(0);
    await agent.stop();

    const del = await runPlugin({
      command: 'DEL',
      containerId: id,
      netns: pod.path,
      config: config(),
    });
    expect(del.code).toBe(0);
    expect((await readdir(host.cniQueueDir)).filter((n) => n.endsWith('.del'))).toHaveLength(1);

    const restarted = await host.start();
    await restarted.waitForLine(
      (l) => l.message === 'replayed a DEL queued while the agent was down',
    );
    expect((await readdir(host.cniQueueDir)).filter((n) => n.endsWith('.del'))).toEqual([]);
    expect(await cniNodeState(host)).toEqual(baseline);
    const { body } = await httpGet(host.node, restarted.ready.metrics ?? '', '/metrics');
    expect(body).toContain('allocnet_cni_queue_replayed_total{outcome="replayed"} 1');
  });

  it('makes ADD wait for an agent that comes up within the limit, and fail with 11 after it', async () => {
    const pod = await host.lab.container('pod');
    const late = runPlugin({
      command: 'ADD',
      containerId: sandboxId(),
      netns: pod.path,
      config: config({ readyTimeoutMs: 30_000 }),
    });
    await new Promise((r) => setTimeout(r, 500));
    await host.start();
    const added = await late;
    expect(added.code).toBe(0);
    expect(added.ms).toBeGreaterThan(500);

    const other = await host.lab.container('other');
    const unreachable = pluginConfig(join(host.dir, 'run', 'nobody.sock'), host.cniQueueDir, {
      readyTimeoutMs: 300,
    });
    const failed = await runPlugin({
      command: 'ADD',
      containerId: sandboxId(),
      netns: other.path,
      config: unreachable,
    });
    expect(failed.code).toBe(1);
    expect(failed.json).toMatchObject({ code: 11 });
    expect(String(failed.json?.msg)).toContain('nobody.sock');
    expect(failed.ms).toBeGreaterThanOrEqual(300);
  });

  it('GC tears down the attachments of its network missing from the valid list, and reaps its leaks', async () => {
    await host.start();
    const a = await host.lab.container('a');
    const b = await host.lab.container('b');
    const ida = sandboxId();
    const idb = sandboxId();
    for (const [id, ns] of [
      [ida, a],
      [idb, b],
    ] as const)
      expect(
        (await runPlugin({ command: 'ADD', containerId: id, netns: ns.path, config: config() }))
          .code,
      ).toBe(0);
    const settled = await host.ruleset();
    // What a DEL that ran without its cached result leaves, tagged with the network: a leak.
    const leaked = sandboxId();
    const batch = createBatch();
    addPluginShapes(batch, {
      network: 'nomad',
      allocId: leaked,
      ip: '172.26.79.250',
      ports: [{ host: 8090, container: 80 }],
      firewall: true,
    });
    await createIptables({ netns: host.node.path }).restore(batch);
    await writeFile(join(host.ipamDir, 'nomad', '172.26.79.250'), `${leaked}\r\neth0`);
    expect(await host.ruleset()).not.toBe(settled);
    const gc = await runPlugin({
      command: 'GC',
      config: config({
        cniVersion: '1.1.0',
        'cni.dev/valid-attachments': [{ containerID: ida, ifname: 'eth0' }],
      }),
    });
    expect(gc.code).toBe(0);
    const { allocations } = await unary(host.alloc(), 'ListAllocNetworks', {});
    expect(allocations.map((s) => s.allocId)).toEqual([ida]);
    expect(Object.values(await host.reservations())).toEqual([ida]);
    const after = await host.ruleset();
    expect(after).toContain(ida);
    expect(after).not.toContain(idb);
    expect(after).not.toContain(leaked);
    expect(after).not.toContain('8090');
  });

  it('installs by atomic rename over a plugin a runtime is running', async () => {
    const dir = join(host.dir, 'bin');
    const install = () => execa(INSTALL, [dir], { reject: false });
    expect((await install()).exitCode).toBe(0);
    const busy = runPlugin({
      command: 'ADD',
      containerId: sandboxId(),
      netns: '/run/netns/none',
      config: pluginConfig(join(host.dir, 'nobody.sock'), host.cniQueueDir, {
        readyTimeoutMs: 1500,
      }),
      plugin: join(dir, 'allocnet-cni'),
    });
    await new Promise((r) => setTimeout(r, 300));
    const again = await install();
    expect(again.exitCode).toBe(0);
    expect(again.stdout).toBe(`installed allocnet-cni v0.1.0 in ${dir}`);
    expect((await busy).json).toMatchObject({ code: 11 });
    expect(await readdir(dir)).toEqual(['allocnet-cni']);
  });
});
