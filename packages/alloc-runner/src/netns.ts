// The runner's namespaces: @allocnet/netns's manager, its errors turned into `RunnerError`s with
// the codes the runner and the agent act on (`invalid-argument` for a bad name, `aborted`,
// `netns` for any other failure), messages unchanged.
import {
  checkNetnsName as checkName,
  createIpNetnsManager as createManager,
  isNetnsError,
} from '@allocnet/netns';
import type { IpNetnsManagerOptions, NetnsManager } from '@allocnet/netns';
import { RunnerError } from './errors.js';

export { NETNS_RUN_DIR } from '@allocnet/netns';
export type { IpNetnsManagerOptions, NetnsManager } from '@allocnet/netns';

/** A `NetnsError` as the `RunnerError` the runner has always thrown for it; anything else as is. */
function asRunnerError(error: unknown): unknown {
  if (!isNetnsError(error)) return error;
  switch (error.code) {
    case 'invalid-name':
      return new RunnerError(error.message, { code: 'invalid-argument', path: ['netnsName'] });
    case 'aborted':
      return new RunnerError(error.message, { code: 'aborted' });
    case 'read-failed':
      // The file system's error, as before: the NetnsError adds nothing to it.
      return new RunnerError(error.message, { code: 'netns', cause: error.cause });
    case 'command-failed':
    case 'kill-failed':
      return new RunnerError(error.message, { code: 'netns' });
  }
}

/** A namespace name iproute2 accepts, also as a path component. */
export function checkNetnsName(name: string): string {
  try {
    return checkName(name);
  } catch (error) {
    throw asRunnerError(error);
  }
}

/** Runs a manager call, its `NetnsError` thrown as the runner's. */
async function translated<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw asRunnerError(error);
  }
}

/** The default `NetnsManager`: `ip netns` on the host, as root. */
export function createIpNetnsManager(options: IpNetnsManagerOptions = {}): NetnsManager {
  const manager = createManager(options);
  return {
    pathOf(name) {
      try {
        return manager.pathOf(name);
      } catch (error) {
        throw asRunnerError(error);
      }
    },
    create: (name, opts) => translated(() => manager.create(name, opts)),
    remove: (name, opts) => translated(() => manager.remove(name, opts)),
    exists: (path) => translated(() => manager.exists(path)),
    list: (opts) => translated(() => manager.list(opts)),
  };
}
