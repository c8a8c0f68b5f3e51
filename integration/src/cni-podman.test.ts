// podman 4.3 (Debian's, `network_backend = "cni"`) as a real CNI client: first with Debian's
// plugins directly (the fixture's own check, ~1 s), then through allocnet-cni and the agent's CNI
// server, with one network and with two (`delegates`: eth0 and net1). podman runs in a node namespace and a private mount namespace (fixtures/podman-host.ts);
// the agent runs in that same mount namespace, since it opens podman's CNI_NETNS paths. The
// containers are busybox httpd; a client namespace behind a veth fetches their host ports.
// Needs root, podman, crun, busybox-static, containernetworking-plugins and the built agent and
// allocnet-cni; nothing runs in the root namespace. Host ports are fixed: they live in the
// test's own node namespace, where nothing else listens.
import { unary } from '@allocnet/proto';
import type { AllocNetworkServiceClient } from '@allocnet/proto';
import { createNetnsLab, requireNetworkTestHost } from '@allocnet/testns';
import type { TestClient } from '@allocnet/testns';
import {
  AGENT_MAIN,
  CNI_PLUGIN,
  PLUGIN_DIR,
  createAgentHost,
  httpGet,
} from './fixtures/agent-host.js';
import type { AgentHost } from './fixtures/agent-host.js';
import { BUSYBOX, CONTAINER_PORT, INDEX_HTML, createPodmanHost } from './fixtures/podman-host.js';
import type { PodmanHost } from './fixtures/podman-host.js';
import { interfaceAddresses, writeBridgeNetwork } from './fixtures/networks.js';

/** The subnet of the client's link (TEST-NET-1, clear of every CNI subnet here); the node is .1. */
const CLIENT_SUBNET = '192.0.2.0/24';

beforeAll(async () => {
  await requireNetworkTestHost([
    'ip',
    'iptables',
    'nsenter',
    'unshare',
    'podman',
    'crun',
    BUSYBOX,
    CNI_PLUGIN,
    AGENT_MAIN,
    `${PLUGIN_DIR}/bridge`,
    `${PLUGIN_DIR}/portmap`,
  ]);
});

describe('podman on Debian plugins (the fixture itself)', () => {
  it('publishes a busybox httpd on a host port through bridge, host-local, portmap and firewall', async () => {
    const lab = createNetnsLab();
    let podman: PodmanHost | undefined;
    try {
      const node = await lab.node();
      const client = await lab.client(node, { subnet: CLIENT_SUBNET });
      podman = await createPodmanHost({
        node,
        networks: [
          {
            cniVersion: '1.0.0',
            name: 'plain',
            plugins: [
              {
                type: 'bridge',
                bridge: 'plain0',
                isGateway: true,
                ipMasq: true,
                ipam: {
                  type: 'host-local',
                  ranges: [[{ subnet: '10.88.7.0/24' }]],
                  routes: [{ dst: '0.0.0.0/0' }],
                },
              },
              { type: 'portmap', capabilities: { portMappings: true } },
              { type: 'firewall' },
            ],
          },
        ],
      });

      await podman.runHttpd({ name: 'web', network: 'plain', hostPort: 18080 });

      const address = await podman.address('web', 'plain');
      expect(address).toMatch(/^10\.88\.7\.\d+$/);
      expect(await node.ruleset()).toContain(
        `--dport 18080 -j DNAT --to-destination ${address}:${CONTAINER_PORT}`,
      );
      expect(await httpGet(client.netns, `${client.nodeAddress}:18080`, '/index.html')).toEqual({
        status: 200,
        body: INDEX_HTML,
      });
      await podman.remove(['web']);
      expect((await podman.podman(['ps', '-aq'])).stdout).toBe('');
      expect(await node.ruleset()).not.toContain('--dport 18080');
    } finally {
      try {
        await podman?.dispose();
      } finally {
        await lab.dispose();
      }
    }
  });
});

describe('podman through allocnet-cni and the agent', () => {
  // Set by beforeAll one by one, so that afterAll removes whatever was made before a failure.
  let agentHost: AgentHost | undefined;
  let podmanHost: PodmanHost | undefined;
  let started:
    | {
        readonly host: AgentHost;
        readonly podman: PodmanHost;
        readonly client: TestClient;
        readonly alloc: AllocNetworkServiceClient;
      }
    | undefined;

  beforeAll(async () => {
    const host = (agentHost = await createAgentHost());
    // A second allocnet network, for the container with two (podman's network "allocnet2").
    await writeBridgeNetwork(host, { name: 'storage', bridge: 'alnstor0', subnet: '10.89.0.0/24' });
    const podman = (podmanHost = await createPodmanHost({
      node: host.node,
      networks: [
        {
          cniVersion: '1.0.0',
          name: 'allocnet',
          plugins: [
            {
              type: 'allocnet-cni',
              socket: host.cniSocket,
              queueDir: host.cniQueueDir,
              capabilities: { portMappings: true },
            },
          ],
        },
        {
          cniVersion: '1.0.0',
          name: 'allocnet2',
          plugins: [
            {
              type: 'allocnet-cni',
              delegates: ['nomad', 'storage'],
              socket: host.cniSocket,
              queueDir: host.cniQueueDir,
              capabilities: { portMappings: true },
            },
          ],
        },
      ],
      plugins: { 'allocnet-cni': CNI_PLUGIN },
    }));
    const client = await host.lab.client(host.node, { subnet: CLIENT_SUBNET });
    // In the holder's mount namespace: the agent opens podman's CNI_NETNS (/run/netns/netns-…).
    // agent-host passes --cni-socket and --cni-queue-dir (host.cniSocket, host.cniQueueDir).
    await host.start({ enter: podman.enter });
    started = { host, podman, client, alloc: host.alloc() };
  });

  afterAll(async () => {
    // podman first: its `rm -af` DELs go through the agent, and its dispose ends every process
    // in the holder's mount namespace (the agent among them) before the node goes.
    try {
      await podmanHost?.dispose();
    } finally {
      await agentHost?.dispose();
    }
  });

  function given(): NonNullable<typeof started> {
    if (started === undefined) throw new Error('the agent and podman did not start');
    return started;
  }

  /**
   * One container run and removed, so the bridge and the shared chains exist; the ruleset then.
   * Each test warms for itself, so that it holds when run alone.
   */
  async function warmBaseline(): Promise<string> {
    const { host, podman } = given();
    await podman.runHttpd({ name: 'warm', network: 'allocnet', hostPort: 18079 });
    await podman.remove(['warm']);
    return host.ruleset();
  }

  /** The agent's subnet for the embedded "nomad" network: 172.26.64.0/20. */
  const NOMAD_ADDRESS = /^172\.26\.(6[4-9]|7\d)\.\d+$/;

  it('publishes a container on its host port; rm -f takes every rule, reservation and allocation back', async () => {
    const { host, podman, client, alloc } = given();
    const baseline = await warmBaseline();

    await podman.runHttpd({ name: 'web', network: 'allocnet', hostPort: 18080 });

    const address = await podman.address('web', 'allocnet');
    expect(address).toMatch(NOMAD_ADDRESS);
    expect(Object.keys(await host.reservations())).toEqual([address]);
    expect(await host.ruleset()).toContain(
      `--dport 18080 -j DNAT --to-destination ${address}:${CONTAINER_PORT}`,
    );
    expect((await unary(alloc, 'ListAllocNetworks', {})).allocations).toHaveLength(1);
    expect(await httpGet(client.netns, `${client.nodeAddress}:18080`, '/index.html')).toEqual({
      status: 200,
      body: INDEX_HTML,
    });

    await podman.remove(['web']);

    expect(await host.ruleset()).toEqual(baseline);
    expect(await host.reservations()).toEqual({});
    expect(await unary(alloc, 'ListAllocNetworks', {})).toEqual({ allocations: [] });
  });

  it('runs 10 containers at once, each on its own host port, and removes them all to the baseline', async () => {
    const { host, podman, client, alloc } = given();
    const baseline = await warmBaseline();
    const containers = Array.from({ length: 10 }, (_, i) => ({
      name: `web${i}`,
      network: 'allocnet',
      hostPort: 18081 + i,
    }));

    await Promise.all(containers.map((c) => podman.runHttpd(c)));

    const addresses = await Promise.all(containers.map((c) => podman.address(c.name, c.network)));
    for (const address of addresses) expect(address).toMatch(NOMAD_ADDRESS);
    expect(new Set(addresses).size).toBe(10);
    expect(Object.keys(await host.reservations()).sort()).toEqual([...addresses].sort());
    expect((await unary(alloc, 'ListAllocNetworks', {})).allocations).toHaveLength(10);
    const rules = await host.ruleset();
    containers.forEach((c, i) => {
      expect(rules).toContain(
        `--dport ${c.hostPort} -j DNAT --to-destination ${addresses[i] ?? ''}:${CONTAINER_PORT}`,
      );
    });
    const answers = await Promise.all(
      containers.map((c) =>
        httpGet(client.netns, `${client.nodeAddress}:${c.hostPort}`, '/index.html'),
      ),
    );
    expect(answers).toEqual(containers.map(() => ({ status: 200, body: INDEX_HTML })));

    await podman.remove(containers.map((c) => c.name));

    expect((await podman.podman(['ps', '-aq'])).stdout).toBe('');
    expect(await host.ruleset()).toEqual(baseline);
    expect(await host.reservations()).toEqual({});
    expect(await unary(alloc, 'ListAllocNetworks', {})).toEqual({ allocations: [] });
  });

  it('gives a container two networks from delegates (eth0 with its port, net1 on a second bridge), and rm -f takes both back', async () => {
    const { host, podman, client, alloc } = given();
    // A container through both networks first: the second bridge and its chains stay.
    await podman.runHttpd({ name: 'warm2', network: 'allocnet2', hostPort: 18078 });
    await podman.remove(['warm2']);
    const baseline = await host.ruleset();

    const id = await podman.runHttpd({ name: 'multi', network: 'allocnet2', hostPort: 18090 });

    const pid = (await podman.podman(['inspect', '--format', '{{.State.Pid}}', id])).stdout.trim();
    const inside = await interfaceAddresses(`/proc/${pid}/ns/net`);
    expect(
      Object.keys(inside)
        .filter((name) => name !== 'lo')
        .sort(),
    ).toEqual(['eth0', 'net1']);
    const primary = inside.eth0?.[0] ?? '';
    const second = inside.net1?.[0] ?? '';
    expect(inside.eth0).toHaveLength(1);
    expect(inside.net1).toHaveLength(1);
    expect(primary).toMatch(NOMAD_ADDRESS);
    expect(second).toMatch(/^10\.89\.0\.\d+$/);
    expect(await host.reservations()).toEqual({ [primary]: id });
    expect(await host.reservations('storage')).toEqual({ [second]: id });
    expect(await host.ruleset()).toContain(
      `--dport 18090 -j DNAT --to-destination ${primary}:${CONTAINER_PORT}`,
    );
    expect((await unary(alloc, 'ListAllocNetworks', {})).allocations).toEqual([
      expect.objectContaining({
        allocId: id,
        network: 'nomad',
        interfaceName: 'eth0',
        address: primary,
      }),
    ]);

    // Traffic reaches both: the host port from the client (eth0), and each address from the
    // node, which is on both bridges' segments.
    expect(await httpGet(client.netns, `${client.nodeAddress}:18090`, '/index.html')).toEqual({
      status: 200,
      body: INDEX_HTML,
    });
    for (const address of [primary, second])
      expect(await httpGet(host.node, `${address}:${CONTAINER_PORT}`, '/index.html')).toEqual({
        status: 200,
        body: INDEX_HTML,
      });

    await podman.remove(['multi']);

    expect(await host.ruleset()).toEqual(baseline);
    expect(await host.reservations()).toEqual({});
    expect(await host.reservations('storage')).toEqual({});
    expect(await unary(alloc, 'ListAllocNetworks', {})).toEqual({ allocations: [] });
  });
});
