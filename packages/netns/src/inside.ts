// What runs inside a namespace, for a sandbox or a test lab: its processes (listed, killed) and
// its links (listed, deleted).
import type { NetnsCommands } from './commands.js';
import { NetnsError, messageOf } from './errors.js';
import { checkNetnsName, parseLinkNames, parsePids } from './names.js';
import { absolutePathProblem } from './paths.js';
import type { IpNetnsManager } from './types.js';

export type Kill = (pid: number, signal: NodeJS.Signals) => void;

export function insideOps(
  commands: NetnsCommands,
  paths: { readonly ip: string; readonly nsenter: string },
  kill: Kill,
): Pick<IpNetnsManager, 'pids' | 'killAll' | 'links' | 'deleteLink' | 'deleteDefaultRoutes'> {
  const { run, must, failed } = commands;
  const { ip, nsenter } = paths;

  async function pids(name: string, opts: { signal?: AbortSignal } = {}): Promise<number[]> {
    return parsePids(await must(ip, ['netns', 'pids', checkNetnsName(name)], opts.signal));
  }

  return {
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

    async deleteDefaultRoutes(path, link, opts = {}) {
      const problem = absolutePathProblem(path);
      if (problem !== undefined)
        throw new NetnsError(`namespace path ${JSON.stringify(path)} ${problem}`, {
          code: 'invalid-name',
        });
      // By path (a runtime's namespace need not be under /run/netns): nsenter, not `ip -n`.
      // `flush exact default` removes every default route of the main table through the link,
      // whatever its gateway or metric, and exits 0 when there is none.
      for (const family of ['-4', '-6'])
        await must(
          nsenter,
          [`--net=${path}`, '--', ip, family, 'route', 'flush', 'exact', 'default', 'dev', link],
          opts.signal,
        );
    },
  };
}
