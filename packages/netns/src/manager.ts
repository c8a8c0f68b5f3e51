// The one module of this package that starts processes: `ip netns …`, `ip -n <name> link …` and
// `nsenter --net=… -- sysctl`, through @allocnet/spawn (posix_spawn, so a large agent is not
// forked for each). Every command runs with LC_ALL=C (the messages matched below are English)
// and a timeout; nothing here keeps state between calls, so calls may run in parallel.
import { statfs } from 'node:fs/promises';
import { inheritedEnv, runProcess } from '@allocnet/spawn';
import type { RunResult } from '@allocnet/spawn';
import { NetnsError, messageOf } from './errors.js';
import type { NetnsCommandOutcome } from './errors.js';
import { checkNetnsName, parseLinkNames, parseNetnsList, parsePids } from './names.js';
import { NETNS_RUN_DIR } from './paths.js';

export interface CallOptions {
  readonly signal?: AbortSignal;
}

/** Named namespaces: what the allocation runner makes and removes. */
export interface NetnsManager {
  /** Makes the named namespace and returns its path; fails if it already exists. */
  create(name: string, options?: CallOptions): Promise<string>;
  /**
   * Removes the named namespace (also a leftover file that is no longer one); true when there was
   * something to remove, false when it was not there.
   */
  remove(name: string, options?: CallOptions): Promise<boolean>;
  /** Whether `path` is a network namespace (a mounted nsfs file), not just a file. */
  exists(path: string): Promise<boolean>;
  /** The names of the namespaces under the run directory. */
  list(options?: CallOptions): Promise<string[]>;
  /** The path a namespace of that name has. */
  pathOf(name: string): string;
}

/** The manager `createIpNetnsManager` makes: `NetnsManager` and what a sandbox or test lab needs. */
export interface IpNetnsManager extends NetnsManager {
  /**
   * Makes a namespace standing for a node (a host): `lo` up and IPv4 forwarding on (IPv6 too
   * with `ipv6Forwarding`). Returns its path. When a step after `create` fails the namespace is
   * left for the caller to remove, as it removes its others.
   */
  createNode(
    name: string,
    options?: CallOptions & { readonly ipv6Forwarding?: boolean },
  ): Promise<string>;
  /** The processes running in the namespace (`ip netns pids`). */
  pids(name: string, options?: CallOptions): Promise<number[]>;
  /**
   * SIGKILLs every process in the namespace (they would keep it alive after `remove`). A process
   * that exited meanwhile is no error; another failure is thrown (`kill-failed`) once all were
   * tried. Resolves how many were signalled.
   */
  killAll(name: string, options?: CallOptions): Promise<number>;
  /** The links inside, `lo` included. */
  links(name: string, options?: CallOptions): Promise<string[]>;
  /** Deletes a link inside (a veth's peer goes with it); false when it was not there. */
  deleteLink(name: string, link: string, options?: CallOptions): Promise<boolean>;
}

/** What runs one command: the seam tests replace. */
export type CommandExec = (request: CommandRequest) => Promise<RunResult>;

export interface CommandRequest {
  readonly file: string;
  readonly args: readonly string[];
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
}

export interface IpNetnsManagerOptions {
  /** Default `ip`. */
  readonly ipPath?: string;
  /** Default `nsenter` (`createNode`'s sysctl runs inside the namespace through it). */
  readonly nsenterPath?: string;
  /** Per command. Default 30 000 ms. */
  readonly timeoutMs?: number;
  /** Default: @allocnet/spawn's `runProcess` with this process's environment and LC_ALL=C. */
  readonly run?: CommandExec;
  /** Default `process.kill`. */
  readonly kill?: (pid: number, signal: NodeJS.Signals) => void;
}

/** `statfs(2)` f_type of nsfs, the file system namespace files are bound from. */
const NSFS_MAGIC = 0x6e736673;

const runWithSpawn: CommandExec = (request) =>
  runProcess({
    file: request.file,
    args: request.args,
    env: inheritedEnv({ LC_ALL: 'C' }),
    timeoutMs: request.timeoutMs,
    ...(request.signal === undefined ? {} : { signal: request.signal }),
  });

interface Ran {
  readonly ok: boolean;
  readonly stdout: string;
  readonly outcome: NetnsCommandOutcome;
}

/** The default manager: `ip netns` on the host, as root. */
export function createIpNetnsManager(options: IpNetnsManagerOptions = {}): IpNetnsManager {
  const ip = options.ipPath ?? 'ip';
  const nsenter = options.nsenterPath ?? 'nsenter';
  const timeoutMs = options.timeoutMs ?? 30_000;
  const runner = options.run ?? runWithSpawn;
  const kill =
    options.kill ??
    ((pid: number, signal: NodeJS.Signals) => {
      process.kill(pid, signal);
    });

  async function run(file: string, args: readonly string[], signal?: AbortSignal): Promise<Ran> {
    const argv = [file, ...args];
    const result = await runner({
      file,
      args,
      timeoutMs,
      ...(signal === undefined ? {} : { signal }),
    });
    const outcome: NetnsCommandOutcome = {
      argv,
      exitCode: result.kind === 'exited' ? result.exitCode : undefined,
      stderr: result.stderr.trim(),
      ...(result.kind === 'failed'
        ? { failure: { reason: result.reason, message: result.message } }
        : {}),
    };
    if (result.kind === 'failed' && result.reason === 'aborted') {
      throw new NetnsError(`${argv.join(' ')} was aborted`, { code: 'aborted', command: outcome });
    }
    return {
      ok: result.kind === 'exited' && result.exitCode === 0,
      stdout: result.stdout,
      outcome,
    };
  }

  function failed(outcome: NetnsCommandOutcome): NetnsError {
    const why = outcome.stderr || outcome.failure?.message || 'no error message';
    return new NetnsError(
      `${outcome.argv.join(' ')} failed (exit status ${outcome.exitCode ?? 'none'}): ${why}`,
      { code: 'command-failed', command: outcome },
    );
  }

  /** Runs a command that must succeed; its stdout. */
  async function must(file: string, args: readonly string[], signal?: AbortSignal) {
    const r = await run(file, args, signal);
    if (!r.ok) throw failed(r.outcome);
    return r.stdout;
  }

  async function create(name: string, opts: CallOptions = {}): Promise<string> {
    await must(ip, ['netns', 'add', checkNetnsName(name)], opts.signal);
    return `${NETNS_RUN_DIR}/${name}`;
  }

  async function pids(name: string, opts: CallOptions = {}): Promise<number[]> {
    return parsePids(await must(ip, ['netns', 'pids', checkNetnsName(name)], opts.signal));
  }

  return {
    pathOf: (name) => `${NETNS_RUN_DIR}/${checkNetnsName(name)}`,

    create,

    async remove(name, opts = {}) {
      const r = await run(ip, ['netns', 'del', checkNetnsName(name)], opts.signal);
      if (r.ok) return true;
      // iproute2 says `Cannot remove namespace file "/run/netns/x": No such file or directory`.
      if (/No such file or directory/.test(r.outcome.stderr)) return false;
      throw failed(r.outcome);
    },

    async exists(path) {
      try {
        return (await statfs(path)).type === NSFS_MAGIC;
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'ENOENT' || code === 'ENOTDIR') return false;
        throw new NetnsError(`reading namespace "${path}" failed: ${messageOf(error)}`, {
          code: 'read-failed',
          cause: error,
        });
      }
    },

    async list(opts = {}) {
      return parseNetnsList(await must(ip, ['netns', 'list'], opts.signal));
    },

    async createNode(name, opts = {}) {
      const path = await create(name, opts);
      await must(ip, ['-n', name, 'link', 'set', 'lo', 'up'], opts.signal);
      const forwarding = ['net.ipv4.ip_forward=1'];
      if (opts.ipv6Forwarding === true) forwarding.push('net.ipv6.conf.all.forwarding=1');
      // nsenter, not `ip netns exec`: no private mount namespace is needed to write a sysctl.
      await must(
        nsenter,
        [`--net=${path}`, '--', 'sysctl', '-q', '-w', ...forwarding],
        opts.signal,
      );
      return path;
    },

    pids,

    async killAll(name, opts = {}) {
      let signalled = 0;
      let first: { pid: number; error: unknown } | undefined;
      for (const pid of await pids(name, opts)) {
        try {
          kill(pid, 'SIGKILL');
          signalled++;
        } catch (error) {
          // The process may have exited since `ip netns pids` listed it; nothing else is expected.
          if ((error as NodeJS.ErrnoException).code !== 'ESRCH') first ??= { pid, error };
        }
      }
      if (first !== undefined) {
        throw new NetnsError(
          `killing process ${first.pid} in namespace ${JSON.stringify(name)} failed: ${messageOf(first.error)}`,
          { code: 'kill-failed', cause: first.error },
        );
      }
      return signalled;
    },

    async links(name, opts = {}) {
      return parseLinkNames(
        await must(ip, ['-n', checkNetnsName(name), '-o', 'link', 'show'], opts.signal),
      );
    },

    async deleteLink(name, link, opts = {}) {
      const r = await run(ip, ['-n', checkNetnsName(name), 'link', 'del', link], opts.signal);
      if (r.ok) return true;
      // Not there, or gone between the lookup and the delete (a veth whose peer's namespace was
      // deleted meanwhile): RTNETLINK's ENODEV.
      if (/Cannot find device|No such device/.test(r.outcome.stderr)) return false;
      throw failed(r.outcome);
    },
  };
}
