// The CNI server's verbs on the real runner (LMDB in a temp dir) over the recording configurator
// and netns fakes: what the handler refuses before the runner records anything.
import { join } from 'node:path';
import { createAllocRunner, noCrashPoints } from '@allocnet/alloc-runner';
import type { AllocRunner } from '@allocnet/alloc-runner';
import { createRecordingConfigurator, createRecordingNetns } from '@allocnet/alloc-runner/testing';
import type { RecordingConfigurator, RecordingNetns } from '@allocnet/alloc-runner/testing';
import { tempDir } from '@allocnet/cni/testing';
import { createCniHandler, faultAnswer, faultOf } from './cni-handler.js';
import type { CniAnswer, CniHandlerOptions } from './cni-handler.js';
import { decodeCniRequest } from './cni-request.js';
import { createReapGate } from './gate.js';
import { silentAgentLogger } from './logging.js';

let tmp: Awaited<ReturnType<typeof tempDir>>;
let configurator: RecordingConfigurator;
let netns: RecordingNetns;
let runner: AllocRunner;

const NETNS = '/var/run/netns/cni-1234';

beforeEach(async () => {
  tmp = await tempDir('allocnet-agent-cni-handler-');
  configurator = createRecordingConfigurator();
  // The runtime's namespace, which the runner opens and never makes.
  netns = createRecordingNetns().addPath(NETNS);
  runner = await createAllocRunner({
    configurator,
    netns,
    dataDir: join(tmp.path, 'data'),
    reconcile: { mode: 'report', intervalMs: 0 },
    crashPoints: noCrashPoints,
  });
  await runner.start();
  configurator.clearCalls();
  netns.clearCalls();
});

afterEach(async () => {
  await runner.close();
  await tmp.remove();
});

/** An ADD as allocnet-cni forwards it, with these port mappings and CNI_ARGS. */
function add(portMappings: readonly Record<string, unknown>[], args: string) {
  return {
    env: {
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: 'c'.repeat(64),
      CNI_NETNS: NETNS,
      CNI_IFNAME: 'eth0',
      CNI_ARGS: args,
      CNI_PATH: '/opt/cni/bin',
    },
    config: {
      cniVersion: '1.0.0',
      name: 'allocnet',
      type: 'allocnet-cni',
      runtimeConfig: { portMappings },
    },
  };
}

const mapping = (hostPort: number) => ({ HostPort: hostPort, ContainerPort: 80, Protocol: 'tcp' });
const K8S = 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0';

/** Runs one request through the handler as cni-server.ts does: the answer, or the fault's. */
async function answer(body: unknown, options: Partial<CniHandlerOptions> = {}): Promise<CniAnswer> {
  const handler = createCniHandler({
    runner,
    catalog: () => configurator.catalog(),
    reload: () => configurator.reload(),
    ignoreHostIps: false,
    logger: silentAgentLogger,
    gate: createReapGate(),
    ...options,
  });
  const call = decodeCniRequest(body);
  try {
    return await handler.handle(call, new AbortController().signal);
  } catch (error) {
    return faultAnswer(faultOf(error, call), call.cniVersion);
  }
}

describe("the CNI handler's ADD under the agent's limits", () => {
  const limits = { maxPorts: 2, maxCniArgs: 2 };

  it.each<[string, ReturnType<typeof add>, number, string, string]>([
    [
      'more port mappings than limits.maxPorts: code 4',
      add([mapping(8080), mapping(8081), mapping(8082)], K8S),
      4,
      "config.runtimeConfig.portMappings has 3 ports, more than the agent's limit of 2 (limits.maxPorts)",
      "invalid allocation spec: spec.ports has 3 ports, more than the agent's limit of 2 (limits.maxPorts)",
    ],
    [
      // IgnoreUnknown (and NOMAD_*) are the agent's own: the two K8S_* args and one more count.
      'more CNI_ARGS than limits.maxCniArgs: code 7',
      add([], `${K8S};K8S_POD_UID=u1`),
      7,
      "env.CNI_ARGS has 3 entries, more than the agent's limit of 2 (limits.maxCniArgs)",
      "invalid allocation spec: spec.cniArgs has 3 entries, more than the agent's limit of 2 (limits.maxCniArgs)",
    ],
  ])('refuses %s, and nothing runs', async (_what, body, code, msg, details) => {
    expect(await answer(body, { limits })).toEqual({
      status: 400,
      body: { cniVersion: '1.0.0', code, msg, details },
    });
    expect(configurator.calls).toEqual([]);
    expect(netns.calls).toEqual([]);
    expect(runner.list()).toEqual([]);
  });

  it('sets up an attachment at the limits; mappings without a host port do not count', async () => {
    const body = add(
      [mapping(8080), mapping(8081), { HostPort: 0, ContainerPort: 9000, Protocol: 'tcp' }],
      K8S,
    );
    await answer(body, { limits });
    // It ran (the fake configurator keeps no CNI result, so what it answers is not the point).
    expect(configurator.callsOf('setup').map((c) => c.spec?.ports?.length)).toEqual([2]);
    expect(runner.list().map((r) => r.spec.ports?.length)).toEqual([2]);
  });

  it("takes the agent's defaults when given no limits: 128 ports", async () => {
    const many = (n: number) => Array.from({ length: n }, (_, i) => mapping(10000 + i));
    expect(await answer(add(many(129), K8S))).toMatchObject({
      status: 400,
      body: {
        code: 4,
        msg: "config.runtimeConfig.portMappings has 129 ports, more than the agent's limit of 128 (limits.maxPorts)",
      },
    });
    expect(runner.list()).toEqual([]);
    await answer(add(many(128), K8S));
    expect(configurator.callsOf('setup').map((c) => c.spec?.ports?.length)).toEqual([128]);
  });
});

describe("the CNI handler's ADD and ReapLeaks", () => {
  it('waits while a reap holds the gate, so the reap never sees its fresh state, then runs', async () => {
    const gate = createReapGate();
    let endReap: () => void = () => undefined;
    const reap = gate.exclusive(() => new Promise<void>((resolve) => (endReap = resolve)));
    const adding = answer(add([mapping(8080)], K8S), { gate });
    await new Promise((resolve) => setTimeout(resolve, 50));
    // Nothing recorded, nothing run while the reap lists and scans.
    expect(configurator.callsOf('setup')).toEqual([]);
    expect(runner.list()).toEqual([]);
    endReap();
    await reap;
    await adding;
    expect(configurator.callsOf('setup')).toHaveLength(1);
    expect(runner.list()).toHaveLength(1);
  });
});
