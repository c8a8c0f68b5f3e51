// The services end to end in this process: a real grpc server on a unix socket in a temp dir,
// the real runner (LMDB in the temp dir) on the recording configurator and netns fakes.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { RunnerError, createAllocRunner, noCrashPoints } from '@allocnet/alloc-runner';
import type { AllocRunner } from '@allocnet/alloc-runner';
import {
  createDeferred,
  createRecordingConfigurator,
  createRecordingNetns,
} from '@allocnet/alloc-runner/testing';
import type { RecordingConfigurator, RecordingNetns } from '@allocnet/alloc-runner/testing';
import { CniError } from '@allocnet/cni';
import type { CniRuntime } from '@allocnet/cni';
import { tempDir } from '@allocnet/cni/testing';
import { ConfiguratorError } from '@allocnet/cni-configurator';
import {
  createAllocNetworkClient,
  createOperatorClient,
  isServiceError,
  loadAllocnetProto,
  unary,
} from '@allocnet/proto';
import type {
  AllocNetworkServiceClient,
  OperatorServiceClient,
  ReapLeaksProgress__Output,
  SetupAllocNetworkRequest,
} from '@allocnet/proto';
import type { AgentLogger } from './logging.js';
import { tolerantService } from './call.js';
import { createAgentMetrics } from './metrics.js';
import type { AgentMetrics } from './metrics.js';
import { createServiceHandlers } from './service.js';

interface Line {
  readonly level: string;
  readonly message: string;
  readonly meta: Record<string, unknown>;
}

let tmp: Awaited<ReturnType<typeof tempDir>>;
let configurator: RecordingConfigurator;
let netns: RecordingNetns;
let runner: AllocRunner;
let metrics: AgentMetrics;
let server: grpc.Server;
let alloc: AllocNetworkServiceClient;
let operator: OperatorServiceClient;
let lines: Line[];
let reloads: number;
/** What the handlers told of each call's begin and end (the idle hand-back's `activity`). */
let activity: string[];

const fakeRuntime = (pluginDir: string): Pick<CniRuntime, 'versions' | 'pluginDirs'> => ({
  pluginDirs: [pluginDir],
  versions: (network) =>
    Promise.resolve({
      cniVersion: '1.0.0',
      offered: ['1.0.0'],
      plugins: network.plugins.map((p) => ({
        type: p.type,
        path: join(pluginDir, p.type),
        supportedVersions: p.type === 'firewall' ? ['0.4.0', '1.0.0'] : ['0.3.1', '0.4.0', '1.0.0'],
      })),
    }),
});

beforeEach(async () => {
  tmp = await tempDir('allocnet-agent-service-');
  lines = [];
  reloads = 0;
  activity = [];
  configurator = createRecordingConfigurator();
  netns = createRecordingNetns();
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
  for (const type of ['loopback', 'bridge', 'firewall']) await writeFile(join(tmp.path, type), '');
  metrics = createAgentMetrics({
    stats: () => runner.stats(),
    version: '9.9.9',
    processMetrics: false,
  });
  const record = (level: string) => (message: string, meta?: Record<string, unknown>) => {
    lines.push({ level, message, meta: meta ?? {} });
  };
  const logger: AgentLogger = {
    error: record('error'),
    warn: record('warn'),
    info: record('info'),
    debug: record('debug'),
  };
  let clock = 0;
  const handlers = createServiceHandlers({
    runner,
    configurator,
    runtime: fakeRuntime(tmp.path),
    metrics,
    logger,
    ignoreHostIps: false,
    limits: { maxPorts: 128, maxCniArgs: 64, maxAttachments: 8 },
    info: {
      version: '9.9.9',
      reconcileMode: 'report',
      dataDir: '/var/lib/allocnet',
      socketPath: '/run/allocnet/agent.sock',
      startedAtMs: 1700000000000,
    },
    reload: () => {
      reloads++;
      return configurator.reload();
    },
    stopping: () => false,
    // Every call takes 750 ms on this clock (it moves on at each reading).
    now: () => (clock += 750),
    activity: () => {
      activity.push('begin');
      return () => activity.push('end');
    },
  });
  server = new grpc.Server();
  const proto = loadAllocnetProto().allocnet.v1;
  // As servers.ts adds them.
  server.addService(tolerantService(proto.AllocNetworkService.service), handlers.alloc);
  server.addService(tolerantService(proto.OperatorService.service), handlers.operator);
  const socket = join(tmp.path, 'agent.sock');
  await new Promise<void>((resolve, reject) => {
    server.bindAsync(`unix:${socket}`, grpc.ServerCredentials.createInsecure(), (error) => {
      if (error === null) resolve();
      else reject(error);
    });
  });
  alloc = createAllocNetworkClient(`unix://${socket}`, grpc.credentials.createInsecure());
  operator = createOperatorClient(`unix://${socket}`, grpc.credentials.createInsecure());
});

afterEach(async () => {
  alloc.close();
  operator.close();
  server.forceShutdown();
  await runner.close();
  await tmp.remove();
});

/** A unary call with raw request bytes, as a broken or hostile client sends them. */
function rawCall(path: string, bytes: Buffer): Promise<grpc.ServiceError | undefined> {
  const client = new grpc.Client(
    `unix://${join(tmp.path, 'agent.sock')}`,
    grpc.credentials.createInsecure(),
  );
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      path,
      (b: Buffer) => b,
      (b: Buffer) => b,
      bytes,
      (error) => {
        client.close();
        resolve(error ?? undefined);
      },
    );
  });
}

describe('undecodable request bytes', () => {
  it('answer INVALID_ARGUMENT saying the request could not be decoded, for unary and streaming calls', async () => {
    // Field 1 with wire type 7, which does not exist.
    const garbage = Buffer.from([0x0f, 0xff, 0xff, 0xff]);
    for (const path of [
      '/allocnet.v1.AllocNetworkService/SetupAllocNetwork',
      '/allocnet.v1.OperatorService/ReapLeaks',
    ]) {
      const error = await rawCall(path, garbage);
      expect(error?.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(error?.details).toMatch(/^request could not be decoded: /);
    }
    expect(configurator.calls).toEqual([]);
  });
});

const ID = '6b235529-8111-4bbe-520b-d639b1d2a94e';

function setupRequest(extra: SetupAllocNetworkRequest = {}): SetupAllocNetworkRequest {
  return { allocId: ID, namespace: 'default', jobId: 'web', groupName: 'api', ...extra };
}

async function failure(
  call: Promise<unknown>,
): Promise<{ code: string; details: string; metadata: Record<string, unknown> }> {
  try {
    await call;
  } catch (error) {
    if (!isServiceError(error)) throw error;
    const metadata = Object.fromEntries(
      Object.entries(error.metadata.getMap()).filter(([k]) => k.startsWith('allocnet-')),
    );
    return { code: grpc.status[error.code], details: error.details, metadata };
  }
  throw new Error('the call succeeded');
}

/** The log lines of one operation, without their timing. */
function logOf(op: string): Record<string, unknown>[] {
  return lines.filter((l) => l.meta.op === op).map((l) => ({ level: l.level, ...l.meta }));
}

function readStream(call: grpc.ClientReadableStream<ReapLeaksProgress__Output>) {
  return new Promise<ReapLeaksProgress__Output[]>((resolve, reject) => {
    const got: ReapLeaksProgress__Output[] = [];
    call.on('data', (m: ReapLeaksProgress__Output) => got.push(m));
    call.on('error', reject);
    call.on('end', () => {
      resolve(got);
    });
  });
}

describe('AllocNetworkService', () => {
  it('sets up, answers an equal setup without running ADD, gets, lists, checks and tears down', async () => {
    const request = setupRequest({ ports: [{ label: 'http', value: 8080, to: 80 }] });
    const first = await unary(alloc, 'SetupAllocNetwork', request);
    expect(first.alreadySetUp).toBe(false);
    expect(first.status).toMatchObject({
      allocId: ID,
      network: 'nomad',
      phase: 'PHASE_READY',
      interfaceName: 'eth0',
      address: '172.26.64.2',
      netnsPath: `/run/netns/alloc-${ID}`,
      attempts: 1,
      retryCount: 0,
      error: '',
      netnsCreatedByAgent: true,
      dns: { servers: [], searches: [], options: [] },
      // Set up over gRPC: no CNI origin.
      origin: null,
    });
    const again = await unary(alloc, 'SetupAllocNetwork', request);
    expect(again).toEqual({ ...first, alreadySetUp: true });
    expect(configurator.callsOf('setup')).toHaveLength(1);
    expect(configurator.callsOf('setup')[0]?.spec).toEqual({
      allocId: ID,
      namespace: 'default',
      jobId: 'web',
      groupName: 'api',
      ports: [{ label: 'http', value: 8080, to: 80 }],
    });

    expect(await unary(alloc, 'GetAllocNetwork', { allocId: ID })).toEqual({
      status: first.status,
    });
    expect(await unary(alloc, 'ListAllocNetworks', {})).toEqual({ allocations: [first.status] });
    expect(await unary(alloc, 'CheckAllocNetwork', { allocId: ID })).toEqual({
      healthy: true,
      checkRan: true,
      problem: '',
      status: first.status,
    });
    expect(await unary(alloc, 'TeardownAllocNetwork', { allocId: ID })).toEqual({
      wasKnown: true,
      delRan: true,
      delError: '',
      removed: { rules: [], chains: [], reservations: [], cacheFiles: [] },
    });
    expect(await unary(alloc, 'ListAllocNetworks', {})).toEqual({ allocations: [] });
    expect(logOf('setup')).toEqual([
      {
        level: 'info',
        op: 'setup',
        allocId: ID,
        network: 'nomad',
        attempts: 1,
        alreadySetUp: false,
        address: '172.26.64.2',
        durationMs: 750,
        outcome: 'ok',
      },
      {
        level: 'info',
        op: 'setup',
        allocId: ID,
        network: 'nomad',
        attempts: 0,
        alreadySetUp: true,
        address: '172.26.64.2',
        durationMs: 750,
        outcome: 'ok',
      },
    ]);
    expect(logOf('teardown')).toEqual([
      {
        level: 'info',
        op: 'teardown',
        allocId: ID,
        network: 'nomad',
        known: true,
        durationMs: 750,
        outcome: 'ok',
      },
    ]);
  });

  it("reports where an attachment came from: the CNI runtime's origin, none for gRPC", async () => {
    await unary(alloc, 'SetupAllocNetwork', setupRequest());
    // What the CNI server records for podman's ADD on eth1 (cni-request.ts `specOfAdd`): the
    // runtime's namespace, the delegate network absent (the default), the origin.
    const containerId = 'f3c1a7d2e4b5';
    const cniId = 'cni-0123456789abcdef0123456789abcdef01234567';
    const podNetns = '/run/netns/netns-4c7e';
    netns.addPath(podNetns);
    await runner.setup({
      allocId: cniId,
      namespace: 'default',
      jobId: 'web-pod',
      groupName: 'podman',
      ifName: 'eth1',
      netnsPath: podNetns,
      origin: { runtime: 'podman', containerId, ifName: 'eth1' },
    });

    const cni = await unary(alloc, 'GetAllocNetwork', { allocId: cniId });
    expect(cni.status).toMatchObject({
      allocId: cniId,
      network: 'nomad',
      phase: 'PHASE_READY',
      netnsPath: podNetns,
      netnsCreatedByAgent: false,
      origin: { runtime: 'podman', containerId, ifname: 'eth1' },
    });
    const grpcMade = await unary(alloc, 'GetAllocNetwork', { allocId: ID });
    expect(grpcMade.status?.origin).toBeNull();
    // The store lists by allocation id.
    const listed = await unary(alloc, 'ListAllocNetworks', {});
    expect(listed.allocations.map((a) => [a.allocId, a.origin])).toEqual([
      [ID, null],
      [cniId, { runtime: 'podman', containerId, ifname: 'eth1' }],
    ]);
  });

  it('tells each call begun and ended, a failed one included', async () => {
    await unary(alloc, 'ListAllocNetworks', {});
    await failure(unary(alloc, 'GetAllocNetwork', { allocId: 'unknown-1' }));
    expect(activity).toEqual(['begin', 'end', 'begin', 'end']);
  });

  it('answers NOT_FOUND for an allocation it does not know', async () => {
    expect(await failure(unary(alloc, 'GetAllocNetwork', { allocId: 'unknown-1' }))).toEqual({
      code: 'NOT_FOUND',
      details: 'allocation "unknown-1" is not known to this agent',
      metadata: { 'allocnet-error': 'not-found' },
    });
    expect(await failure(unary(alloc, 'CheckAllocNetwork', { allocId: 'unknown-1' }))).toEqual({
      code: 'NOT_FOUND',
      details: 'allocation "unknown-1" is not set up',
      metadata: { 'allocnet-error': 'not-found' },
    });
  });

  it.each<[string, SetupAllocNetworkRequest, string, string]>([
    ['an empty alloc_id', { allocId: '' }, 'alloc_id', 'alloc_id is empty'],
    [
      'alloc_id with ";"',
      { allocId: 'a;b' },
      'alloc_id',
      'alloc_id "a;b" has characters other than [a-zA-Z0-9_.-] or starts with one of "_.-"',
    ],
    [
      'a 65-character alloc_id',
      { allocId: 'a'.repeat(65) },
      'alloc_id',
      'alloc_id is 65 characters long; at most 64',
    ],
    ['an empty namespace', { namespace: '' }, 'namespace', 'namespace is empty'],
    [
      'a 257-character job_id',
      { jobId: 'j'.repeat(257) },
      'job_id',
      'job_id is 257 characters long; at most 256',
    ],
    [
      'group_name with "="',
      { groupName: 'a=b' },
      'group_name',
      'group_name "a=b" contains ";", "=" or a NUL character, which CNI_ARGS cannot carry',
    ],
    [
      'port 0',
      { ports: [{ label: 'http', value: 0 }] },
      'ports[0].value',
      'ports[0].value should be a port number from 1 to 65535, got 0',
    ],
    [
      'port 65536',
      { ports: [{ label: 'http', value: 65536 }] },
      'ports[0].value',
      'ports[0].value should be a port number from 1 to 65535, got 65536',
    ],
    [
      'a bad host_ip',
      { ports: [{ label: 'http', value: 80, hostIp: 'nope' }] },
      'ports[0].host_ip',
      'ports[0].host_ip "nope" is not an IPv4 or IPv6 address',
    ],
    [
      'two ports on one host port',
      {
        ports: [
          { label: 'a', value: 80 },
          { label: 'b', value: 80, to: 81 },
        ],
      },
      'ports[1].value',
      'ports[1].value ("b") claims host port 80, which ports[0].value ("a") already claims',
    ],
    [
      '1025 ports',
      { ports: Array.from({ length: 1025 }, (_, i) => ({ label: `p${i}`, value: i + 1 })) },
      'ports',
      'ports has 1025 ports; at most 1024',
    ],
    [
      'a reserved CNI arg',
      { cniArgs: { NOMAD_ALLOC_ID: 'x' } },
      'cni_args["NOMAD_ALLOC_ID"]',
      'cni_args["NOMAD_ALLOC_ID"] is set by allocnet and cannot be given',
    ],
    [
      '65 CNI args',
      { cniArgs: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, 'v'])) },
      'cni_args',
      'cni_args has 65 entries; at most 64',
    ],
    [
      'a relative netns_path',
      { netnsPath: 'proc/1/ns/net' },
      'netns_path',
      'netns_path "proc/1/ns/net" is not an absolute path',
    ],
    [
      'a netns_path that is no namespace',
      { netnsPath: '/proc/999999/ns/net' },
      'netns_path',
      'netns_path "/proc/999999/ns/net" is not a network namespace',
    ],
    [
      'a network name with "/"',
      { network: 'a/b' },
      'network',
      'network "a/b" does not match ^[a-zA-Z0-9][a-zA-Z0-9_.-]*$',
    ],
    [
      'an unknown network',
      { network: 'nope' },
      'network',
      'network "nope" is not known (networks: "nomad")',
    ],
  ])(
    'refuses %s with INVALID_ARGUMENT naming the field, and changes nothing',
    async (_, extra, field, details) => {
      const error = await failure(unary(alloc, 'SetupAllocNetwork', setupRequest(extra)));
      expect(error).toEqual({
        code: 'INVALID_ARGUMENT',
        details,
        metadata: expect.objectContaining({ 'allocnet-field': field }) as unknown,
      });
      expect(configurator.calls.filter((c) => c.method !== 'reload')).toEqual([]);
      expect(netns.calls.filter((c) => c.method !== 'exists')).toEqual([]);
      expect(runner.list()).toEqual([]);
      expect(logOf('setup')).toEqual([
        expect.objectContaining({
          level: 'info',
          outcome: 'failed',
          code: 'INVALID_ARGUMENT',
          error: details,
        }),
      ]);
      expect(
        await metrics.registry.getSingleMetricAsString('allocnet_setup_duration_seconds'),
      ).not.toContain('count');
    },
  );

  it('reads the conf dir again before calling a network unknown', async () => {
    await failure(unary(alloc, 'SetupAllocNetwork', setupRequest({ network: 'later' })));
    expect(reloads).toBe(0);
    expect(configurator.callsOf('reload')).toHaveLength(1);
  });

  it('answers FAILED_PRECONDITION for another spec of a set-up allocation, naming the fields as sent', async () => {
    await unary(alloc, 'SetupAllocNetwork', setupRequest());
    expect(
      await failure(
        unary(
          alloc,
          'SetupAllocNetwork',
          setupRequest({ jobId: 'other', ports: [{ label: 'a', value: 9 }] }),
        ),
      ),
    ).toEqual({
      code: 'FAILED_PRECONDITION',
      details: `allocation "${ID}" is already set up with a different spec (job_id, ports differ); tear it down first`,
      metadata: { 'allocnet-error': 'conflict' },
    });
  });

  it('answers FAILED_PRECONDITION for a host port another allocation maps, naming it, and keeps nothing', async () => {
    const other = '0c1d2e3f-0000-4000-8000-00000000000b';
    const ports = [{ label: 'web', value: 28080 }];
    await unary(alloc, 'SetupAllocNetwork', setupRequest({ ports }));
    configurator.clearCalls();
    expect(
      await failure(unary(alloc, 'SetupAllocNetwork', setupRequest({ allocId: other, ports }))),
    ).toEqual({
      code: 'FAILED_PRECONDITION',
      details: `setup of allocation "${other}" refused: ports[0].value ("web"): host port 28080/tcp on every address is already mapped by allocation "${ID}"`,
      metadata: { 'allocnet-error': 'host-port-taken', 'allocnet-field': 'ports[0].value' },
    });
    expect(configurator.calls).toEqual([]);
  });

  it("answers INTERNAL with the plugin's error when the setup fails, and keeps nothing", async () => {
    const cause = new CniError('plugin "bridge" failed (ADD) for "x": could not add IP address', {
      code: 'plugin-error',
      specCode: 999,
      msg: 'could not add IP address',
      plugin: 'bridge',
      verb: 'ADD',
    });
    configurator.fail(
      'setup',
      new ConfiguratorError(
        `setting up "${ID}" in network "nomad" failed after 3 attempts: ${cause.message}`,
        {
          code: 'setup-failed',
          attempts: 3,
          cause,
        },
      ),
    );
    expect(await failure(unary(alloc, 'SetupAllocNetwork', setupRequest()))).toEqual({
      code: 'INTERNAL',
      details: `setup of allocation "${ID}" failed: setting up "${ID}" in network "nomad" failed after 3 attempts: plugin "bridge" failed (ADD) for "x": could not add IP address`,
      metadata: {
        'allocnet-error': 'setup-failed',
        'allocnet-cni-plugin': 'bridge',
        'allocnet-cni-code': 'plugin-error',
        'allocnet-attempts': '3',
      },
    });
    expect(runner.list()).toEqual([]);
    expect(netns.names.size).toBe(0);
    expect(logOf('setup')).toEqual([
      expect.objectContaining({ level: 'error', code: 'INTERNAL', attempts: 3, outcome: 'failed' }),
    ]);
    expect(
      await metrics.registry.getSingleMetricAsString('allocnet_setup_retries_total'),
    ).toContain('allocnet_setup_retries_total 2');
    expect(
      await metrics.registry.getSingleMetricAsString('allocnet_operation_failures_total'),
    ).toContain('allocnet_operation_failures_total{op="setup",code="INTERNAL"} 1');
  });

  it('honours the deadline: a setup queued behind another one on the allocation ends DEADLINE_EXCEEDED and never runs', async () => {
    const hold = createDeferred();
    configurator.before = (call) => (call.method === 'setup' ? hold.promise : undefined);
    const first = unary(alloc, 'SetupAllocNetwork', setupRequest());
    const second = failure(unary(alloc, 'SetupAllocNetwork', setupRequest(), { deadlineMs: 200 }));
    expect((await second).code).toBe('DEADLINE_EXCEEDED');
    hold.resolve();
    await first;
    expect(configurator.callsOf('setup')).toHaveLength(1);
    // The server saw its own deadline pass (the client's error alone would not show it).
    const logged = await waitFor(() => logOf('setup').find((l) => l.code !== undefined));
    expect(logged).toMatchObject({ code: 'DEADLINE_EXCEEDED', outcome: 'failed' });
  });

  it('reports an unhealthy CHECK as an answer', async () => {
    await unary(alloc, 'SetupAllocNetwork', setupRequest());
    // What the configurator throws when a plugin's CHECK finds the network broken.
    configurator.fail(
      'check',
      new ConfiguratorError('plugin "bridge" failed (CHECK): no address', { code: 'check-failed' }),
    );
    expect(await unary(alloc, 'CheckAllocNetwork', { allocId: ID })).toMatchObject({
      healthy: false,
      checkRan: true,
      problem: `check of allocation "${ID}" failed: plugin "bridge" failed (CHECK): no address`,
    });
  });
});

/** Polls `fn` until it gives something (the server logs after the client has its answer). */
async function waitFor<T>(fn: () => T | undefined, timeoutMs = 2000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = fn();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((resolve) => setImmediate(resolve));
  }
}

describe('OperatorService', () => {
  it('lists leaks, reaps them in a stream ending with the summary, and counts them', async () => {
    await unary(alloc, 'SetupAllocNetwork', setupRequest());
    configurator.leak('leaked-1', '172.26.79.1').leak('leaked-2', '172.26.79.2');
    const listed = await unary(operator, 'ListLeaks', {});
    expect(
      listed.leaks.map((l) => [l.allocId, l.networks, l.state?.reservations.map((r) => r.address)]),
    ).toEqual([
      ['leaked-1', ['nomad'], ['172.26.79.1']],
      ['leaked-2', ['nomad'], ['172.26.79.2']],
    ]);
    expect(configurator.callsOf('findLeaks')[0]?.known).toEqual([ID]);

    const dry = await readStream(operator.ReapLeaks({ dryRun: true }));
    expect(dry.map((m) => m.event)).toEqual(['step', 'step', 'summary']);
    expect(configurator.attached.has('leaked-1')).toBe(true);

    const progress = await readStream(operator.ReapLeaks({ batchSize: 0 }));
    expect(progress.filter((m) => m.event === 'step').map((m) => m.step)).toEqual([
      { done: 1, total: 2, allocId: 'leaked-1' },
      { done: 2, total: 2, allocId: 'leaked-2' },
    ]);
    const summary = progress.at(-1);
    expect(summary?.event).toBe('summary');
    expect(summary?.summary?.reaped.map((l) => l.allocId)).toEqual(['leaked-1', 'leaked-2']);
    expect(summary?.summary?.failed).toEqual([]);
    expect(configurator.attached.has('leaked-1')).toBe(false);
    expect(configurator.callsOf('reapLeaks')[0]?.known).toEqual([ID]);

    const info = await unary(operator, 'GetAgentInfo', {});
    expect(info.counts).toEqual({
      liveAllocations: 1,
      setups: '1',
      teardowns: '0',
      failures: '0',
      leaksFound: '6',
      leaksReaped: '2',
    });
    expect(await metrics.registry.getSingleMetricAsString('allocnet_leaks_reaped_total')).toContain(
      'allocnet_leaks_reaped_total 2',
    );
  });

  it('lists stray namespaces and reaps them, never one an allocation has', async () => {
    const stray = '0c1d2e3f-0000-4000-8000-0000000000aa';
    const stuck = '0c1d2e3f-0000-4000-8000-0000000000bb';
    const why = `named like this agent's allocations (prefix "alloc-") but no allocation has it`;
    const message = (id: string) => ({
      name: `alloc-${id}`,
      path: `/run/netns/alloc-${id}`,
      allocId: id,
      reason: why,
    });
    await unary(alloc, 'SetupAllocNetwork', setupRequest());
    netns.add(`alloc-${stray}`).add(`alloc-${stuck}`).add('other-ns');

    expect(await unary(operator, 'ListLeaks', {})).toEqual({
      leaks: [],
      orphans: { rules: [], chains: [], reservations: [], cacheFiles: [] },
      namespaces: [message(stray), message(stuck)],
    });
    const dry = await readStream(operator.ReapLeaks({ dryRun: true }));
    expect(dry.at(-1)?.summary?.namespaces).toEqual([message(stray), message(stuck)]);
    expect(netns.callsOf('remove')).toEqual([]);

    netns.fail(
      'remove',
      new RunnerError(`ip netns delete alloc-${stray} failed (exit status 1): busy`, {
        code: 'netns',
      }),
    );
    const reaped = await readStream(operator.ReapLeaks({}));
    expect(reaped.at(-1)?.summary).toMatchObject({
      namespaces: [message(stuck)],
      failed: [
        {
          allocId: stray,
          netnsName: `alloc-${stray}`,
          error: `ip netns delete alloc-${stray} failed (exit status 1): busy`,
        },
      ],
    });
    expect([...netns.names].sort()).toEqual([`alloc-${stray}`, `alloc-${ID}`, 'other-ns']);
    expect(logOf('list-leaks')[0]).toMatchObject({ namespaces: 2, leaks: 0 });
    expect(logOf('reap-leaks')[1]).toMatchObject({ dryRun: false, namespaces: 1, failed: 1 });

    const again = await readStream(operator.ReapLeaks({}));
    expect(again.at(-1)?.summary).toMatchObject({ namespaces: [message(stray)], failed: [] });
    expect([...netns.names].sort()).toEqual([`alloc-${ID}`, 'other-ns']);
    expect((await unary(operator, 'ListLeaks', {})).namespaces).toEqual([]);
    expect(runner.stats()).toMatchObject({ orphanNamespacesFound: 7, orphanNamespacesReaped: 2 });
  });

  it('refuses a batch size out of range in the stream', async () => {
    await expect(readStream(operator.ReapLeaks({ batchSize: 10001 }))).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: "batch_size should be from 0 (the agent's default, 500) to 10000, got 10001",
    });
    expect(configurator.callsOf('reapLeaks')).toEqual([]);
  });

  it("spares a setup in flight from a reap, and sets up a new one beside it (the runner's guard)", async () => {
    const holdSetup = createDeferred();
    configurator.before = (call) => (call.method === 'setup' ? holdSetup.promise : undefined);
    const first = unary(alloc, 'SetupAllocNetwork', setupRequest());
    await waitFor(() => configurator.callsOf('setup')[0]);
    // The reap does not wait for the setup in flight: it counts it as known.
    await readStream(operator.ReapLeaks({}));
    expect(configurator.callsOf('reapLeaks')[0]?.known).toEqual([ID]);
    holdSetup.resolve();
    await first;

    const holdReap = createDeferred();
    const order: string[] = [];
    configurator.before = (call) => {
      order.push(call.method);
      return call.method === 'reapLeaks' ? holdReap.promise : undefined;
    };
    const reap = readStream(operator.ReapLeaks({}));
    await waitFor(() => configurator.callsOf('reapLeaks')[1]);
    // A new allocation is set up while the reap is held, and answers before it ends.
    await unary(alloc, 'SetupAllocNetwork', setupRequest({ allocId: 'other-1' }));
    order.push('released');
    holdReap.resolve();
    await reap;
    expect(order).toEqual(['reapLeaks', 'setup', 'released']);
    expect(configurator.attached.has('other-1')).toBe(true);
  });

  it('cleans up by force, and dry runs leave the state', async () => {
    configurator.leak('leaked-9', '172.26.79.9');
    const dry = await unary(operator, 'ForceCleanup', { allocId: 'leaked-9', dryRun: true });
    expect(dry.dryRun).toBe(true);
    expect(dry.removed?.rules.map((r) => r.chain)).toEqual(['POSTROUTING']);
    expect(configurator.attached.has('leaked-9')).toBe(true);
    await unary(operator, 'ForceCleanup', { allocId: 'leaked-9' });
    expect(configurator.attached.has('leaked-9')).toBe(false);
    expect(await failure(unary(operator, 'ForceCleanup', { allocId: '../x' }))).toEqual({
      code: 'INVALID_ARGUMENT',
      details:
        'alloc_id "../x" has characters other than [a-zA-Z0-9_.-] or starts with one of "_.-"',
      metadata: { 'allocnet-error': 'invalid-argument', 'allocnet-field': 'alloc_id' },
    });
  });

  it('reloads the configuration through the agent', async () => {
    expect(await unary(operator, 'ReloadConfig', {})).toEqual({
      networks: [
        {
          name: 'nomad',
          source: 'default',
          plugins: ['loopback', 'bridge', 'firewall', 'portmap'],
        },
      ],
      invalidFiles: [],
    });
    expect(reloads).toBe(1);
  });

  it("reports the agent's version, plugins (a missing one with its error), networks and settings", async () => {
    const info = await unary(operator, 'GetAgentInfo', {});
    expect(info).toEqual({
      version: '9.9.9',
      plugins: [
        {
          type: 'bridge',
          path: join(tmp.path, 'bridge'),
          supportedVersions: ['0.3.1', '0.4.0', '1.0.0'],
          error: '',
        },
        {
          type: 'firewall',
          path: join(tmp.path, 'firewall'),
          supportedVersions: ['0.4.0', '1.0.0'],
          error: '',
        },
        {
          type: 'loopback',
          path: join(tmp.path, 'loopback'),
          supportedVersions: ['0.3.1', '0.4.0', '1.0.0'],
          error: '',
        },
        {
          type: 'portmap',
          path: '',
          supportedVersions: [],
          error: `plugin "portmap" not found in "${tmp.path}"`,
        },
      ],
      networks: [
        {
          name: 'nomad',
          source: 'default',
          plugins: ['loopback', 'bridge', 'firewall', 'portmap'],
        },
      ],
      invalidFiles: [],
      counts: {
        liveAllocations: 0,
        setups: '0',
        teardowns: '0',
        failures: '0',
        leaksFound: '0',
        leaksReaped: '0',
      },
      reconcileMode: 'report',
      dataDir: '/var/lib/allocnet',
      socketPath: '/run/allocnet/agent.sock',
      startedAtUnixMs: '1700000000000',
      store: {
        writable: true,
        problem: '',
        fullSinceUnixMs: '0',
        writeFailures: '0',
        unremovedRecords: 0,
      },
      restoring: 0,
    });
  });
});
