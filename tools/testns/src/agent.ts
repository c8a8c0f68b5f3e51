// The real agent as a process inside a lab's node namespace, for tools that drive it from outside
// over its socket (tools/soak): `nsenter --net=<node>` (so the allocation namespaces it makes with
// `ip netns add` are visible here), the flags the dev sandbox gives its agent (`agentArgs` of
// @allocnet/dev-sandbox: data dir, socket, CNI cache, IPAM and conf dir under one dir the caller
// owns, its namespace prefix, its ready file), and its own process group, so a Ctrl-C on the
// terminal reaches only the tool, which then stops the agent itself.
import { spawn } from 'node:child_process';
import { watch } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { agentArgs, sandboxPaths } from '@allocnet/dev-sandbox';
import type { DevFlags, SandboxPaths } from '@allocnet/dev-sandbox';
import type { TestNetns } from './lab.js';

/** How much of the agent's stderr a `NodeAgent` keeps: its last lines explain an exit. */
const STDERR_TAIL = 64 * 1024;

export interface NodeAgentOptions {
  readonly node: TestNetns;
  /** The agent's entry, run with this Node: `@allocnet/agent`'s `dist/main.js`. */
  readonly entry: string;
  /** Where the agent's files go (`sandboxPaths`); made if missing, removed by the caller. */
  readonly dir: string;
  /** The allocation namespaces' prefix; start it with the lab's so a leak is found by name. */
  readonly netnsPrefix: string;
  /** More flags by long name (`'log-level': 'warn'`); the paths and the prefix are ours. */
  readonly flags?: DevFlags;
  /** How long the agent may take to write its ready file. Default 120 000 ms. */
  readonly readyTimeoutMs?: number;
}

export interface NodeAgentExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface NodeAgent {
  /** The agent's pid (nsenter execs it: the process `/proc/<pid>` describes). */
  readonly pid: number;
  readonly paths: SandboxPaths;
  /** The last 64 KiB of what it wrote to stderr. */
  stderr(): string;
  readonly exited: Promise<NodeAgentExit>;
  /** SIGTERM (a drain), SIGKILL if it has not exited after `killAfterMs` (default 30 000). */
  stop(killAfterMs?: number): Promise<NodeAgentExit>;
}

/** Resolves with the ready file's JSON once the agent wrote it (it renames it into place). */
function readyFile(
  paths: SandboxPaths,
  dir: string,
  exited: Promise<NodeAgentExit>,
  timeoutMs: number,
  stderr: () => string,
): Promise<{ pid: number }> {
  return new Promise((resolve, reject) => {
    const watcher = watch(dir);
    const timer = setTimeout(() => {
      finish(new Error(`the agent was not ready within ${timeoutMs} ms; stderr:\n${stderr()}`));
    }, timeoutMs);
    let done = false;
    function finish(outcome: Error | { pid: number }): void {
      if (done) return;
      done = true;
      clearTimeout(timer);
      watcher.close();
      if (outcome instanceof Error) reject(outcome);
      else resolve(outcome);
    }
    const look = (): void => {
      readFile(paths.ready, 'utf8').then(
        (text) => {
          finish(JSON.parse(text) as { pid: number });
        },
        (error: unknown) => {
          // Not there yet: the watcher calls again when it is renamed into place.
          if ((error as NodeJS.ErrnoException).code !== 'ENOENT') finish(error as Error);
        },
      );
    };
    watcher.on('change', look);
    watcher.on('error', (error) => {
      finish(error);
    });
    void exited.then(({ code, signal }) => {
      finish(
        new Error(`the agent exited (${code ?? signal ?? '?'}) before it was ready:\n${stderr()}`),
      );
    });
    look();
  });
}

/** Starts the agent in `node` and resolves once it serves (its ready file is written). */
export async function startNodeAgent(options: NodeAgentOptions): Promise<NodeAgent> {
  const paths = sandboxPaths(options.dir);
  await mkdir(paths.conf, { recursive: true });
  const child = spawn(
    'nsenter',
    [
      `--net=${options.node.path}`,
      '--',
      process.execPath,
      options.entry,
      ...agentArgs({ flags: options.flags ?? {} }, paths, options.netnsPrefix),
    ],
    { stdio: ['ignore', 'ignore', 'pipe'], detached: true },
  );
  let tail = '';
  child.stderr.on('data', (d: Buffer) => {
    tail = (tail + d.toString()).slice(-STDERR_TAIL);
  });
  const exited = new Promise<NodeAgentExit>((resolve) => {
    // `close`, not `exit`: by then everything it wrote to stderr has been read.
    child.once('close', (code, signal) => {
      resolve({ code, signal });
    });
  });
  child.once('error', (error) => {
    // nsenter could not be started: there is no process to wait for, only the reason.
    tail += `nsenter could not run: ${error.message}\n`;
  });
  const stderr = () => tail;
  const stop = async (killAfterMs = 30_000): Promise<NodeAgentExit> => {
    if (child.exitCode !== null || child.signalCode !== null) return exited;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    try {
      return await exited;
    } finally {
      clearTimeout(timer);
    }
  };
  let ready: { pid: number };
  try {
    ready = await readyFile(paths, options.dir, exited, options.readyTimeoutMs ?? 120_000, stderr);
  } catch (error) {
    await stop(0);
    throw error;
  }
  return { pid: ready.pid, paths, stderr, exited, stop };
}

/** A process's resident memory in MiB (`VmRSS` of `/proc/<pid>/status`). */
export async function residentMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1];
  if (kib === undefined) throw new Error(`/proc/${pid}/status has no VmRSS line`);
  return Number(kib) / 1024;
}
