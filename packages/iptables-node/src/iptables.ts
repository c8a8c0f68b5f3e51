// The facade: `createIptables` checks its options and composes an `Iptables` out of the
// commands that read (listing.ts), that change one rule or chain (changes.ts), that are one
// batch (restore.ts) and that go by nf_tables rule handle (handles.ts). How a command runs and
// fails is commands.ts.
import { createCommands } from './commands.js';
import { IptablesError } from './errors.js';
import { createSpawnExec } from './exec.js';
import type { CommandExec } from './exec.js';
import { changeOps } from './changes.js';
import { handleOps } from './handles.js';
import type { OpenNft } from './handles.js';
import { listingOps } from './listing.js';
import type { Logger } from './logger.js';
import { silentLogger } from './logger.js';
import { openNftLink } from './nft.js';
import { batchOps } from './restore.js';
import type { Iptables } from './types.js';
import { netnsPath } from './validate.js';
import type { Family } from './validate.js';

export type {
  Iptables,
  PlacedRemoval,
  PlacedRule,
  RuleHandles,
  RuleSearch,
  RuleSearchResult,
} from './types.js';

export interface IptablesOptions {
  /** `ipv4` runs iptables*, `ipv6` ip6tables*. Default `ipv4`. */
  readonly family?: Family;
  /**
   * The network namespace to act in: a clean absolute path (`/proc/<pid>/ns/net`) or a name
   * under @allocnet/netns's NETNS_RUN_DIR, by @allocnet/netns's rule (`resolveNetns`). Commands
   * then run through `nsenter --net=<path> --`. Default: this process's namespace.
   */
  readonly netns?: string;
  /** How processes run. Default: posix_spawn (@allocnet/spawn). Tests pass a recording fake (`./testing`). */
  readonly exec?: CommandExec;
  readonly logger?: Logger;
  /** Seconds for `--wait`; default: plain `--wait`, which waits for the xtables lock as long as it takes. */
  readonly waitSeconds?: number;
  /** Per process. Default 30 000 ms. */
  readonly timeoutMs?: number;
  /** Where `nsenter` is. Default `nsenter` on PATH. */
  readonly nsenterPath?: string;
  /**
   * Opens the netlink link `saveAt` and `removeAt` use (nft.ts); default `openNftLink`. `false`:
   * none (`saveAt` then reads no generation).
   */
  readonly nft?: OpenNft | false;
}

function checkWhole(value: number, field: string, min: number): number {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new IptablesError(`${field} ${value} is not a whole number of at least ${min}`, {
      code: 'invalid-argument',
    });
  }
  return value;
}

/** Creates an `Iptables`. Nothing runs until a method is called; bad options throw at once. */
export function createIptables(options: IptablesOptions = {}): Iptables {
  const family = options.family ?? 'ipv4';
  const netns = options.netns === undefined ? undefined : netnsPath(options.netns);
  const exec = options.exec ?? createSpawnExec();
  const logger = options.logger ?? silentLogger;
  const timeoutMs = checkWhole(options.timeoutMs ?? 30_000, 'timeoutMs', 1);
  const wait =
    options.waitSeconds === undefined
      ? ['--wait']
      : ['--wait', String(checkWhole(options.waitSeconds, 'waitSeconds', 0))];
  const nsenter = options.nsenterPath ?? 'nsenter';
  const commands = createCommands({ family, netns, exec, logger, timeoutMs, wait, nsenter });
  const nft = options.nft ?? openNftLink;
  return {
    family,
    netns,
    ...listingOps(commands),
    ...changeOps(commands),
    ...batchOps(commands),
    ...handleOps({ commands, family, netns, nft, logger }),
  };
}
