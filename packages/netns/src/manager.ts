// The facade: `createIpNetnsManager` reads its options and composes the namespace operations
// (namespaces.ts), the node set-up (node.ts) and what runs inside a namespace (inside.ts), all
// running `ip netns …`, `ip -n <name> link …` and `nsenter --net=… -- sysctl` through one
// `CommandExec` (@allocnet/spawn's: posix_spawn, LC_ALL=C, since the messages matched are
// English) with a timeout (commands.ts). Nothing keeps state between calls: they may run in
// parallel.
import { createCommandExec } from '@allocnet/spawn';
import type { CommandExec, CommandSpec } from '@allocnet/spawn';
import { createNetnsCommands } from './commands.js';
import { insideOps } from './inside.js';
import { namespaceOps } from './namespaces.js';
import { nodeSetUp } from './node.js';
import type { IpNetnsManager } from './types.js';

export type { CallOptions, IpNetnsManager, NetnsManager } from './types.js';

/**
 * What `run` was called before @allocnet/spawn had the one seam: `CommandSpec` under its old
 * name, kept so that callers that name it still compile.
 */
export type CommandRequest = CommandSpec;

export interface IpNetnsManagerOptions {
  /** Default `ip`. */
  readonly ipPath?: string;
  /** Default `nsenter` (`createNode`'s sysctl runs inside the namespace through it). */
  readonly nsenterPath?: string;
  /** Per command. Default 30 000 ms. */
  readonly timeoutMs?: number;
  /**
   * What runs each command: @allocnet/spawn's `CommandExec` seam, or its `run` function alone
   * (what this option took before the seam was shared). Default `createCommandExec()`: this
   * process's environment with LC_ALL=C.
   */
  readonly run?: CommandExec | CommandExec['run'];
  /** Default `process.kill`. */
  readonly kill?: (pid: number, signal: NodeJS.Signals) => void;
}

/** The default manager: `ip netns` on the host, as root. */
export function createIpNetnsManager(options: IpNetnsManagerOptions = {}): IpNetnsManager {
  const ip = options.ipPath ?? 'ip';
  const nsenter = options.nsenterPath ?? 'nsenter';
  const exec =
    typeof options.run === 'function' ? { run: options.run } : (options.run ?? createCommandExec());
  const commands = createNetnsCommands(exec, options.timeoutMs ?? 30_000);
  const kill =
    options.kill ??
    ((pid: number, signal: NodeJS.Signals) => {
      process.kill(pid, signal);
    });
  const namespaces = namespaceOps(commands, ip);
  return {
    ...namespaces,
    createNode: nodeSetUp(commands, namespaces, { ip, nsenter }),
    ...insideOps(commands, { ip, nsenter }, kill),
  };
}
