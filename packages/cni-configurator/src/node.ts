// What a setup changes in the kernel besides iptables: in the node's network namespace, portmap's
// route_localnet sysctl and its removal of stale UDP conntrack entries (native-add.ts); in an
// allocation's namespace, the default that makes an IPv4-only network's interface without IPv6
// (ipv6-off.ts). The node's namespace is the one the iptables seam acts in
// (`IptablesState.netns`): the agent's own by default, a test's node namespace through nsenter,
// so that a test never writes the root namespace's sysctls. An allocation's namespace is
// entered by this process's thread for the write (@allocnet/libc's `inNetworkNamespace`):
// microseconds, where an `nsenter … sysctl` would cost an exec.
import { readFileSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createSpawnExec, deleteConntrackByDestinationPort } from '@allocnet/iptables-node';
import type { CallOptions, CommandExec, Family } from '@allocnet/iptables-node';
import { inNetworkNamespace } from '@allocnet/libc';
import { ConfiguratorError, messageOf } from './errors.js';

export interface NodeKernel {
  /** Sets a sysctl of the node's namespace, named with slashes (`net/ipv4/conf/cni0/route_localnet`). */
  setSysctl(name: string, value: string, call?: CallOptions): Promise<void>;
  /** Deletes the family's UDP conntrack entries whose original destination port is one of `ports`. */
  forgetUdpFlows(family: Family, ports: readonly number[], call?: CallOptions): Promise<void>;
  /**
   * Sets a sysctl of the namespace at `netns` (a path) to `value` and answers what it was before
   * (trimmed), or undefined, changing nothing, when the kernel has no such sysctl (IPv6's, under
   * `ipv6.disable=1`). Throws `setup-failed` naming the sysctl when it cannot.
   */
  swapSysctlIn(netns: string, name: string, value: string): Promise<string | undefined>;
}

const SYSCTL_NAME = /^[A-Za-z0-9_-]+(?:\/[A-Za-z0-9_.@-]+)+$/;

function checkSysctlName(name: string): string {
  if (!SYSCTL_NAME.test(name) || name.split('/').includes('..'))
    throw new ConfiguratorError(`sysctl ${JSON.stringify(name)} is not a sysctl name`, {
      code: 'setup-failed',
    });
  return join('/proc/sys', name);
}

/** `swapSysctlIn`: the read and the write in one visit of the namespace. */
function swapIn(netns: string, name: string, value: string): string | undefined {
  const path = checkSysctlName(name);
  try {
    return inNetworkNamespace(netns, () => {
      let before: string;
      try {
        before = readFileSync(path, 'utf8').trim();
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw error;
      }
      if (before !== value) writeFileSync(path, value);
      return before;
    });
  } catch (error) {
    throw new ConfiguratorError(
      `setting sysctl ${name}=${value} in ${netns} failed: ${messageOf(error)}`,
      { code: 'setup-failed', cause: error },
    );
  }
}

/** The node seam for the namespace at `netns` (undefined: this process's). */
export function createNodeKernel(
  netns: string | undefined,
  exec: CommandExec = createSpawnExec(),
): NodeKernel {
  return {
    async setSysctl(name, value, call) {
      const path = checkSysctlName(name);
      if (netns === undefined) {
        await writeFile(path, value);
        return;
      }
      // sysctl reads dots as separators: give it the path, which it takes as is.
      const result = await exec.run({
        file: 'nsenter',
        args: [`--net=${netns}`, '--', 'sysctl', '-q', '-w', `${name}=${value}`],
        timeoutMs: 10_000,
        ...(call?.signal === undefined ? {} : { signal: call.signal }),
      });
      if (result.kind !== 'exited' || result.exitCode !== 0)
        throw new ConfiguratorError(
          `setting sysctl ${name}=${value} in ${netns} failed: ${result.kind === 'exited' ? `exit ${result.exitCode}: ${result.stderr.trim()}` : result.reason}`,
          { code: 'setup-failed' },
        );
    },
    async forgetUdpFlows(family, ports) {
      await deleteConntrackByDestinationPort(netns, family, 17, ports);
    },
    swapSysctlIn: (allocNetns, name, value) => Promise.resolve(swapIn(allocNetns, name, value)),
  };
}
