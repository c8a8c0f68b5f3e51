// containerd 1.6's CRI plugin as a CNI client, the way a Kubernetes node uses it: Debian's
// containerd runs in a throwaway node namespace and a private mount namespace
// (fixtures/containerd-host.ts), this process speaks CRI to it as the kubelet would, and a pod
// sandbox's network comes from the conflist in CRI's conf dir: first Debian's plugins directly
// (the fixture against reality), then allocnet-cni forwarding to the real agent, with one network
// and with two (`delegates`: the pod on eth0 and net1). Needs root,
// containerd, runc, Go (the pause image is built offline), iproute2, iptables and
// containernetworking-plugins; never touches the root namespace.
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { unary } from '@allocnet/proto';
import { createNetnsLab, echo, requireNetworkTestHost, startEchoServer } from '@allocnet/testns';
import type { NetnsLab, TestClient } from '@allocnet/testns';
import { PLUGIN_DIR, createAgentHost } from './fixtures/agent-host.js';
import type { AgentHost } from './fixtures/agent-host.js';
import { createContainerdHost } from './fixtures/containerd-host.js';
import type { ContainerdHost, PluginSource } from './fixtures/containerd-host.js';
import type { PodSandboxConfig } from './fixtures/cri-client.js';
import { interfaceAddresses, writeBridgeNetwork } from './fixtures/networks.js';

const HERE = dirname(fileURLToPath(import.meta.url));
/** The thin plugin, built (`pnpm --filter @allocnet/cni-plugin build`). */
const CNI_PLUGIN = resolve(HERE, '..', '..', 'packages', 'cni-plugin', 'dist', 'allocnet-cni');

beforeAll(async () => {
  await requireNetworkTestHost([
    'ip',
    'iptables',
    'nsenter',
    'unshare',
    'containerd',
    'containerd-shim-runc-v2',
    'runc',
    'ctr',
    'go',
    `${PLUGIN_DIR}/bridge`,
    `${PLUGIN_DIR}/loopback`,
  ]);
});

let seq = 0;

/** A pod as the kubelet describes one, with `hostPort` mapped to port 80 over TCP and UDP. */
function pod(hostPort: number): PodSandboxConfig {
  seq++;
  return {
    metadata: {
      name: `web-${seq}`,
      uid: `00000000-0000-4000-8000-${(process.pid * 1000 + seq).toString(16).padStart(12, '0')}`,
      namespace: 'default',
      attempt: 0,
    },
    portMappings: [
      { protocol: 'TCP', containerPort: 80, hostPort },
      { protocol: 'UDP', containerPort: 80, hostPort },
    ],
  };
}

/** The pod's port 80 answers on the node's `hostPort` from the lab's client, over TCP and UDP. */
async function expectPortAnswers(
  containerd: ContainerdHost,
  lab: NetnsLab,
  client: TestClient,
  sandboxId: string,
  hostPort: number,
): Promise<void> {
  // A pod holds only its pause process: the echo server joins the pod's namespace to answer.
  const podNetns = await containerd.attachPodNetns(lab, sandboxId);
  const server = await startEchoServer(podNetns, 80);
  try {
    const { netns, nodeAddress } = client;
    expect(await echo(netns.name, 'tcp', nodeAddress, hostPort, 'hello')).toBe('tcp:hello');
    expect(await echo(netns.name, 'udp', nodeAddress, hostPort, 'hello')).toBe('udp:hello');
  } finally {
    await server.stop();
  }
}

describe('containerd CRI with Debian’s plugins (the fixture against reality)', () => {
  let lab: NetnsLab;
  let containerd: ContainerdHost | undefined;

  beforeEach(() => {
    lab = createNetnsLab();
  });

  afterEach(async () => {
    try {
      await containerd?.dispose();
    } finally {
      containerd = undefined;
      await lab.dispose();
    }
  });

  it('runs a pod sandbox with an address from bridge + host-local and a mapped port, and removes it', async () => {
    const node = await lab.node();
    const plugins: Record<string, PluginSource> = {};
    for (const name of await readdir(PLUGIN_DIR))
      plugins[name] = { symlink: join(PLUGIN_DIR, name) };
    containerd = await createContainerdHost({
      node,
      plugins,
      conflist: {
        cniVersion: '1.0.0',
        name: 'crinet',
        plugins: [
          {
            type: 'bridge',
            bridge: 'cri0',
            isGateway: true,
            ipMasq: true,
            // host-local's default data dir, /var/lib/cni/networks, is the holder's private one.
            // Without the default route the pod cannot answer a client its port was mapped for.
            ipam: {
              type: 'host-local',
              ranges: [[{ subnet: '10.88.0.0/24' }]],
              routes: [{ dst: '0.0.0.0/0' }],
            },
          },
          { type: 'portmap', capabilities: { portMappings: true } },
        ],
      },
    });
    const { cri } = containerd;
    expect(await cri.version()).toEqual({
      version: '0.1.0',
      runtimeName: 'containerd',
      runtimeVersion: expect.stringMatching(/^1\.6\./) as unknown,
      runtimeApiVersion: 'v1',
    });
    const client = await lab.client(node);
    const reservations = join(containerd.dir, 'var-lib-cni', 'networks', 'crinet');

    const id = await cri.runPodSandbox(pod(8080));
    expect(id).toMatch(/^[0-9a-f]{64}$/);
    const { status } = await cri.podSandboxStatus(id);
    expect(status).toMatchObject({ id, state: 'SANDBOX_READY', network: { ip: '10.88.0.2' } });
    const info = await cri.sandboxInfo(id);
    expect(info.cniResult?.Interfaces?.eth0?.IPConfigs?.[0]?.IP).toBe('10.88.0.2');
    const netnsPath = info.runtimeSpec.linux?.namespaces?.find((n) => n.type === 'network')?.path;
    expect(netnsPath).toMatch(/^\/var\/run\/netns\/cni-[0-9a-f-]{36}$/);
    // CNI_NETNS names a file only the holder's mount namespace has: whoever opens it (the plugin
    // chain, an agent it forwards to) must run in that one.
    expect(await containerd.exec(['ls', '/run/netns'])).toBe(basename(netnsPath ?? ''));
    expect(existsSync(netnsPath ?? '')).toBe(false);
    expect((await readdir(reservations)).filter((f) => /^\d/.test(f))).toEqual(['10.88.0.2']);
    await expectPortAnswers(containerd, lab, client, id, 8080);

    await cri.stopPodSandbox(id);
    await cri.removePodSandbox(id);
    expect(await cri.listPodSandbox()).toEqual([]);
    expect(await containerd.exec(['ls', '/run/netns'])).toBe('');
    expect((await readdir(reservations)).filter((f) => /^\d/.test(f))).toEqual([]);
    expect(await node.ruleset()).not.toContain('--dport 8080');
  });
});

describe('containerd CRI through allocnet-cni and the agent', () => {
  let host: AgentHost;
  let containerd: ContainerdHost | undefined;

  beforeEach(async () => {
    host = await createAgentHost();
  });

  afterEach(async () => {
    try {
      // containerd first: the sandboxes a failed test left get their DELs from a running agent.
      await containerd?.dispose();
    } finally {
      containerd = undefined;
      await host.dispose();
    }
  });

  /**
   * containerd with a conflist of allocnet-cni (on `delegates` when given) and the agent in the
   * holder's mount namespace (CNI_NETNS is a path only that one has), its CNI server on.
   */
  async function startWithContainerd(delegates: readonly string[], args: readonly string[] = []) {
    const cniSocket = join(host.dir, 'cni.sock');
    const made = await createContainerdHost({
      node: host.node,
      plugins: {
        // A copy, as an installer puts it (a build replacing the binary cannot touch it).
        'allocnet-cni': { copy: CNI_PLUGIN },
        loopback: { symlink: join(PLUGIN_DIR, 'loopback') },
      },
      conflist: {
        cniVersion: '1.0.0',
        name: 'allocnet',
        plugins: [
          {
            type: 'allocnet-cni',
            ...(delegates.length === 0 ? {} : { delegates }),
            socket: cniSocket,
            queueDir: join(host.dir, 'q'),
            capabilities: { portMappings: true },
          },
        ],
      },
    });
    containerd = made;
    const agent = await host.start({
      args: ['--cni-socket', cniSocket, '--cni-queue-dir', join(host.dir, 'q'), ...args],
      enter: made.enter,
    });
    return { agent, made };
  }

  it('gives a pod its address and port from the agent, and Stop + Remove take all of it back', async () => {
    // debug: the agent logs each CNI call it answered ("CNI call").
    const { agent, made } = await startWithContainerd([], ['--log-level', 'debug']);
    const { cri } = made;
    /** The CNI calls the agent answered or failed for one sandbox, in order. */
    const cniCalls = (containerId: string) =>
      agent
        .lines()
        .filter((l) => l.message.startsWith('CNI call') && l.containerId === containerId)
        .map((l) => `${String(l.command)}${l.message === 'CNI call' ? '' : ' failed'}`);
    const alloc = host.alloc();

    // One pod with a port through the whole path first: the bridge and the shared chains it
    // makes stay, so the baseline is taken after it.
    const warm = await cri.runPodSandbox(pod(19999));
    await cri.stopPodSandbox(warm);
    await cri.removePodSandbox(warm);
    const baseline = await host.ruleset();
    expect(await host.reservations()).toEqual({});
    const client = await host.lab.client(host.node);

    const id = await cri.runPodSandbox(pod(8080));
    const { status } = await cri.podSandboxStatus(id);
    const ip = status?.network?.ip ?? '';
    // 172.26.64.0/20: the agent's embedded "nomad" network.
    expect(ip).toMatch(/^172\.26\.(6[4-9]|7[0-9])\.\d{1,3}$/);
    expect(status?.state).toBe('SANDBOX_READY');
    const info = await cri.sandboxInfo(id);
    expect(info.cniResult?.Interfaces?.eth0?.IPConfigs?.[0]?.IP).toBe(ip);
    const netnsPath = info.runtimeSpec.linux?.namespaces?.find((n) => n.type === 'network')?.path;
    expect(netnsPath).toMatch(/^\/var\/run\/netns\/cni-[0-9a-f-]{36}$/);

    // The agent holds the attachment as an allocation keyed by the sandbox id.
    const { allocations } = await unary(alloc, 'ListAllocNetworks', {});
    expect(allocations).toEqual([
      expect.objectContaining({
        allocId: id,
        network: 'nomad',
        phase: 'PHASE_READY',
        interfaceName: 'eth0',
        address: ip,
        netnsPath,
        netnsCreatedByAgent: false,
        portMappings: [
          { hostPort: 8080, containerPort: 80, protocol: 'tcp', hostIp: '' },
          { hostPort: 8080, containerPort: 80, protocol: 'udp', hostIp: '' },
        ],
      }),
    ]);
    expect(await host.reservations()).toEqual({ [ip]: id });
    await expectPortAnswers(made, host.lab, client, id, 8080);

    // StopPodSandbox: a DEL with the netns; RemovePodSandbox: a second DEL without one.
    await cri.stopPodSandbox(id);
    await cri.removePodSandbox(id);
    expect(await cri.listPodSandbox()).toEqual([]);
    expect(await unary(alloc, 'ListAllocNetworks', {})).toEqual({ allocations: [] });
    expect(await host.reservations()).toEqual({});
    expect(await host.ruleset()).toEqual(baseline);
    expect(cniCalls(id)).toEqual(['ADD', 'DEL', 'DEL']);
  });

  it('gives a pod two networks from delegates (eth0 with its port, net1 on a second bridge), and Stop + Remove take both back', async () => {
    // A second bridge network with its own subnet beside the embedded default ("nomad").
    await writeBridgeNetwork(host, { name: 'storage', bridge: 'alnstor0', subnet: '10.89.0.0/24' });
    const { made } = await startWithContainerd(['nomad', 'storage']);
    const { cri } = made;
    const alloc = host.alloc();
    // A pod through both networks first: the two bridges and the shared chains stay.
    const warm = await cri.runPodSandbox(pod(19999));
    await cri.stopPodSandbox(warm);
    await cri.removePodSandbox(warm);
    const baseline = await host.ruleset();
    const client = await host.lab.client(host.node);

    const id = await cri.runPodSandbox(pod(8080));
    const { status } = await cri.podSandboxStatus(id);
    expect(status?.state).toBe('SANDBOX_READY');
    const ip = status?.network?.ip ?? '';
    // The pod's address is the first delegate's (eth0, 172.26.64.0/20).
    expect(ip).toMatch(/^172\.26\.(6[4-9]|7[0-9])\.\d{1,3}$/);
    // go-cni's view of allocnet's answer: both interfaces, each with its address.
    const info = await cri.sandboxInfo(id);
    const second = info.cniResult?.Interfaces?.net1?.IPConfigs?.[0]?.IP ?? '';
    expect(info.cniResult?.Interfaces?.eth0?.IPConfigs?.[0]?.IP).toBe(ip);
    expect(second).toMatch(/^10\.89\.0\.\d{1,3}$/);
    // And the pod's namespace has them, as the result says.
    const podNetns = await made.attachPodNetns(host.lab, id);
    expect(await interfaceAddresses(`/run/netns/${podNetns}`)).toEqual({
      lo: ['127.0.0.1'],
      eth0: [ip],
      net1: [second],
    });
    expect(await host.reservations()).toEqual({ [ip]: id });
    expect(await host.reservations('storage')).toEqual({ [second]: id });
    // One allocation, keyed by the sandbox id, primary on the default network.
    const { allocations } = await unary(alloc, 'ListAllocNetworks', {});
    expect(allocations).toEqual([
      expect.objectContaining({
        allocId: id,
        network: 'nomad',
        interfaceName: 'eth0',
        address: ip,
      }),
    ]);

    // Traffic reaches both: the host port from the client (eth0), and each address from the
    // node, which is on both bridges' segments.
    await expectPortAnswers(made, host.lab, client, id, 8080);
    const server = await startEchoServer(podNetns, 80);
    try {
      expect(await echo(host.node.name, 'tcp', ip, 80, 'primary')).toBe('tcp:primary');
      expect(await echo(host.node.name, 'tcp', second, 80, 'second')).toBe('tcp:second');
    } finally {
      await server.stop();
    }

    await cri.stopPodSandbox(id);
    await cri.removePodSandbox(id);
    expect(await cri.listPodSandbox()).toEqual([]);
    expect(await unary(alloc, 'ListAllocNetworks', {})).toEqual({ allocations: [] });
    expect(await host.reservations()).toEqual({});
    expect(await host.reservations('storage')).toEqual({});
    expect(await host.ruleset()).toEqual(baseline);
  });
});
