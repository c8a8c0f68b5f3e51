// What a setup changes in the node's network namespace besides iptables: portmap's
// route_localnet sysctl and its removal of stale UDP conntrack entries (native-add.ts). The
// namespace is the one the iptables seam acts in (`IptablesState.netns`): the agent's own by
// default, a test's node namespace through nsenter, so that a test never writes the root
// namespace's sysctls.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createSpawnExec, deleteConntrackByDestinationPort } from '@allocnet/iptables-node';
import type { CallOptions, CommandExec, Family } from '@allocnet/iptables-node';
import { ConfiguratorError } from './errors.js';

export interface NodeKernel {
  /** Sets a sysctl of the node's namespace, named with slashes (`net/ipv4/conf/cni0/route_localnet`). */
  setSysctl(name: string, value: string, call?: CallOptions): Promise<void>;
  /** Deletes the family's UDP conntrack entries whose original destination port is one of `ports`. */
  forgetUdpFlows(family: Family, ports: readonly number[], call?: CallOptions): Promise<void>;
}

const SYSCTL_NAME = /^[A-Za-z0-9_-]+(?:\/[A-Za-z0-9_.@-]+)+$/;

/** The node seam for the namespace at `netns` (undefined: this process's). */
export function createNodeKernel(
  netns: string | undefined,
  exec: CommandExec = createSpawnExec(),
): NodeKernel {
  return {
    async setSysctl(name, value, call) {
      if (!SYSCTL_NAME.test(name) || name.split('/').includes('..'))
        throw new ConfiguratorError(`sysctl ${JSON.stringify(name)} is not a sysctl name`, {
          code: 'setup-failed',
        });
      if (netns === undefined) {
        await writeFile(join('/proc/sys', name), value);
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
  };
}
