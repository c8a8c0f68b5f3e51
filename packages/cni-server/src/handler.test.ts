// The CNI server's verbs on the real runner (LMDB in a temp dir) over the recording configurator
// and netns fakes: what the handler refuses before the runner records anything, and what a GC
// tears down and says it did.
import { join } from 'node:path';
import { createAllocRunner, noCrashPoints } from '@allocnet/alloc-runner';
import type { AllocRunner } from '@allocnet/alloc-runner';
import { createRecordingConfigurator, createRecordingNetns } from '@allocnet/alloc-runner/testing';
import type { RecordingConfigurator, RecordingNetns } from '@allocnet/alloc-runner/testing';
import { tempDir } from '@allocnet/cni/testing';
import { DEFAULT_NETWORK_NAME } from '@allocnet/cni-configurator';
import { faultAnswer, faultOf } from './answer.js';
import type { CniAnswer } from './answer.js';
import { createCniHandler } from './handler.js';
import type { CniHandlerOptions } from './handler.js';
import { decodeCniRequest } from './request.js';
import { createRecordingLogger } from './testing/index.js';

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

const AGENT_LIMITS = { maxPorts: 128, maxCniArgs: 64 };
let logger: ReturnType<typeof createRecordingLogger>;

/** Runs one request through the handler as server.ts does: the answer, or the fault's. */
async function answer(body: unknown, options: Partial<CniHandlerOptions> = {}): Promise<CniAnswer> {
  logger = createRecordingLogger();
  const handler = createCniHandler({
    runner,
    catalog: () => configurator.catalog(),
    reload: () => configurator.reload(),
    ignoreHostIps: false,
    limits: AGENT_LIMITS,
    logger,
    ...options,
  });
  const call = decodeCniRequest(body);
  try {
    return await handler.handle(call, new AbortController().signal);
  } catch (error) {
    return faultAnswer(faultOf(error, call), call.cniVersion);
  }
}

/** A GC from the runtime keeping `valid` container ids (on eth0). */
function gc(valid: readonly string[], delegate?: string) {
  return {
    env: { CNI_COMMAND: 'GC', CNI_PATH: '/opt/cni/bin' },
    config: {
      cniVersion: '1.1.0',
      name: 'allocnet',
      type: 'allocnet-cni',
      ...(delegate === undefined ? {} : { delegate }),
      'cni.dev/valid-attachments': valid.map((id) => ({ containerID: id, ifname: 'eth0' })),
    },
  };
}

/** An ADD of container `id` on eth0 with no mappings (the fake keeps no CNI result: code 100). */
function addOf(id: string) {
  const body = add([], K8S);
  return { ...body, env: { ...body.env, CNI_CONTAINERID: id } };
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

  it('refuses more mappings than the limits it is given (the agent passes its own)', async () => {
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

describe("the CNI handler's ADD of a host port another allocation maps", () => {
  it('answers code 100 naming the mapping and the holder, and nothing runs', async () => {
    const holder = '6b235529-8111-4bbe-520b-d639b1d2a94e';
    await runner.setup({
      allocId: holder,
      namespace: 'default',
      jobId: 'web',
      groupName: 'api',
      ports: [{ label: 'web', value: 28080 }],
    });
    configurator.clearCalls();
    netns.clearCalls();
    const refused = `setup of allocation "${'c'.repeat(64)}" refused: `;
    const taken = ` ("tcp/80"): host port 28080/tcp on every address is already mapped by allocation "${holder}"`;
    expect(await answer(add([mapping(9000), mapping(28080)], K8S))).toEqual({
      status: 409,
      body: {
        cniVersion: '1.0.0',
        code: 100,
        msg: `${refused}config.runtimeConfig.portMappings[1].hostPort${taken}`,
      },
    });
    expect(configurator.calls).toEqual([]);
    // The runtime's namespace was only looked at (is it one?), before the ports were.
    expect(netns.calls).toEqual([{ method: 'exists', arg: NETNS }]);
    expect(runner.list().map((r) => r.allocId)).toEqual([holder]);
  });
});

describe("the CNI handler's GC", () => {
  it('tears down what the runtime no longer has and logs what it removed', async () => {
    await answer(addOf('keep'));
    await answer(addOf('gone'));
    expect(await answer(gc(['keep']))).toEqual({ status: 200, body: undefined });
    expect(runner.list().map((r) => r.allocId)).toEqual(['keep']);
    expect(logger.lines).toEqual([
      {
        level: 'info',
        message: 'CNI GC',
        meta: { network: 'nomad', kept: 1, removed: 1, leaksReaped: 0, failed: 0 },
      },
    ]);
  });

  // Fails without the fix: the log said `removed: 2` for one teardown that failed.
  it('does not count a teardown that failed as removed', async () => {
    await answer(addOf('a'));
    await answer(addOf('b'));
    configurator.fail('teardown', new Error('iptables is gone'));
    const failed = await answer(gc([]));
    expect(failed).toMatchObject({
      status: 500,
      body: { code: 999, msg: 'GC of network "nomad" could not remove 1 of 2 attachments' },
    });
    expect(logger.lines.filter((l) => l.message === 'CNI GC')).toEqual([
      {
        level: 'info',
        message: 'CNI GC',
        meta: { network: 'nomad', kept: 0, removed: 1, leaksReaped: 0, failed: 1 },
      },
    ]);
  });

  it('takes the default network by its name when the catalog names none', async () => {
    await answer(addOf('a'));
    expect(await answer(gc([]), { catalog: () => ({ networks: [], invalid: [] }) })).toEqual({
      status: 200,
      body: undefined,
    });
    expect(logger.lines[0]?.meta).toMatchObject({ network: DEFAULT_NETWORK_NAME, removed: 1 });
    expect(runner.list()).toEqual([]);
  });

  it('leaves the attachments of another network alone', async () => {
    await answer(addOf('a'));
    expect(await answer(gc([], 'other'))).toEqual({ status: 200, body: undefined });
    expect(runner.list().map((r) => r.allocId)).toEqual(['a']);
  });
});
