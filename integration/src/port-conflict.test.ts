// A host port is never given twice: the real agent in a throwaway node namespace, the Debian
// plugins, the gRPC door and the CNI door (the built allocnet-cni exec'd as a runtime does). An
// allocation asking for a host port another live allocation maps is refused before anything runs
// (FAILED_PRECONDITION; CNI error code 100), naming the holder, and changes nothing on the node;
// setups racing for one port leave exactly one winner; the refusal holds across a restart; once
// the holder is torn down the port goes to the next one and answers. Needs root, iproute2,
// iptables, containernetworking-plugins and the built plugin (tools/setup.sh builds it).
import { unary } from '@allocnet/proto';
import type { SetupAllocNetworkRequest } from '@allocnet/proto';
import { echo, requireNetworkTestHost, startEchoServer } from '@allocnet/testns';
import { CNI_PLUGIN, outcome, useAgentHost } from './fixtures/agent-host.js';
import type { AgentHost } from './fixtures/agent-host.js';
import { pluginConfig, runPlugin } from './fixtures/cni-call.js';

let host: AgentHost;

useAgentHost((made) => {
  host = made;
});

beforeAll(async () => {
  await requireNetworkTestHost([CNI_PLUGIN]);
});

let seq = 0;
function allocId(): string {
  seq++;
  return `00000000-${(process.pid % 0x10000).toString(16).padStart(4, '0')}-4000-8000-${seq.toString(16).padStart(12, '0')}`;
}
/** A containerd-like sandbox id: 64 hex digits, unique to this process and test. */
function containerId(): string {
  seq++;
  return `${process.pid.toString(16).padStart(8, '0')}${seq.toString(16).padStart(56, '0')}`;
}

const PORT = 28080;
const RACED = 28081;

function request(id: string, hostPort: number): SetupAllocNetworkRequest & { allocId: string } {
  return {
    allocId: id,
    namespace: 'default',
    jobId: 'web',
    groupName: 'frontend',
    ports: [{ label: 'web', value: hostPort, to: 80 }],
  };
}

function refusedByGrpc(id: string, holder: string, hostPort = PORT): [string, string] {
  return [
    'FAILED_PRECONDITION',
    `setup of allocation "${id}" refused: ports[0].value ("web"): host port ${hostPort}/tcp on every address is already mapped by allocation "${holder}"`,
  ];
}

/** An ADD through allocnet-cni of a sandbox the test made, mapping `hostPort` (go-cni's spelling). */
async function cniAdd(id: string, hostPort: number) {
  const sandbox = await host.lab.container(`s${seq}`);
  return runPlugin({
    command: 'ADD',
    containerId: id,
    netns: sandbox.path,
    args: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0',
    config: pluginConfig(host.cniSocket, host.cniQueueDir, {
      runtimeConfig: {
        portMappings: [{ HostPort: hostPort, ContainerPort: 80, Protocol: 'tcp', HostIP: '' }],
      },
    }),
  });
}

/** What a refused setup must leave as it was: rules (v4, v6, every table), namespaces, records. */
async function nodeState() {
  const { allocations } = await unary(host.alloc(), 'ListAllocNetworks', {});
  return {
    rules: await host.ruleset(),
    namespaces: await host.namespaces(),
    reservations: await host.reservations(),
    allocations: allocations.map((a) => a.allocId).sort(),
  };
}

describe('a host port another allocation maps', () => {
  it('is refused through gRPC and allocnet-cni, naming the holder, and nothing changes', async () => {
    const agent = await host.start();
    const alloc = host.alloc();
    const a = allocId();
    await unary(alloc, 'SetupAllocNetwork', request(a, PORT), { deadlineMs: 60_000 });
    const before = await nodeState();

    const b = allocId();
    expect(await outcome(unary(alloc, 'SetupAllocNetwork', request(b, PORT)))).toEqual(
      refusedByGrpc(b, a),
    );
    expect(await nodeState()).toEqual(before);

    const c = containerId();
    const refused = await cniAdd(c, PORT);
    expect([refused.code, refused.json]).toEqual([
      1,
      {
        cniVersion: '1.0.0',
        code: 100,
        msg: `setup of allocation "${c}" refused: config.runtimeConfig.portMappings[0].hostPort ("tcp/80"): host port ${PORT}/tcp on every address is already mapped by allocation "${a}"`,
      },
    ]);
    expect(await nodeState()).toEqual(before);
    expect(
      agent
        .lines()
        .filter((l) => l.message.startsWith('setup refused: its host port'))
        .map((l) => [l.allocId, l.holder]),
    ).toEqual([
      [b, a],
      [c, a],
    ]);
  });

  it('goes to exactly one of several setups started at once through both doors', async () => {
    await host.start();
    const alloc = host.alloc();
    const ids = [allocId(), allocId(), allocId(), allocId()];
    const cni = containerId();
    const [grpcOutcomes, cniRun] = await Promise.all([
      Promise.all(
        ids.map((id) =>
          outcome(unary(alloc, 'SetupAllocNetwork', request(id, RACED), { deadlineMs: 60_000 })),
        ),
      ),
      cniAdd(cni, RACED),
    ]);
    const winners = [
      ...ids.filter((_, i) => grpcOutcomes[i] === 'ok'),
      ...(cniRun.code === 0 ? [cni] : []),
    ];
    expect(winners).toHaveLength(1);
    const winner = winners[0] as string;
    // Every loser was refused for the port, naming the winner; only the winner is on the node.
    ids.forEach((id, i) => {
      if (id !== winner) expect(grpcOutcomes[i]).toEqual(refusedByGrpc(id, winner, RACED));
    });
    if (cni !== winner) {
      expect(cniRun.json).toMatchObject({ code: 100 });
      expect(String(cniRun.json?.msg)).toContain(`already mapped by allocation "${winner}"`);
    }
    expect((await nodeState()).allocations).toEqual([winner]);
    expect(await host.namespaces()).toEqual(winner === cni ? [] : [`${host.netnsPrefix}${winner}`]);
    // The winner's DNAT is the only one: once it is torn down, no rule names the port.
    expect(await host.ruleset()).toContain(`${RACED}`);
    await unary(alloc, 'TeardownAllocNetwork', { allocId: winner });
    expect(await host.ruleset()).not.toContain(`${RACED}`);
  });

  it('stays refused across a restart, and goes to the next allocation once the holder is gone', async () => {
    const first = await host.start();
    const a = allocId();
    const b = allocId();
    await unary(host.alloc(), 'SetupAllocNetwork', request(a, PORT), { deadlineMs: 60_000 });
    await first.stop();

    await host.start();
    const alloc = host.alloc();
    expect(await outcome(unary(alloc, 'SetupAllocNetwork', request(b, PORT)))).toEqual(
      refusedByGrpc(b, a),
    );

    await unary(alloc, 'TeardownAllocNetwork', { allocId: a });
    await unary(alloc, 'SetupAllocNetwork', request(b, PORT), { deadlineMs: 60_000 });
    const { netns: client, nodeAddress } = await host.lab.client(host.node);
    const server = await startEchoServer(`${host.netnsPrefix}${b}`, 80);
    try {
      expect(await echo(client.name, 'tcp', nodeAddress, PORT, 'hello')).toBe('tcp:hello');
    } finally {
      await server.stop();
    }
  });
});
