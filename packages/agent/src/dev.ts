// `allocnet agent --dev` (or `-dev`): a throwaway agent for trying allocnet on a workstation.
// It makes a sandbox network namespace (`allocnet-dev-<random>`: lo up, forwarding on) standing
// for the node and a temp dir for the state, socket, CNI cache, IPAM and conf dir, runs the
// agent inside the sandbox (`nsenter --net=…`, so the allocation namespaces it makes with
// `ip netns add` stay visible to the host's tools), prints how to reach it, forwards SIGINT and
// SIGTERM, and at exit removes every namespace it or the agent made and the temp dir. Nothing
// on the host changes: iptables, bridges and sysctls are the sandbox's.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AgentIo } from './command.js';
import type { AgentFlags } from './config.js';
import { AgentError, messageOf } from './errors.js';

/** Flags --dev sets itself; the user's values of these are ignored (with a note). */
const DEV_OWNED = [
  'data-dir',
  'socket',
  'cache-dir',
  'ipam-data-dir',
  'netns-prefix',
  'ready-file',
];

export interface DevOptions {
  readonly io: AgentIo;
  readonly flags: AgentFlags;
  readonly configFile?: string;
  /** The agent's entry (`dist/main.js`). Default: the one beside this module. */
  readonly entry?: string;
  /** How long the agent may take to get ready. Default 120 000 ms. */
  readonly readyTimeoutMs?: number;
}

interface RunResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function run(file: string, args: readonly string[]): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LC_ALL: 'C' },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', reject);
    child.once('close', (code) => {
      resolve({ code, stdout, stderr });
    });
  });
}

async function must(file: string, args: readonly string[]): Promise<string> {
  let r: RunResult;
  try {
    r = await run(file, args);
  } catch (error) {
    throw new AgentError(`${[file, ...args].join(' ')} could not run: ${messageOf(error)}`, {
      code: 'dev-failed',
      cause: error,
    });
  }
  if (r.code !== 0)
    throw new AgentError(
      `${[file, ...args].join(' ')} failed (exit status ${r.code ?? 'none'}): ${r.stderr.trim() || 'no error message'}`,
      { code: 'dev-failed' },
    );
  return r.stdout;
}

/** Removes the namespaces the sandbox and the agent made, then the sandbox; returns the problems. */
async function removeNamespaces(sandbox: string, prefix: string): Promise<string[]> {
  const problems: string[] = [];
  let names: string[] = [];
  try {
    names = (await readdir('/run/netns')).filter((n) => n.startsWith(prefix));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') problems.push(messageOf(error));
  }
  if (existsSync(`/run/netns/${sandbox}`)) {
    // Anything still running in the sandbox (a plugin the agent was waiting for) would keep it.
    try {
      const pids = (await must('ip', ['netns', 'pids', sandbox]))
        .split('\n')
        .filter((p) => p !== '');
      for (const pid of pids) {
        try {
          process.kill(Number(pid), 'SIGKILL');
        } catch (error) {
          // It exited since `ip netns pids` listed it.
          if ((error as NodeJS.ErrnoException).code !== 'ESRCH') problems.push(messageOf(error));
        }
      }
    } catch (error) {
      problems.push(messageOf(error));
    }
    names.push(sandbox);
  }
  for (const name of names) {
    try {
      await must('ip', ['netns', 'del', name]);
    } catch (error) {
      problems.push(messageOf(error));
    }
  }
  return problems;
}

/** Waits for the ready file or the child's exit; the ready file's JSON, or undefined if it exited. */
async function waitReady(
  file: string,
  exited: Promise<unknown>,
  timeoutMs: number,
): Promise<Record<string, unknown> | undefined> {
  const child = { exited: false };
  void exited.then(() => {
    child.exited = true;
  });
  const until = Date.now() + timeoutMs;
  while (!child.exited && Date.now() < until) {
    try {
      return JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    // A human is waiting, not a test: polling the file a few times a second is fine.
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  if (child.exited) return undefined;
  throw new AgentError(`the dev agent was not ready within ${timeoutMs} ms`, {
    code: 'dev-failed',
  });
}

/**
 * Runs the dev agent until SIGINT/SIGTERM/SIGHUP (forwarded to it as SIGTERM; a second one kills it),
 * then removes everything it made. Resolves the agent's exit status.
 */
export async function runDevAgent(options: DevOptions): Promise<number> {
  const { io } = options;
  if (process.getuid?.() !== 0)
    throw new AgentError(
      'allocnet agent --dev needs root: it makes a network namespace for its sandbox (try sudo)',
      { code: 'dev-failed' },
    );
  const id = randomBytes(4).toString('hex');
  const sandbox = `allocnet-dev-${id}`;
  const prefix = `${sandbox}-`;
  const tmp = await mkdtemp(join(tmpdir(), 'allocnet-dev-'));
  const signals = io.signals ?? process;
  const entry = options.entry ?? fileURLToPath(new URL('./main.js', import.meta.url));
  for (const flag of DEV_OWNED)
    if (options.flags[flag] !== undefined)
      io.stderr.write(
        `allocnet agent --dev: --${flag} is ignored: the dev agent keeps everything in ${tmp}\n`,
      );

  const paths = {
    data: join(tmp, 'data'),
    socket: join(tmp, 'agent.sock'),
    ipam: join(tmp, 'ipam'),
    conf: join(tmp, 'net.d'),
    ready: join(tmp, 'ready.json'),
  };
  let status = 1;
  try {
    await mkdir(paths.conf, { recursive: true });
    await must('ip', ['netns', 'add', sandbox]);
    await must('ip', ['-n', sandbox, 'link', 'set', 'lo', 'up']);
    await must('nsenter', [
      `--net=/run/netns/${sandbox}`,
      '--',
      'sysctl',
      '-q',
      '-w',
      'net.ipv4.ip_forward=1',
    ]);

    const passed: string[] = [];
    for (const [flag, value] of Object.entries(options.flags)) {
      if (value === undefined || DEV_OWNED.includes(flag)) continue;
      for (const v of typeof value === 'string' ? [value] : value) passed.push(`--${flag}`, v);
    }
    // The host's conf dir may name IPAM dirs on the host; only an explicit --conf-dir is used.
    if (options.flags['conf-dir'] === undefined) passed.push('--conf-dir', paths.conf);
    if (options.configFile !== undefined) passed.push('--config', options.configFile);
    const args = [
      `--net=/run/netns/${sandbox}`,
      '--',
      process.execPath,
      entry,
      ...passed,
      '--data-dir',
      paths.data,
      '--socket',
      paths.socket,
      '--cache-dir',
      join(paths.data, 'cni'),
      '--ipam-data-dir',
      paths.ipam,
      '--netns-prefix',
      prefix,
      '--ready-file',
      paths.ready,
    ];
    // Its own process group: a Ctrl-C on the terminal reaches only this process, which forwards
    // one SIGTERM (a drain), instead of the agent getting SIGINT and then SIGTERM (a forced stop).
    const child = spawn('nsenter', args, {
      stdio: ['ignore', 'inherit', 'inherit'],
      detached: true,
    });
    const exited = new Promise<number>((resolve) => {
      child.once('error', (error) => {
        io.stderr.write(`allocnet agent --dev: the agent could not start: ${error.message}\n`);
        resolve(1);
      });
      child.once('exit', (code, signal) => {
        resolve(code ?? (signal === null ? 1 : 128));
      });
    });
    let forwarded = 0;
    const forward = () => {
      forwarded++;
      child.kill(forwarded > 1 ? 'SIGKILL' : 'SIGTERM');
    };
    signals.on('SIGINT', forward);
    signals.on('SIGTERM', forward);
    // The terminal closing: stop and clean up rather than die and leave the sandbox behind.
    signals.on('SIGHUP', forward);
    try {
      const ready = await waitReady(paths.ready, exited, options.readyTimeoutMs ?? 120_000);
      if (ready !== undefined) {
        io.stdout.write(
          [
            `allocnet dev agent ready (pid ${String(ready.pid)}), in sandbox network namespace ${sandbox}`,
            `  socket:        ${paths.socket}`,
            `  use it:        export ALLOCNET_ADDRESS=${paths.socket}   (or pass --address ${paths.socket} to allocnet)`,
            `  look inside:   ip netns exec ${sandbox} iptables-save`,
            `  state:         ${tmp}`,
            'Ctrl-C stops it and removes the sandbox, its allocation namespaces and the state.',
            '',
          ].join('\n'),
        );
      }
      status = await exited;
    } finally {
      signals.removeListener('SIGINT', forward);
      signals.removeListener('SIGTERM', forward);
      signals.removeListener('SIGHUP', forward);
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exited;
      }
    }
  } finally {
    const problems = await removeNamespaces(sandbox, prefix);
    try {
      await rm(tmp, { recursive: true, force: true });
    } catch (error) {
      problems.push(messageOf(error));
    }
    if (problems.length > 0) {
      io.stderr.write(
        `allocnet agent --dev: cleaning up failed; remove by hand what is left (ip netns list | grep ${sandbox}; ${tmp}):\n  ${problems.join('\n  ')}\n`,
      );
      status = status === 0 ? 1 : status;
    } else io.stdout.write(`allocnet dev agent stopped; removed ${sandbox} and ${tmp}\n`);
  }
  return status;
}
