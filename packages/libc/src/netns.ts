// setns(2), which Node does not have: the calling thread enters a network namespace, something
// runs there, and the thread comes back. What is made or opened meanwhile belongs to that
// namespace: a netlink socket stays bound to the namespace it was made in (iptables-node), and a
// /proc/sys/net file is looked up in the namespace of the thread that opens it (the
// configurator's sysctls in an allocation's namespace).
import { closeSync, openSync } from 'node:fs';
import { bindLibc } from './bind.js';

const CLONE_NEWNET = 0x40000000;

const load = bindLibc<{ readonly setns: (fd: number, nstype: number) => number }>({
  setns: 'int setns(int fd, int nstype)',
});

/** setns(2) refused: `errno` says why; `path` is the namespace it was asked to enter. */
export class SetnsError extends Error {
  constructor(
    readonly path: string,
    readonly errno: number,
  ) {
    super(`setns ${path} failed (errno ${errno})`);
    this.name = 'SetnsError';
  }
}

/**
 * Runs `fn` with the calling thread in the network namespace at `path` (a namespace file, such
 * as `/run/netns/<name>`), then brings the thread back, whether `fn` returned or threw. `fn` is
 * synchronous, so nothing else of this process runs on the thread meanwhile. Throws a
 * `SetnsError` when the thread cannot enter (`path` not a network namespace: EINVAL), Node's
 * error when `path` cannot be opened, and an Error when the thread cannot come back: a thread left
 * in another namespace would make every later socket and sysctl of the process there.
 */
export function inNetworkNamespace<T>(path: string, fn: () => T): T {
  const { setns, errno } = load();
  const home = openSync('/proc/thread-self/ns/net', 'r');
  try {
    const target = openSync(path, 'r');
    try {
      if (setns(target, CLONE_NEWNET) !== 0) throw new SetnsError(path, errno());
    } finally {
      closeSync(target);
    }
    try {
      return fn();
    } finally {
      if (setns(home, CLONE_NEWNET) !== 0)
        // eslint-disable-next-line no-unsafe-finally -- nothing may go on in the wrong namespace
        throw new Error(
          `could not return to the process's network namespace from ${path} (errno ${errno()})`,
        );
    }
  } finally {
    closeSync(home);
  }
}
