// `allocnet agent --dev` (or `-dev`): a throwaway agent for trying allocnet on a workstation.
// It makes a sandbox network namespace (`allocnet-dev-<random>`: lo up, forwarding on) standing
// for the node and a temp dir for the state, socket, CNI cache, IPAM and conf dir, runs the
// agent inside the sandbox (`nsenter --net=…`, so the allocation namespaces it makes with
// `ip netns add` stay visible to the host's tools), prints how to reach it, forwards SIGINT and
// SIGTERM, and at exit removes every namespace it or the agent made and the temp dir. Nothing
// on the host changes: iptables, bridges and sysctls are the sandbox's.
//
// It knows the agent only as a program (`entry`) and its flags: the agent's command hands it
// over, so the daemon's package does not import this one's code, and this one none of its.
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout } from 'node:timers/promises';
import { createIpNetnsManager } from '@allocnet/netns';
import type { IpNetnsManager } from '@allocnet/netns';
import { startProcess } from '@allocnet/spawn';
import { DevError, messageOf, problemOf } from './errors.js';

/** Flags --dev sets itself; the user's values of these are ignored (with a note). */
export const DEV_OWNED: readonly string[] = [
  'data-dir',
  'socket',
  'cache-dir',
  'ipam-data-dir',
  'netns-prefix',
  'ready-file',
];

/** The signals the sandbox forwards to its agent. */
export type DevSignal = 'SIGTERM' | 'SIGINT' | 'SIGHUP';

/** Where signals come from: `process`, or a test's emitter. */
export interface DevSignalSource {
  on(signal: DevSignal, listener: () => void): unknown;
  removeListener(signal: DevSignal, listener: () => void): unknown;
}

/** The agent command's io, as much of it as the sandbox uses. */
export interface DevIo {
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown };
  /** Default `process`. */
  readonly signals?: DevSignalSource;
}

/** The agent's flags by long name without dashes (`data-dir`); repeatable ones as lists. */
export type DevFlags = Readonly<Record<string, string | readonly string[] | undefined>>;

export interface DevOptions {
  readonly io: DevIo;
  /** The flags given with --dev, passed on to the agent but for `DEV_OWNED`. */
  readonly flags: DevFlags;
  readonly configFile?: string;
  /** The agent's entry, run with this Node: `@allocnet/agent`'s `dist/main.js`. */
  readonly entry: string;
  /** How long the agent may take to get ready. Default 120 000 ms. */
  readonly readyTimeoutMs?: number;
  /** Default: `createIpNetnsManager()`. */
  readonly netns?: IpNetnsManager;
}

/** Where the sandbox keeps the agent's files, under its temp dir. */
export interface SandboxPaths {
  readonly data: string;
  readonly socket: string;
  readonly ipam: string;
  readonly conf: string;
  readonly ready: string;
}

export function sandboxPaths(tmp: string): SandboxPaths {
  return {
    data: join(tmp, 'data'),
    socket: join(tmp, 'agent.sock'),
    ipam: join(tmp, 'ipam'),
    conf: join(tmp, 'net.d'),
    ready: join(tmp, 'ready.json'),
  };
}

/**
 * The agent's arguments in the sandbox: the user's flags (but `DEV_OWNED`), the conf dir unless
 * one was given, the config file, then the sandbox's own paths and namespace prefix.
 */
export function agentArgs(
  given: Pick<DevOptions, 'flags' | 'configFile'>,
  paths: SandboxPaths,
  netnsPrefix: string,
): string[] {
  const passed: string[] = [];
  for (const [flag, value] of Object.entries(given.flags)) {
    if (value === undefined || DEV_OWNED.includes(flag)) continue;
    for (const v of typeof value === 'string' ? [value] : value) passed.push(`--${flag}`, v);
  }
  // The host's conf dir may name IPAM dirs on the host; only an explicit --conf-dir is used.
  if (given.flags['conf-dir'] === undefined) passed.push('--conf-dir', paths.conf);
  if (given.configFile !== undefined) passed.push('--config', given.configFile);
  return [
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
    netnsPrefix,
    '--ready-file',
    paths.ready,
  ];
}

/** Removes the namespaces the sandbox and the agent made, then the sandbox; returns the problems. */
async function removeNamespaces(
  netns: IpNetnsManager,
  sandbox: string,
  prefix: string,
): Promise<string[]> {
  const problems: string[] = [];
  let listed: string[] | undefined;
  try {
    listed = await netns.list();
  } catch (error) {
    problems.push(problemOf(error));
  }
  const names = (listed ?? []).filter((n) => n.startsWith(prefix));
  // Not knowing what is there, the sandbox is tried anyway.
  if (listed === undefined || listed.includes(sandbox)) {
    // Anything still running in the sandbox (a plugin the agent was waiting for) would keep it.
    try {
      await netns.killAll(sandbox);
    } catch (error) {
      problems.push(problemOf(error));
    }
    names.push(sandbox);
  }
  for (const name of names) {
    try {
      await netns.remove(name);
    } catch (error) {
      problems.push(problemOf(error));
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
    await setTimeout(100);
  }
  if (child.exited) return undefined;
  throw new DevError(`the dev agent was not ready within ${timeoutMs} ms`, { code: 'not-ready' });
}

/**
 * Runs the dev agent until SIGINT/SIGTERM/SIGHUP (forwarded to it as SIGTERM; a second one kills it),
 * then removes everything it made. Resolves the agent's exit status; rejects with `DevError` when
 * the sandbox cannot be made.
 */
export async function runDevAgent(options: DevOptions): Promise<number> {
  const { io } = options;
  if (process.getuid?.() !== 0)
    throw new DevError(
      'allocnet agent --dev needs root: it makes a network namespace for its sandbox (try sudo)',
      { code: 'needs-root' },
    );
  const netns = options.netns ?? createIpNetnsManager();
  const id = randomBytes(4).toString('hex');
  const sandbox = `allocnet-dev-${id}`;
  const prefix = `${sandbox}-`;
  const tmp = await mkdtemp(join(tmpdir(), 'allocnet-dev-'));
  const signals = io.signals ?? process;
  for (const flag of DEV_OWNED)
    if (options.flags[flag] !== undefined)
      io.stderr.write(
        `allocnet agent --dev: --${flag} is ignored: the dev agent keeps everything in ${tmp}\n`,
      );

  const paths = sandboxPaths(tmp);
  let status = 1;
  try {
    await mkdir(paths.conf, { recursive: true });
    try {
      await netns.createNode(sandbox);
    } catch (error) {
      throw new DevError(problemOf(error), { code: 'sandbox-failed', cause: error });
    }

    const args = [
      `--net=${netns.pathOf(sandbox)}`,
      '--',
      process.execPath,
      options.entry,
      ...agentArgs(options, paths, prefix),
    ];
    // Its own process group: a Ctrl-C on the terminal reaches only this process, which forwards
    // one SIGTERM (a drain), instead of the agent getting SIGINT and then SIGTERM (a forced stop).
    const child = startProcess({
      file: 'nsenter',
      args,
      // The agent gets this process's environment (its PATH finds iptables and ip).
      env: Object.fromEntries(
        Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined),
      ),
      stdin: 'ignore',
      stdout: 'inherit',
      stderr: 'inherit',
      detached: true,
    });
    const exited = child.run().then((result) => {
      if (result.kind === 'exited') return result.exitCode;
      if (result.reason === 'spawn') {
        io.stderr.write(`allocnet agent --dev: the agent could not start: ${result.message}\n`);
        return 1;
      }
      // Killed by a signal (a forwarded one, or the cancel below).
      return 128;
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
      // Nothing once the agent has ended; otherwise SIGKILL, and wait for it.
      child.cancel();
      await exited;
    }
  } finally {
    const problems = await removeNamespaces(netns, sandbox, prefix);
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
