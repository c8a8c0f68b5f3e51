// startAgent in this process, on the recording configurator and netns fakes, with its unix
// socket in a temp dir (no TCP, no metrics listener: unit tests open no network port).
import { spawnSync } from 'node:child_process';
import { chmod, lstat, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import {
  createDeferred,
  createRecordingConfigurator,
  createRecordingNetns,
} from '@allocnet/alloc-runner/testing';
import type { RecordingConfigurator } from '@allocnet/alloc-runner/testing';
import type { CniRuntime } from '@allocnet/cni';
import { tempDir } from '@allocnet/cni/testing';
import {
  createAllocNetworkClient,
  createOperatorClient,
  isServiceError,
  unary,
} from '@allocnet/proto';
import { agentVersion, startAgent } from './agent.js';
import type { RunningAgent } from './agent.js';
import { checkAgentConfig } from './config.js';
import type { AgentConfig } from './config.js';
import { isAgentError } from './errors.js';
import type { AgentLogger } from './logging.js';

let tmp: Awaited<ReturnType<typeof tempDir>>;
let configurator: RecordingConfigurator;
let agents: RunningAgent[];
let lines: { level: string; message: string; meta: Record<string, unknown> }[];
let logger: AgentLogger & { level: string };

const runtime = {
  pluginDirs: [],
  versions: () => Promise.reject(new Error('not asked in these tests')),
} as unknown as CniRuntime;

beforeEach(async () => {
  tmp = await tempDir('allocnet-agent-start-');
  configurator = createRecordingConfigurator();
  agents = [];
  lines = [];
  const record = (level: string) => (message: string, meta?: Record<string, unknown>) => {
    lines.push({ level, message, meta: meta ?? {} });
  };
  logger = {
    error: record('error'),
    warn: record('warn'),
    info: record('info'),
    debug: record('debug'),
    level: 'info',
  };
});

afterEach(async () => {
  await Promise.all(agents.map((a) => a.stop('test over', { force: true })));
  await tmp.remove();
});

function config(extra: Partial<AgentConfig> = {}): AgentConfig {
  return checkAgentConfig({
    dataDir: join(tmp.path, 'data'),
    socket: join(tmp.path, 'run', 'agent.sock'),
    metrics: { address: 'off' },
    readyFile: join(tmp.path, 'run', 'ready.json'),
    defaultNetwork: { ipamDataDir: join(tmp.path, 'ipam') },
    reconcile: { mode: 'report', intervalMs: 0 },
    ...extra,
  });
}

async function start(c: AgentConfig = config(), options: Parameters<typeof startAgent>[1] = {}) {
  const agent = await startAgent(c, {
    logger,
    configurator,
    runtime,
    netns: createRecordingNetns(),
    processMetrics: false,
    ...options,
  });
  agents.push(agent);
  return agent;
}

function health(socket: string, name = ''): Promise<string> {
  const Client = grpc.makeGenericClientConstructor(healthService, 'Health');
  const client = new Client(`unix://${socket}`, grpc.credentials.createInsecure());
  return new Promise((resolve, reject) => {
    (
      client as unknown as {
        check(req: unknown, cb: (e: grpc.ServiceError | null, r: { status: string }) => void): void;
      }
    ).check({ service: name }, (error, response) => {
      client.close();
      if (error === null) resolve(response.status);
      else reject(error);
    });
  });
}

async function startFailure(fn: () => Promise<unknown>): Promise<[string, string]> {
  try {
    await fn();
  } catch (error) {
    if (isAgentError(error)) return [error.code, error.message];
    throw error;
  }
  throw new Error('the agent started');
}

describe('startAgent', () => {
  it('serves on a 0600 socket, answers health, writes the ready file, and removes both when it stops', async () => {
    const c = config();
    const agent = await start(c);
    expect((await lstat(c.socket)).mode & 0o777).toBe(0o600);
    expect((await stat(join(tmp.path, 'run'))).mode & 0o777).toBe(0o700);
    expect(JSON.parse(await readFile(c.readyFile ?? '', 'utf8'))).toEqual({
      pid: process.pid,
      version: agentVersion(),
      socket: c.socket,
      tcp: null,
      metrics: null,
      startedAtUnixMs: agent.startedAtMs,
    });
    expect(await health(c.socket)).toBe('SERVING');
    expect(await health(c.socket, 'allocnet.v1.OperatorService')).toBe('SERVING');
    expect(lines.find((l) => l.message === 'agent ready')?.meta).toMatchObject({
      socket: c.socket,
      tls: false,
      netnsPrefix: 'alloc-',
      reconcile: 'report',
      // glibc and koffi's prebuilt binary are on every machine this runs on
      spawn: 'posix_spawn',
    });

    await agent.stop('SIGTERM');
    await agent.closed;
    await expect(lstat(c.socket)).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(lstat(c.readyFile ?? '')).rejects.toMatchObject({ code: 'ENOENT' });
    expect(configurator.callsOf('close')).toHaveLength(1);
    expect(lines.map((l) => l.message)).toContain('agent stopped');
  });

  it('removes at start the temporaries killed writers left in the CNI cache and beside the ready file, and nothing else', async () => {
    const c = config();
    const gone = spawnSync('true').pid;
    const cache = join(tmp.path, 'data', 'cni');
    const run = join(tmp.path, 'run');
    const stale = [
      join(cache, 'results', `.nomad-a1-eth0.${gone}.0000000b.tmp`),
      join(cache, 'allocnet', 'adding', `.nomad-a1-eth0.${gone}.0000000a.tmp`),
      join(run, `.ready.json.${gone}.0000000c.tmp`),
    ];
    const kept = [
      // A live writer's (an `allocnet cni add` on this cache, say): a write in flight.
      join(cache, 'results', `.nomad-b2-eth0.${process.pid}.0000000d.tmp`),
      join(cache, 'results', 'nomad-b2-eth0'),
      // Not the ready file's: someone else's file in its directory.
      join(run, `.other.json.${gone}.0000000e.tmp`),
    ];
    for (const d of [join(cache, 'allocnet', 'adding'), join(cache, 'results'), run])
      await mkdir(d, { recursive: true, mode: 0o700 });
    for (const path of [...stale, ...kept]) await writeFile(path, '');
    await start(c);
    for (const path of stale) await expect(lstat(path)).rejects.toMatchObject({ code: 'ENOENT' });
    for (const path of kept) expect((await lstat(path)).isFile()).toBe(true);
    expect(
      lines.find((l) => l.message === 'removed the temporaries of interrupted writes'),
    ).toEqual({
      level: 'info',
      message: 'removed the temporaries of interrupted writes',
      meta: { count: 3 },
    });
    expect(lines.find((l) => l.message === 'the temporaries removed')?.meta).toEqual({
      paths: stale,
    });
  });

  it('warns at start about plugins it cannot find', async () => {
    await start(
      config({
        cni: {
          pluginDirs: [join(tmp.path, 'no-plugins')],
          confDir: '/nonexistent',
          cacheDir: join(tmp.path, 'cache'),
          timeoutMs: 1000,
          socket: join(tmp.path, 'cni.sock'),
          queueDir: join(tmp.path, 'cni-queue'),
        },
      }),
    );
    expect(lines.find((l) => l.message.startsWith('CNI plugins not found'))?.meta).toEqual({
      missing: ['bridge', 'firewall', 'loopback', 'portmap'],
      pluginDirs: [join(tmp.path, 'no-plugins')],
    });
  });

  it('refuses to start on a socket another agent serves, before opening its state', async () => {
    await start();
    const second = config({ dataDir: join(tmp.path, 'data2') });
    expect(await startFailure(() => start(second))).toEqual([
      'socket-in-use',
      `another agent is listening on "${second.socket}"; stop it first, or give this agent another socket and data dir`,
    ]);
    await expect(stat(second.dataDir)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('refuses a second agent on the same data dir, naming the first; starts once it stopped', async () => {
    const first = await start();
    const second = config({
      socket: join(tmp.path, 'run2', 'agent.sock'),
      cni: {
        pluginDirs: ['/usr/lib/cni'],
        confDir: '/nonexistent',
        cacheDir: join(tmp.path, 'cache'),
        timeoutMs: 1000,
        socket: join(tmp.path, 'run2', 'cni.sock'),
        queueDir: join(tmp.path, 'q2'),
      },
    });
    const [code, message] = await startFailure(() => start(second));
    expect(code).toBe('data-dir-in-use');
    expect(message).toMatch(
      new RegExp(
        `^the data dir "${first.config.dataDir}" is in use by another agent \\(pid ${process.pid}, socket ${first.config.socket}, cni socket .*\\); stop it first, or give this agent a data dir of its own$`,
      ),
    );
    await first.stop('test');
    const again = await start(second);
    await again.stop('test');
  });

  it('drains a call in flight on stop, refusing new ones, then closes', async () => {
    const c = config();
    const agent = await start(c);
    const hold = createDeferred();
    configurator.before = (call) => (call.method === 'setup' ? hold.promise : undefined);
    const client = createAllocNetworkClient(
      `unix://${c.socket}`,
      grpc.credentials.createInsecure(),
    );
    const setup = unary(client, 'SetupAllocNetwork', {
      allocId: 'a1',
      namespace: 'default',
      jobId: 'web',
      groupName: 'api',
    });
    await new Promise<void>((resolve) => {
      const check = () => {
        if (configurator.callsOf('setup').length > 0) resolve();
        else setImmediate(check);
      };
      check();
    });
    const stopped = agent.stop('SIGTERM');
    let closed = false;
    void agent.closed.then(() => (closed = true));
    // A new connection finds nobody listening.
    const late = createAllocNetworkClient(`unix://${c.socket}`, grpc.credentials.createInsecure());
    await expect(unary(late, 'ListAllocNetworks', {}, { deadlineMs: 2000 })).rejects.toMatchObject({
      code: grpc.status.UNAVAILABLE,
    });
    late.close();
    expect(closed).toBe(false);
    hold.resolve();
    expect((await setup).status?.phase).toBe('PHASE_READY');
    await stopped;
    expect(closed).toBe(true);
    client.close();
    expect(lines.find((l) => l.message === 'agent stopping')?.meta).toEqual({
      reason: 'SIGTERM',
      inFlight: 1,
      force: false,
    });
  });

  it('serves at once after a restart: the allocation being restored shows PHASE_RESTORING until its CHECK is done', async () => {
    const c = config();
    // One host for both runs: the namespace the first made is there for the second's restore.
    const netns = createRecordingNetns();
    const first = await start(c, { netns });
    const client = createAllocNetworkClient(
      `unix://${c.socket}`,
      grpc.credentials.createInsecure(),
    );
    await unary(client, 'SetupAllocNetwork', {
      allocId: 'a1',
      namespace: 'default',
      jobId: 'web',
      groupName: 'api',
    });
    client.close();
    await first.stop('test');

    // The restore's CHECK holds: the agent must serve anyway.
    const hold = createDeferred();
    configurator.before = (call) => (call.method === 'check' ? hold.promise : undefined);
    await start(c, { netns });
    const again = createAllocNetworkClient(`unix://${c.socket}`, grpc.credentials.createInsecure());
    const operator = createOperatorClient(`unix://${c.socket}`, grpc.credentials.createInsecure());
    expect(lines.filter((l) => l.message === 'agent ready').at(-1)?.meta).toMatchObject({
      restoring: 1,
    });
    const listed = await unary(again, 'ListAllocNetworks', {});
    expect(listed.allocations.map((a) => [a.allocId, a.phase])).toEqual([
      ['a1', 'PHASE_RESTORING'],
    ]);
    expect((await unary(operator, 'GetAgentInfo', {})).restoring).toBe(1);
    // A new allocation does not wait for the restore.
    const b = await unary(again, 'SetupAllocNetwork', {
      allocId: 'b1',
      namespace: 'default',
      jobId: 'web',
      groupName: 'api',
    });
    expect(b.status?.phase).toBe('PHASE_READY');
    hold.resolve();
    await new Promise<void>((resolve) => {
      const done = () => {
        if (lines.some((l) => l.message === 'restored allocations from the last run')) resolve();
        else setImmediate(done);
      };
      done();
    });
    const after = await unary(again, 'GetAllocNetwork', { allocId: 'a1' });
    expect(after.status?.phase).toBe('PHASE_READY');
    expect((await unary(operator, 'GetAgentInfo', {})).restoring).toBe(0);
    again.close();
    operator.close();
  });

  it('hands memory back once operations and calls stopped for idleMs, not while one runs', async () => {
    const handBacks: number[] = [];
    let rss = 100;
    const c = config();
    await start(c, {
      idleHandBack: {
        idleMs: 1000,
        growthMiB: 1,
        rssMiB: () => (rss += 1),
        handBack: () => Promise.resolve(handBacks.push(Date.now())),
      },
    });
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    const handedBack = () =>
      new Promise<void>((resolve) => {
        const done = () => {
          if (lines.some((l) => l.message === 'handed memory back after a burst of operations'))
            resolve();
          else setTimeout(done, 10);
        };
        done();
      });
    // The first reconcile's scan is an operation too: its hand-back comes first.
    await handedBack();
    expect(handBacks).toHaveLength(1);
    lines.length = 0;
    const hold = createDeferred();
    configurator.before = (call) => (call.method === 'setup' ? hold.promise : undefined);
    const client = createAllocNetworkClient(
      `unix://${c.socket}`,
      grpc.credentials.createInsecure(),
    );
    try {
      const setup = unary(client, 'SetupAllocNetwork', {
        allocId: 'a1',
        namespace: 'default',
        jobId: 'web',
        groupName: 'api',
      });
      // Longer than idleMs: nothing while the setup runs.
      await sleep(1300);
      expect(handBacks).toHaveLength(1);
      hold.resolve();
      await setup;
      // A call 600 ms after the setup ended: the hand-back, due 1,000 ms after that end, waits
      // 1,000 ms after the call instead.
      await sleep(600);
      await unary(client, 'ListAllocNetworks', {});
      await sleep(700);
      expect(handBacks).toHaveLength(1);
    } finally {
      hold.resolve();
      client.close();
    }
    await handedBack();
    expect(handBacks).toHaveLength(2);
  });

  it('reloads: the CNI configs, the log level live, and says what needs a restart', async () => {
    const c = config();
    const agent = await start(c, {
      reloadConfig: () =>
        Promise.resolve({ ...c, log: { level: 'debug', format: 'json' }, concurrency: 3 }),
    });
    const report = await agent.reload();
    expect(report.applied).toEqual(['log.level']);
    expect(report.needRestart).toEqual(['concurrency']);
    expect(logger.level).toBe('debug');
    expect(configurator.callsOf('reload')).toHaveLength(1);
    expect(
      lines.find((l) => l.message === 'these settings changed and take effect only after a restart')
        ?.meta,
    ).toEqual({
      keys: ['concurrency'],
    });
  });

  it('answers ReloadConfig like SIGHUP', async () => {
    const c = config();
    await start(c);
    const client = createOperatorClient(`unix://${c.socket}`, grpc.credentials.createInsecure());
    await unary(client, 'ReloadConfig', {});
    client.close();
    expect(configurator.callsOf('reload')).toHaveLength(1);
    expect(lines.map((l) => l.message)).toContain('reloaded');
  });

  it('refuses an operator token file others may read, before opening anything', async () => {
    const token = join(tmp.path, 'token');
    await writeFile(token, 'x'.repeat(32));
    await chmod(token, 0o644);
    const c = config({ tcp: { address: '127.0.0.1:0', operatorTokenFile: token } });
    expect(await startFailure(() => start(c))).toEqual([
      'invalid-config',
      `config: tcp.operatorTokenFile "${token}" may be read by other users (mode 0644); chmod 600 it`,
    ]);
    await chmod(token, 0o600);
    await writeFile(token, 'short\n');
    expect(await startFailure(() => start(c))).toEqual([
      'invalid-config',
      `config: tcp.operatorTokenFile "${token}" holds a token of 5 characters; use at least 16 random characters`,
    ]);
    await expect(stat(c.dataDir)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('stops starting when its signal aborts, closing what it opened', async () => {
    const controller = new AbortController();
    controller.abort();
    const c = config();
    expect(await startFailure(() => start(c, { signal: controller.signal }))).toEqual([
      'aborted',
      'the agent was stopped while it was starting',
    ]);
    await expect(lstat(c.socket)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(configurator.callsOf('close')).toHaveLength(1);
  });

  it('refuses a configuration that would be refused in a file', async () => {
    expect(
      await startFailure(() =>
        startAgent(
          { ...config(), tcp: { address: '10.0.0.1:4647' } },
          { logger, configurator, runtime },
        ),
      ),
    ).toEqual([
      'invalid-config',
      'config: tcp.tls is missing: a TCP listener on 10.0.0.1:4647, which is not a loopback address, needs TLS with client certificates (startAgent)',
    ]);
  });

  it('answers UNAVAILABLE once stopping, to calls on connections still open', async () => {
    const c = config();
    const agent = await start(c);
    const client = createAllocNetworkClient(
      `unix://${c.socket}`,
      grpc.credentials.createInsecure(),
    );
    await unary(client, 'ListAllocNetworks', {});
    await agent.stop('test');
    const error: unknown = await unary(client, 'ListAllocNetworks', {}, { deadlineMs: 2000 }).catch(
      (e: unknown) => e,
    );
    expect(isServiceError(error) && error.code).toBe(grpc.status.UNAVAILABLE);
    client.close();
  });
});
