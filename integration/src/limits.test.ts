// The agent's caps on one allocation (`limits.maxPorts`, `limits.maxCniArgs`; issue 16, break 6:
// 1,000 ports never finished, 300 took 14 s) as operators set them: the real agent process with
// `--max-ports 4 --max-cni-args 2` in a throwaway node namespace, asked over gRPC and through
// the real allocnet-cni. Over a cap the call is refused before anything runs and the node stays
// as it was. Needs root, iproute2, iptables, containernetworking-plugins and the built plugin.
import { execa } from 'execa';
import { unary } from '@allocnet/proto';
import type { SetupAllocNetworkRequest } from '@allocnet/proto';
import { requireNetworkTestHost } from '@allocnet/testns';
import {
  CLI_MAIN,
  CNI_PLUGIN,
  PLUGIN_DIR,
  createAgentHost,
  outcome,
} from './fixtures/agent-host.js';
import type { AgentHost } from './fixtures/agent-host.js';
import { pluginConfig, runPlugin } from './fixtures/cni-call.js';

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

const ports = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ label: `p${i}`, value: 18000 + i, to: 80 }));

function request(allocId: string, extra: SetupAllocNetworkRequest = {}): SetupAllocNetworkRequest {
  return { allocId, namespace: 'default', jobId: 'web', groupName: 'api', ...extra };
}

/** What a refused call could have changed on the node. */
async function nodeState(h: AgentHost) {
  return {
    allocations: (await unary(h.alloc(), 'ListAllocNetworks', {})).allocations,
    rules: await h.ruleset(),
    reservations: await h.reservations(),
    namespaces: await h.namespaces(),
    cache: await h.cacheFiles(),
  };
}

describe("the agent's limits on one allocation", () => {
  it('refuses more ports or CNI args than --max-ports / --max-cni-args over gRPC and through allocnet-cni, and changes nothing', async () => {
    const agent = await host.start({ args: ['--max-ports', '4', '--max-cni-args', '2'] });
    const alloc = host.alloc();
    // At the caps a setup runs (and warms the bridge and the shared chains for the baseline).
    await unary(alloc, 'SetupAllocNetwork', request('limits-at', { ports: ports(4) }), {
      deadlineMs: 60_000,
    });
    await unary(alloc, 'TeardownAllocNetwork', { allocId: 'limits-at' });
    const before = await nodeState(host);
    expect(before.allocations).toEqual([]);

    expect(
      await outcome(
        unary(alloc, 'SetupAllocNetwork', request('limits-ports', { ports: ports(5) })),
      ),
    ).toEqual([
      'INVALID_ARGUMENT',
      "ports has 5 ports, more than the agent's limit of 4 (limits.maxPorts)",
    ]);
    expect(
      await outcome(
        unary(
          alloc,
          'SetupAllocNetwork',
          request('limits-args', { cniArgs: { A: '1', B: '2', C: '3' } }),
        ),
      ),
    ).toEqual([
      'INVALID_ARGUMENT',
      "cni_args has 3 entries, more than the agent's limit of 2 (limits.maxCniArgs)",
    ]);

    // Through the CNI server, as a runtime calls it: the spec's error on stdout, exit 1.
    const pod = await host.lab.container('pod');
    const config = pluginConfig(host.cniSocket, host.cniQueueDir, {
      runtimeConfig: {
        portMappings: ports(5).map((p) => ({
          HostPort: p.value,
          ContainerPort: 80,
          Protocol: 'tcp',
          HostIP: '',
        })),
      },
    });
    const add = { command: 'ADD', containerId: 'limits-cni-1', netns: pod.path, config };
    const manyPorts = await runPlugin({ ...add, args: 'IgnoreUnknown=1;K8S_POD_NAME=web-0' });
    expect([manyPorts.code, manyPorts.json?.code, manyPorts.json?.msg]).toEqual([
      1,
      4,
      "config.runtimeConfig.portMappings has 5 ports, more than the agent's limit of 4 (limits.maxPorts)",
    ]);
    const manyArgs = await runPlugin({
      ...add,
      containerId: 'limits-cni-2',
      config: pluginConfig(host.cniSocket, host.cniQueueDir),
      args: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_UID=u1',
    });
    expect([manyArgs.code, manyArgs.json?.code, manyArgs.json?.msg]).toEqual([
      1,
      7,
      "env.CNI_ARGS has 3 entries, more than the agent's limit of 2 (limits.maxCniArgs)",
    ]);

    expect(await nodeState(host)).toEqual(before);
    const list = await execa(process.execPath, [
      CLI_MAIN,
      'alloc',
      'list',
      '--address',
      host.socket,
    ]);
    expect(list.stdout).toBe('no allocations');
    // Logged as refusals, one line each.
    await agent.waitForLine(
      () =>
        agent.lines().filter((l) => l.op === 'setup' && l.code === 'INVALID_ARGUMENT').length === 2,
    );
  });
});
