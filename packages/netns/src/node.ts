// A namespace standing for a node (a host), for the dev sandbox and the test lab: made, `lo` up,
// forwarding on.
import type { NetnsCommands } from './commands.js';
import type { CallOptions, NetnsManager } from './types.js';

export type CreateNode = (
  name: string,
  options?: CallOptions & { readonly ipv6Forwarding?: boolean },
) => Promise<string>;

export function nodeSetUp(
  commands: NetnsCommands,
  namespaces: Pick<NetnsManager, 'create'>,
  paths: { readonly ip: string; readonly nsenter: string },
): CreateNode {
  const { must } = commands;
  const { ip, nsenter } = paths;
  return async (name, opts = {}) => {
    const path = await namespaces.create(name, opts);
    await must(ip, ['-n', name, 'link', 'set', 'lo', 'up'], opts.signal);
    const forwarding = ['net.ipv4.ip_forward=1'];
    if (opts.ipv6Forwarding === true) forwarding.push('net.ipv6.conf.all.forwarding=1');
    // nsenter, not `ip netns exec`: no private mount namespace is needed to write a sysctl.
    await must(nsenter, [`--net=${path}`, '--', 'sysctl', '-q', '-w', ...forwarding], opts.signal);
    return path;
  };
}
