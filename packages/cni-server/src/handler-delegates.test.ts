// The CNI handler with a conflist's `delegates`, over the fake runner (src/testing): what it
// refuses before the runner is asked, what spec it asks for, the result it answers (every
// attachment's interfaces and addresses, the first delegate's first), and what a GC of that
// conflist tears down.
import type { AllocRecord, RunnerSpec } from '@allocnet/alloc-runner';
import { encodeResult } from '@allocnet/cni';
import type { CniResult } from '@allocnet/cni';
import type { AllocAttachment, NetworkCatalog } from '@allocnet/cni-configurator';
import { cniResultOf, faultAnswer, faultOf } from './answer.js';
import type { CniAnswer } from './answer.js';
import { createCniHandler } from './handler.js';
import type { CniHandlerOptions } from './handler.js';
import { decodeCniRequest } from './request.js';
import { createFakeCniRunner, createRecordingLogger, readyRecordOf } from './testing/index.js';
import type { FakeCniRunner } from './testing/index.js';

const ID = 'd'.repeat(64);
const NETNS = '/var/run/netns/cni-9abc';
const K8S = 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0';
const NONE = { rules: [], chains: [], reservations: [], cacheFiles: [] };

const catalogOf = (...names: string[]): NetworkCatalog => ({
  networks: names.map((name, i) => ({
    name,
    source: i === 0 ? 'default' : 'conf-dir',
    plugins: ['bridge'],
  })),
  invalid: [],
});

let runner: FakeCniRunner;
let logger: ReturnType<typeof createRecordingLogger>;
let reloads: number;

/** Runs one request through the handler as server.ts does: the answer, or the fault's. */
async function answer(
  body: unknown,
  catalog = catalogOf('nomad', 'storage'),
  limits: CniHandlerOptions['limits'] = { maxPorts: 128, maxCniArgs: 64 },
): Promise<CniAnswer> {
  logger = createRecordingLogger();
  const handler = createCniHandler({
    runner,
    catalog: () => catalog,
    reload: async () => {
      reloads++;
      return Promise.resolve(catalog);
    },
    ignoreHostIps: false,
    limits,
    logger,
  });
  const call = decodeCniRequest(body);
  try {
    return await handler.handle(call, new AbortController().signal);
  } catch (error) {
    return faultAnswer(faultOf(error, call), call.cniVersion);
  }
}

function request(command: string, config: Record<string, unknown>, id = ID) {
  return {
    env: {
      CNI_COMMAND: command,
      CNI_CONTAINERID: id,
      CNI_NETNS: NETNS,
      CNI_IFNAME: 'eth0',
      CNI_ARGS: K8S,
      CNI_PATH: '/opt/cni/bin',
    },
    config: { cniVersion: '1.0.0', name: 'allocnet', type: 'allocnet-cni', ...config },
  };
}

/** A bridge chain's result: the bridge, the host veth, the sandbox's interface (index 2). */
function bridgeResult(bridge: string, ifName: string, address: string, gw: string): CniResult {
  return {
    cniVersion: '1.0.0',
    interfaces: [
      { name: bridge, mac: '02:00:00:00:00:01' },
      { name: `veth${ifName}`, mac: '02:00:00:00:00:02' },
      { name: ifName, mac: '02:00:00:00:00:03', sandbox: NETNS },
    ],
    ips: [{ address, gateway: gw, interface: 2 }],
    routes: [],
    dns: {},
  };
}

function attachmentOf(allocId: string, network: string, ifName: string, result: CniResult) {
  const attachment: AllocAttachment = {
    allocId,
    network: { name: network, config: '{}' },
    netns: NETNS,
    ifName,
    args: [],
    portMappings: [],
    addresses: [],
    result,
  };
  return attachment;
}

/** The record a setup of `spec` makes: one attachment per network, each with its result. */
function recordOf(spec: RunnerSpec, attached: readonly boolean[] = []): AllocRecord {
  const list = spec.attachments ?? [{ network: spec.network ?? 'nomad', ifName: 'eth0' }];
  const [first, ...rest] = list.map((a, k) =>
    attachmentOf(
      spec.allocId,
      a.network ?? 'nomad',
      a.ifName ?? `net${k}`,
      bridgeResult(`br${k}`, a.ifName ?? `net${k}`, `10.${k}.0.2/24`, `10.${k}.0.1`),
    ),
  );
  return {
    ...readyRecordOf(spec),
    ...(first === undefined ? {} : { attachment: first }),
    ...(rest.length === 0
      ? {}
      : {
          extra: rest.map((attachment, i) => ({
            spec: { ...spec, network: attachment.network.name, ifName: attachment.ifName },
            phase: 'ready' as const,
            attached: attached[i] ?? false,
            attachment,
          })),
        }),
  };
}

beforeEach(() => {
  runner = createFakeCniRunner(recordOf);
  reloads = 0;
});

describe("the CNI handler's ADD with delegates", () => {
  it('refuses a delegate the agent does not know after a reload, naming it, and asks the runner nothing', async () => {
    expect(await answer(request('ADD', { delegates: ['nomad', 'backup'] }))).toEqual({
      status: 400,
      body: {
        cniVersion: '1.0.0',
        code: 4,
        msg: 'config.delegates[1] "backup" is not an allocnet network (networks: "nomad", "storage")',
      },
    });
    expect(reloads).toBe(1);
    expect(runner.calls).toEqual([]);
  });

  it('asks for one allocation with an attachment per delegate and answers every interface, the first delegate first', async () => {
    const mappings = [{ HostPort: 18080, ContainerPort: 80, Protocol: 'tcp' }];
    const got = await answer(
      request('ADD', {
        delegates: ['nomad', 'storage'],
        runtimeConfig: { portMappings: mappings },
      }),
    );
    expect(runner.calls.map((c) => c.method)).toEqual(['setup']);
    const spec = runner.calls[0]?.arg as RunnerSpec;
    expect(spec).toMatchObject({
      allocId: ID,
      netnsPath: NETNS,
      attachments: [
        { network: 'nomad', ifName: 'eth0' },
        { network: 'storage', ifName: 'net1' },
      ],
    });
    const rec = runner.get(ID);
    expect(rec?.extra?.length).toBe(1);
    const merged = rec === undefined ? undefined : cniResultOf(rec);
    expect(merged?.interfaces.map((i) => i.name)).toEqual([
      'br0',
      'vetheth0',
      'eth0',
      'br1',
      'vethnet1',
      'net1',
    ]);
    expect(got).toEqual({
      status: 200,
      body: encodeResult(merged as CniResult, '1.0.0'),
    });
    expect(got.body?.ips).toEqual([
      { address: '10.0.0.2/24', gateway: '10.0.0.1', interface: 2 },
      { address: '10.1.0.2/24', gateway: '10.1.0.1', interface: 5 },
    ]);
  });
});

describe("the CNI handler's ADD with delegates under the agent's limits", () => {
  it('refuses more delegates than limits.maxAttachments naming config.delegates, and asks the runner nothing', async () => {
    // The agent's limits (SpecLimits gains maxAttachments with issue 29's runner).
    const limits = { maxPorts: 128, maxCniArgs: 64, maxAttachments: 1 };
    expect(
      await answer(request('ADD', { delegates: ['nomad', 'storage'] }), undefined, limits),
    ).toEqual({
      status: 400,
      body: {
        cniVersion: '1.0.0',
        code: 4,
        msg: "config.delegates has 2 attachments, more than the agent's limit of 1 (limits.maxAttachments)",
        details:
          "invalid allocation spec: spec.attachments has 2 attachments, more than the agent's limit of 1 (limits.maxAttachments)",
      },
    });
    expect(runner.calls).toEqual([]);
  });
});

describe("the CNI handler's DEL and CHECK with delegates", () => {
  it('asks the runner once for the allocation, which covers every attachment', async () => {
    runner.put(
      recordOf({
        allocId: ID,
        namespace: 'default',
        jobId: 'web-0',
        groupName: 'kubernetes',
        attachments: [{ network: 'nomad' }, { network: 'storage', ifName: 'net1' }],
      }),
    );
    const config = { delegates: ['nomad', 'storage'] };
    expect(await answer(request('CHECK', config))).toEqual({ status: 200, body: undefined });
    expect(await answer(request('DEL', config))).toEqual({ status: 200, body: undefined });
    expect(runner.calls).toEqual([
      { method: 'check', arg: ID },
      { method: 'teardown', arg: ID },
    ]);
  });
});

describe("the CNI handler's GC with delegates", () => {
  /** A record made through the CNI door of container `id` on these networks. */
  function madeOn(id: string, networks: readonly string[], attached: readonly boolean[] = []) {
    const spec: RunnerSpec = {
      allocId: id,
      namespace: 'default',
      jobId: 'web-0',
      groupName: 'kubernetes',
      netnsPath: NETNS,
      origin: { runtime: 'kubernetes', containerId: id, ifName: 'eth0' },
      attachments: networks.map((network, k) => ({
        network,
        ifName: k === 0 ? 'eth0' : `net${k}`,
      })),
    };
    // An AttachNetwork adds to the record's attachments, never to its spec (its ADD's).
    const asked = (spec.attachments ?? []).filter((_, k) => k === 0 || attached[k - 1] !== true);
    runner.put({ ...recordOf(spec, attached), spec: { ...spec, attachments: asked } });
  }

  function gc(valid: readonly string[], config: Record<string, unknown>) {
    return {
      env: { CNI_COMMAND: 'GC', CNI_PATH: '/opt/cni/bin' },
      config: {
        cniVersion: '1.1.0',
        name: 'allocnet',
        type: 'allocnet-cni',
        ...config,
        'cni.dev/valid-attachments': valid.map((id) => ({ containerID: id, ifname: 'eth0' })),
      },
    };
  }

  it("tears down what the runtime no longer has of this conflist's networks, and only that", async () => {
    madeOn('keep', ['nomad', 'storage']);
    madeOn('gone', ['nomad', 'storage']);
    // A third network attached later (AttachNetwork) is not the conflist's: still this one's.
    madeOn('grown', ['nomad', 'storage', 'backup'], [false, true]);
    // Another conflist's: one network, or the same two in another order.
    madeOn('single', ['nomad']);
    madeOn('swapped', ['storage', 'nomad']);
    runner.leaks = [
      { allocId: 'leak-storage', networks: ['storage'], state: NONE },
      { allocId: 'leak-other', networks: ['other'], state: NONE },
    ];
    expect(await answer(gc(['keep'], { delegates: ['nomad', 'storage'] }))).toEqual({
      status: 200,
      body: undefined,
    });
    expect(runner.calls.filter((c) => c.method === 'teardown').map((c) => c.arg)).toEqual([
      'gone',
      'grown',
      'leak-storage',
    ]);
    expect(
      runner
        .list()
        .map((r) => r.allocId)
        .sort(),
    ).toEqual(['keep', 'single', 'swapped']);
    expect(logger.lines).toEqual([
      {
        level: 'info',
        message: 'CNI GC',
        meta: { network: 'nomad,storage', kept: 1, removed: 2, leaksReaped: 1, failed: 0 },
      },
    ]);
  });

  it('tears down a failed record of the conflist, and one a secondary was detached from', async () => {
    madeOn('failed', ['nomad', 'storage']);
    const failed = runner.get('failed') as AllocRecord;
    // What restore leaves when it could not keep the allocation: no attachment, no extra.
    runner.put({ ...readyRecordOf(failed.spec), phase: 'failed', error: 'CHECK failed' });
    madeOn('detached', ['nomad', 'storage']);
    // An operator's DetachNetwork of net1: the record keeps the primary only.
    runner.put({ ...(runner.get('detached') as AllocRecord), extra: [] });
    expect(await answer(gc([], { delegates: ['nomad', 'storage'] }))).toEqual({
      status: 200,
      body: undefined,
    });
    expect(runner.calls.filter((c) => c.method === 'teardown').map((c) => c.arg)).toEqual([
      'failed',
      'detached',
    ]);
  });

  it('leaves a record of several networks alone in a GC of one of them', async () => {
    madeOn('both', ['nomad', 'storage']);
    expect(await answer(gc([], { delegate: 'nomad' }))).toEqual({ status: 200, body: undefined });
    expect(runner.list().map((r) => r.allocId)).toEqual(['both']);
  });
});
