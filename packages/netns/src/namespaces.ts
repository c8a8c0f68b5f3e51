// The namespaces themselves, what the allocation runner needs: make, remove, list, find one by
// its path. `ip netns` does the work; `exists` asks the file system.
import { statfs } from 'node:fs/promises';
import type { NetnsCommands } from './commands.js';
import { NetnsError, messageOf } from './errors.js';
import { checkNetnsName, parseNetnsList } from './names.js';
import { netnsPathOf } from './paths.js';
import type { NetnsManager } from './types.js';

/** `statfs(2)` f_type of nsfs, the file system namespace files are bound from. */
const NSFS_MAGIC = 0x6e736673;

/** Whether `path` is a network namespace (a mounted nsfs file), not just a file. */
async function isNamespace(path: string): Promise<boolean> {
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
}

export function namespaceOps(commands: NetnsCommands, ip: string): NetnsManager {
  const { run, must, failed } = commands;
  return {
    pathOf: (name) => netnsPathOf(checkNetnsName(name)),

    async create(name, opts = {}) {
      const args = ['netns', 'add', checkNetnsName(name)];
      const aborted = () =>
        new NetnsError(`${[ip, ...args].join(' ')} was aborted`, { code: 'aborted' });
      const isAborted = () => opts.signal?.aborted === true;
      if (isAborted()) throw aborted();
      // Not interrupted: `ip netns add` killed between making the file and mounting the namespace
      // on it leaves a file that is not a namespace (`ip -n` refuses it, `ip netns list` prints
      // "Peer netns reference is invalid"), or a namespace nobody knows of. It takes
      // milliseconds; an abort meanwhile is answered after it, by removing what it made.
      await must(ip, args);
      if (isAborted()) {
        await run(ip, ['netns', 'del', name]);
        throw aborted();
      }
      return netnsPathOf(name);
    },

    async remove(name, opts = {}) {
      const r = await run(ip, ['netns', 'del', checkNetnsName(name)], opts.signal);
      if (r.ok) return true;
      // iproute2 says `Cannot remove namespace file "<dir>/x": No such file or directory`.
      if (/No such file or directory/.test(r.outcome.stderr)) return false;
      throw failed(r.outcome);
    },

    exists: isNamespace,

    async list(opts = {}) {
      return parseNetnsList(await must(ip, ['netns', 'list'], opts.signal));
    },
  };
}
