// The agent as a benchmark contender: the real process (packages/agent/dist/main.js) inside a node
// namespace (`nsenter --net=`, so namespaces it makes stay visible), its state in a temp dir,
// clients over its unix socket from the benchmark process.
import { setTimeout as sleep } from 'node:timers/promises';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import {
  agentTarget,
  createAllocNetworkClient,
  createOperatorClient,
  unary,
} from '@allocnet/proto';
import type { AllocNetworkServiceClient, OperatorServiceClient } from '@allocnet/proto';
import type { TestNetns } from '@allocnet/testns';
import { BenchError } from './errors.js';
import { AGENT_MAIN } from './paths.js';

export { AGENT_MAIN } from './paths.js';

/** One JSON log line of the agent, with when this process read it (performance.now()). */
export interface AgentLine {
  readonly at: number;
  readonly fields: Readonly<Record<string, unknown>>;
}

/** The agent process from its spawn, before it serves. */
export interface SpawnedAgent {
  /** When the process was spawned (performance.now()). */
  readonly spawnedAt: number;
  readonly socket: string;
  /** The agent's JSON log lines so far. */
  lines(): readonly AgentLine[];
  /** The first log line whose `message` is `message`, once it is written (bounded by `timeoutMs`). */
  line(message: string, timeoutMs: number): Promise<AgentLine>;
  /** Resolves once the ready file is written (the agent serves), with when (performance.now()). */
  ready(timeoutMs: number): Promise<number>;
  /** Whether the process has exited. */
  gone(): boolean;
  /** SIGTERM, then waits for the exit. */
  stop(): Promise<number | null>;
}

export interface BenchAgent {
  readonly pid: number;
  readonly alloc: AllocNetworkServiceClient;
  readonly operator: OperatorServiceClient;
  /** When the process was spawned and when it said it was ready (performance.now()). */
  readonly spawnedAt: number;
  readonly readyAt: number;
  /** The agent's JSON log lines so far, each with when it was read. */
  lines(): readonly AgentLine[];
  /** See `SpawnedAgent.line`. */
  line(message: string, timeoutMs: number): Promise<AgentLine>;
  /** SIGTERM, then waits for the exit. */
  stop(): Promise<number | null>;
}

export interface BenchAgentOptions {
  readonly node: TestNetns;
  /** The agent's own dir: `data`, `run` (socket, ready file) and `net.d` in it. */
  readonly dir: string;
  /** The host-local store; default `<dir>/ipam`. Contenders sharing a node share one. */
  readonly ipamDir?: string;
  readonly netnsPrefix: string;
  readonly pluginDir: string;
  readonly concurrency?: number;
  /** Log at debug level (plugin and iptables timings). */
  readonly debug?: boolean;
}

/** A bounded wait for `done()`, looking every `everyMs`; throws `why()` past the deadline. */
async function until(
  done: () => boolean,
  timeoutMs: number,
  everyMs: number,
  why: () => BenchError,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!done()) {
    if (performance.now() > deadline) throw why();
    await sleep(everyMs);
  }
}

/** Spawns the agent and returns at once: nothing is waited for. */
export async function spawnBenchAgent(o: BenchAgentOptions): Promise<SpawnedAgent> {
  const socket = join(o.dir, 'run', 'agent.sock');
  const readyFile = join(o.dir, 'run', 'ready.json');
  await mkdir(join(o.dir, 'run'), { recursive: true });
  const spawnedAt = performance.now();
  const child: ChildProcess = spawn(
    'nsenter',
    [
      `--net=${o.node.path}`, '--', process.execPath, AGENT_MAIN,
      '--data-dir', join(o.dir, 'data'), '--socket', socket,
      '--conf-dir', join(o.dir, 'net.d'), '--ipam-data-dir', o.ipamDir ?? join(o.dir, 'ipam'),
      '--plugin-dir', o.pluginDir, '--netns-prefix', o.netnsPrefix,
      '--metrics-address', 'off', '--ready-file', readyFile,
      '--log-format', 'json', '--log-level', o.debug === true ? 'debug' : 'info',
    ], // prettier-ignore
    {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: {
        ...process.env,
        ...(o.concurrency === undefined ? {} : { ALLOCNET_CONCURRENCY: String(o.concurrency) }),
      },
    },
  );
  let stderr = '';
  let partial = '';
  const lines: AgentLine[] = [];
  child.stderr?.on('data', (d: Buffer) => {
    const at = performance.now();
    const text = d.toString();
    stderr += text;
    const parts = (partial + text).split('\n');
    partial = parts.pop() ?? '';
    for (const l of parts)
      if (l.startsWith('{')) lines.push({ at, fields: JSON.parse(l) as Record<string, unknown> });
  });
  const exited = new Promise<number | null>((done) => child.once('close', done));
  const state = { gone: false };
  void exited.then(() => (state.gone = true));
  const failure = (what: string) =>
    new BenchError(`the agent ${state.gone ? 'exited' : 'was not'} ${what}:\n${stderr}`, {
      code: 'driver-ended',
    });
  return {
    spawnedAt,
    socket,
    lines: () => lines,
    async line(message, timeoutMs) {
      const find = () => lines.find((l) => l.fields.message === message);
      // Polled: the agent's log is read as it comes; a few ms of resolution against seconds.
      await until(
        () => find() !== undefined || state.gone,
        timeoutMs,
        5,
        () => failure(`logging ${JSON.stringify(message)} in ${timeoutMs} ms`),
      );
      const found = find();
      if (found === undefined) throw failure(`before logging ${JSON.stringify(message)}`);
      return found;
    },
    async ready(timeoutMs) {
      await until(
        () => existsSync(readyFile) || state.gone,
        timeoutMs,
        5,
        () => failure(`ready in ${timeoutMs} ms`),
      );
      if (!existsSync(readyFile)) throw failure('before it was ready');
      return performance.now();
    },
    gone: () => state.gone,
    async stop() {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

function clients(socket: string) {
  const own = { 'grpc.use_local_subchannel_pool': 1 };
  return {
    alloc: createAllocNetworkClient(agentTarget(socket), grpc.credentials.createInsecure(), own),
    operator: createOperatorClient(agentTarget(socket), grpc.credentials.createInsecure(), own),
  };
}

/** Starts the agent and resolves once it serves (its ready file is written). */
export async function startBenchAgent(o: BenchAgentOptions): Promise<BenchAgent> {
  const spawned = await spawnBenchAgent(o);
  let readyAt: number;
  try {
    readyAt = await spawned.ready(300_000);
  } catch (error) {
    await spawned.stop();
    throw error;
  }
  return connect(spawned, readyAt);
}

/** Clients to a spawned agent (ready at `readyAt`). */
export function connect(spawned: SpawnedAgent, readyAt: number): BenchAgent {
  const ready = JSON.parse(readFileSync(join(spawned.socket, '..', 'ready.json'), 'utf8')) as {
    pid: number;
  };
  const { alloc, operator } = clients(spawned.socket);
  return {
    pid: ready.pid,
    alloc,
    operator,
    spawnedAt: spawned.spawnedAt,
    readyAt,
    lines: () => spawned.lines(),
    line: (message, timeoutMs) => spawned.line(message, timeoutMs),
    async stop() {
      alloc.close();
      operator.close();
      return spawned.stop();
    },
  };
}

/**
 * When the agent first answers ListAllocNetworks (performance.now()) and how many allocations
 * that answer listed: asked every few ms from its spawn, each time on a new channel (grpc-js
 * backs a failed channel off for a second, which would hide when the agent began to answer),
 * until one call succeeds.
 */
export async function firstAnswer(
  spawned: SpawnedAgent,
  timeoutMs: number,
): Promise<{ readonly at: number; readonly listed: number }> {
  const deadline = performance.now() + timeoutMs;
  let last = 'the socket was never there';
  for (;;) {
    if (spawned.gone())
      throw new BenchError(`the agent exited before it answered: ${last}`, {
        code: 'driver-ended',
      });
    if (performance.now() > deadline)
      throw new BenchError(
        `the agent did not answer ListAllocNetworks in ${timeoutMs} ms: ${last}`,
        {
          code: 'driver-ended',
        },
      );
    if (existsSync(spawned.socket)) {
      const { alloc, operator } = clients(spawned.socket);
      try {
        const answer = await unary(alloc, 'ListAllocNetworks', {}, { deadlineMs: 2_000 });
        return { at: performance.now(), listed: answer.allocations.length };
      } catch (error) {
        last = error instanceof Error ? error.message : String(error);
      } finally {
        alloc.close();
        operator.close();
      }
    }
    await sleep(5);
  }
}

/** Resident memory (MiB) and CPU seconds (user + system, not counting children) of a process. */
export function processUsage(pid: number): { rssMiB: number; cpuSeconds: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rssKiB = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 'NaN');
  // Fields after the command name (which may hold spaces) in /proc/<pid>/stat: utime is the
  // 14th field, stime the 15th, in clock ticks (100 per second on Linux).
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return { rssMiB: rssKiB / 1024, cpuSeconds: ticks / 100 };
}
