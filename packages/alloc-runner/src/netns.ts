// The one module of this package that starts processes: `ip netns add|del|list` through
// @allocnet/spawn (posix_spawn, so the agent is not forked for each).
import { statfs } from 'node:fs/promises';
import { inheritedEnv, runProcess } from '@allocnet/spawn';
import { RunnerError, messageOf } from './errors.js';

/** Where `ip netns` keeps its namespaces (iproute2's NETNS_RUN_DIR). */
export const NETNS_RUN_DIR = '/run/netns';

/** The namespaces the runner makes and removes. */
export interface NetnsManager {
  /** Makes the named namespace and returns its path; fails if it already exists. */
  create(name: string, options?: { readonly signal?: AbortSignal }): Promise<string>;
  /**
   * Removes the named namespace (also a leftover file that is no longer one); true when there was
   * something to remove, false when it was not there.
   */
  remove(name: string, options?: { readonly signal?: AbortSignal }): Promise<boolean>;
  /** Whether `path` is a network namespace (a mounted nsfs file), not just a file. */
  exists(path: string): Promise<boolean>;
  /** The names of the namespaces under the run directory. */
  list(options?: { readonly signal?: AbortSignal }): Promise<string[]>;
  /** The path a namespace of that name has. */
  pathOf(name: string): string;
}

export interface IpNetnsManagerOptions {
  /** Default `ip`. */
  readonly ipPath?: string;
  /** Per command. Default 30 000 ms. */
  readonly timeoutMs?: number;
}

/** `statfs(2)` f_type of nsfs, the file system namespace files are bound from. */
const NSFS_MAGIC = 0x6e736673;

/** A namespace name iproute2 accepts, also as a path component. */
export function checkNetnsName(name: string): string {
  if (name === '' || name === '.' || name === '..' || /[/\0\s]/.test(name) || name.length > 255) {
    throw new RunnerError(`namespace name ${JSON.stringify(name)} is not a valid file name`, {
      code: 'invalid-argument',
      field: 'netnsName',
    });
  }
  return name;
}

/** The default `NetnsManager`: `ip netns` on the host, as root. */
export function createIpNetnsManager(options: IpNetnsManagerOptions = {}): NetnsManager {
  const ip = options.ipPath ?? 'ip';
  const timeout = options.timeoutMs ?? 30_000;

  async function run(args: readonly string[], signal: AbortSignal | undefined) {
    const result = await runProcess({
      file: ip,
      args,
      env: inheritedEnv({ LC_ALL: 'C' }),
      timeoutMs: timeout,
      ...(signal === undefined ? {} : { signal }),
    });
    const stdout = result.stdout;
    const stderr = result.stderr.trim();
    if (result.kind === 'failed' && result.reason === 'aborted') {
      throw new RunnerError(`${[ip, ...args].join(' ')} was aborted`, { code: 'aborted' });
    }
    return {
      ok: result.kind === 'exited' && result.exitCode === 0,
      stdout,
      stderr,
      why: stderr || (result.kind === 'failed' ? result.message : '') || 'no error message',
      exitCode: result.kind === 'exited' ? result.exitCode : undefined,
    };
  }

  function failed(
    args: readonly string[],
    r: { why: string; exitCode: number | undefined },
  ): RunnerError {
    return new RunnerError(
      `${[ip, ...args].join(' ')} failed (exit status ${r.exitCode ?? 'none'}): ${r.why}`,
      { code: 'netns' },
    );
  }

  return {
    pathOf: (name) => `${NETNS_RUN_DIR}/${checkNetnsName(name)}`,

    async create(name, opts = {}) {
      const args = ['netns', 'add', checkNetnsName(name)];
      const r = await run(args, opts.signal);
      if (!r.ok) throw failed(args, r);
      return `${NETNS_RUN_DIR}/${name}`;
    },

    async remove(name, opts = {}) {
      const args = ['netns', 'del', checkNetnsName(name)];
      const r = await run(args, opts.signal);
      if (r.ok) return true;
      // iproute2 says `Cannot remove namespace file "/run/netns/x": No such file or directory`.
      if (/No such file or directory/.test(r.stderr)) return false;
      throw failed(args, r);
    },

    async exists(path) {
      try {
        return (await statfs(path)).type === NSFS_MAGIC;
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'ENOENT' || code === 'ENOTDIR') return false;
        throw new RunnerError(`reading namespace "${path}" failed: ${messageOf(error)}`, {
          code: 'netns',
          cause: error,
        });
      }
    },

    async list(opts = {}) {
      const args = ['netns', 'list'];
      const r = await run(args, opts.signal);
      if (!r.ok) throw failed(args, r);
      // `name` or `name (id: 3)`, one a line.
      return r.stdout
        .split('\n')
        .map((line) => line.trim().split(/\s+/)[0] ?? '')
        .filter((name) => name !== '');
    },
  };
}
