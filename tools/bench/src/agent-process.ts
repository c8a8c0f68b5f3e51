// The agent as a benchmark contender: the real process (packages/agent/dist/main.js) inside a node
// namespace (`nsenter --net=`, so namespaces it makes stay visible), its state in a temp dir,
// clients over its unix socket from the benchmark process.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { agentTarget, createAllocNetworkClient, createOperatorClient } from '@allocnet/proto';
import type { AllocNetworkServiceClient, OperatorServiceClient } from '@allocnet/proto';
import type { TestNetns } from '@allocnet/testns';
import { REPO } from './contenders.js';

export const AGENT_MAIN = join(REPO, 'packages', 'agent', 'dist', 'main.js');

export interface BenchAgent {
  readonly pid: number;
  readonly alloc: AllocNetworkServiceClient;
  readonly operator: OperatorServiceClient;
  /** When the process was spawned and when it said it was ready (performance.now()). */
  readonly spawnedAt: number;
  readonly readyAt: number;
  /** The agent's JSON log lines so far. */
  lines(): Record<string, unknown>[];
  /** SIGTERM, then waits for the exit. */
  stop(): Promise<number | null>;
}

export interface BenchAgentOptions {
  readonly node: TestNetns;
  readonly dir: string;
  readonly netnsPrefix: string;
  readonly pluginDir: string;
  readonly concurrency?: number;
  /** Log at debug level (plugin and iptables timings). */
  readonly debug?: boolean;
}

/** Starts the agent and resolves once it serves (its ready file is written). */
export async function startBenchAgent(o: BenchAgentOptions): Promise<BenchAgent> {
  const socket = join(o.dir, 'run', 'agent.sock');
  const readyFile = join(o.dir, 'run', 'ready.json');
  await mkdir(join(o.dir, 'run'), { recursive: true });
  const spawnedAt = performance.now();
  const child: ChildProcess = spawn(
    'nsenter',
    [
      `--net=${o.node.path}`, '--', process.execPath, AGENT_MAIN,
      '--data-dir', join(o.dir, 'data'), '--socket', socket,
      '--conf-dir', join(o.dir, 'net.d'), '--ipam-data-dir', join(o.dir, 'ipam'),
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
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((done) => child.once('close', done));
  const state = { gone: false };
  void exited.then(() => (state.gone = true));
  // The agent writes its ready file once it serves; poll for it (bounded), failing on an exit.
  const deadline = Date.now() + 300_000;
  while (!existsSync(readyFile)) {
    if (state.gone) throw new Error(`the agent exited before it was ready:\n${stderr}`);
    if (Date.now() > deadline) throw new Error(`the agent was not ready in 300 s:\n${stderr}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  const readyAt = performance.now();
  const ready = JSON.parse(readFileSync(readyFile, 'utf8')) as { pid: number };
  const own = { 'grpc.use_local_subchannel_pool': 1 };
  const alloc = createAllocNetworkClient(
    agentTarget(socket),
    grpc.credentials.createInsecure(),
    own,
  );
  const operator = createOperatorClient(
    agentTarget(socket),
    grpc.credentials.createInsecure(),
    own,
  );
  return {
    pid: ready.pid,
    alloc,
    operator,
    spawnedAt,
    readyAt,
    lines: () =>
      stderr
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    async stop() {
      alloc.close();
      operator.close();
      child.kill('SIGTERM');
      return exited;
    },
  };
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
