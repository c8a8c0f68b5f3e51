// The facade: `createIptables` checks its options and composes an `Iptables` out of the
// commands that read (listing.ts), that change one rule or chain (changes.ts), that are one
// batch (restore.ts) and that go by nf_tables rule handle (handles.ts). How a command runs and
// fails is commands.ts.
import { nfTablesByLink } from './backend.js';
import { createCommands } from './commands.js';
import { IptablesError } from './errors.js';
import { createSpawnExec } from './exec.js';
import type { CommandExec } from './exec.js';
import { changeOps } from './changes.js';
import { chainExistsByLink, handleOps } from './handles.js';
import { searchOps } from './searches.js';
import { removeAcceptsByLink, removeJumpedByLink } from './removals.js';
import type { OpenNft } from './handles.js';
import { listingOps } from './listing.js';
import type { Logger } from './logger.js';
import { silentLogger } from './logger.js';
import { openNftLink } from './nft.js';
import type { NftLink } from './nft.js';
import { readAt } from './nft-read.js';
import { batchOps } from './restore.js';
import type { Iptables } from './types.js';
import { netnsPath } from './validate.js';
import type { Family } from './validate.js';

export type {
  AcceptRemoval,
  AcceptsRemoved,
  Iptables,
  PlacedRemoval,
  PlacedRule,
  RuleHandles,
  JumpedChain,
  RuleSearch,
  RuleSearchResult,
  SaveAtOptions,
  SavedAt,
} from './types.js';
export type { ChainRef, OpaqueRule, ReadAt, ReadAtOptions } from './nft-read.js';

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
  const listing = listingOps(commands);
  let nfTables: Promise<boolean> | undefined;
  /**
   * Whether iptables is iptables-nft: by the binary its links end at (backend.ts) when commands
   * run the default way, else as `iptables --version` says (asked once; a failure says no, and is
   * asked again).
   */
  const isNfTables = (): Promise<boolean> => {
    if (nfTables !== undefined) return nfTables;
    const [main = 'iptables'] = commands.tableArgs('filter');
    const byLink = options.exec === undefined ? nfTablesByLink(main, process.env.PATH) : undefined;
    nfTables =
      byLink !== undefined
        ? Promise.resolve(byLink)
        : commands
            .run([main, '--version'], undefined)
            .then((out) => out.includes('(nf_tables)'))
            .catch(() => {
              nfTables = undefined;
              return false;
            });
    return nfTables;
  };
  return {
    family,
    netns,
    ...listing,
    ...changeOps(commands),
    ...batchOps(commands),
    ...handleOps({ commands, family, netns, nft, logger }),
    ...searchOps({ family, netns, nft, logger }),
    // Over netlink when there is a link: one message whatever the size of the ruleset, where
    // `iptables -S <chain> 1` under nf_tables fetches the whole ruleset (a teardown's audit asks
    // twice: issue 30). A chain nf_tables holds is iptables-nft's; one it does not hold may be
    // iptables-legacy's, so a no counts only when iptables says it is nf_tables (asked once). An
    // aborted call goes the exec's way, which says so.
    async chainExists(table, chain, call) {
      const found =
        call?.signal?.aborted === true
          ? undefined
          : await chainExistsByLink({ family, netns, nft, logger }, table, chain);
      if (found === true || (found === false && (await isNfTables()))) return found;
      return listing.chainExists(table, chain, call);
    },
    // Under nf_tables only: iptables-legacy's rules are not in what netlink reads. iptables is
    // asked while the read runs (its exec waits on another process, not on this one), and a read
    // under another backend is dropped, failed or not.
    async readAt(read, call) {
      if (call?.signal?.aborted === true || nft === false) return undefined;
      let link: NftLink;
      try {
        link = nft(family, netns);
      } catch (error) {
        logger.debug('nf_tables: no link; reading with iptables-save', {
          family,
          error: error instanceof Error ? error.message : String(error),
        });
        return undefined;
      }
      try {
        const underNfTables = isNfTables();
        const reading = readAt(link, family, read ?? {}, logger);
        reading.catch(() => undefined); // handled: awaited below, or dropped
        if (!(await underNfTables)) {
          await reading.catch(() => undefined);
          return undefined;
        }
        return await reading;
      } finally {
        link.close();
      }
    },
    // A rule nf_tables does not hold may be iptables-legacy's: only under nf_tables does finding
    // no jump over netlink mean there is none.
    async removeJumped(targets, call) {
      if (call?.signal?.aborted === true || nft === false || !(await isNfTables()))
        return undefined;
      return removeJumpedByLink({ family, netns, nft, logger }, targets);
    },
    // Under nf_tables only, as removeJumped.
    async removeAccepts(removal, call) {
      if (call?.signal?.aborted === true || nft === false || !(await isNfTables()))
        return undefined;
      return removeAcceptsByLink({ family, netns, nft, logger }, removal);
    },
  };
}
