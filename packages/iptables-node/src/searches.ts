// An `Iptables`'s searches over netlink (`searchRules`), and what it keeps of them across its own
// writes (`writeKeepingSearches`). A search of a chain is a GETRULE dump of every rule of it: a
// setup's search of the firewall's CNI-FORWARD dumps two rules per allocation on the node (9 ms
// of the kernel's time at 1,000 allocations, docs/iptables.md). A chain's messages are kept with
// the ruleset's generation they were read at, and a search at that same generation reads them
// instead of the kernel. Every commit moves the generation, so a write by anyone makes them
// useless, but for a write of this process's that says what it appends: when the generation
// after it is the one before it plus its commits (one per table: iptables-restore commits table by
// table), nothing else changed the ruleset meanwhile, and the kept chains move to the new
// generation with the needles of the rules appended to them.
import type { Logger } from './logger.js';
import type { NftLink } from './nft.js';
import { IptablesError } from './errors.js';
import type { IptablesBatch } from './batch.js';
import type { RuleSearch, RuleSearchResult } from './types.js';
import { checkChain, checkTable } from './validate.js';
import type { Family } from './validate.js';

/** Kept chains at most: the shared chains a setup searches, with room to spare. */
const KEPT_MAX = 8;

/** A chain's rules as a search read them, at a generation, and the needles appended since. */
interface Kept {
  generation: number;
  readonly messages: readonly Buffer[];
  readonly appended: Buffer[];
}

export interface SearchOps {
  searchRules(searches: readonly RuleSearch[]): Promise<readonly RuleSearchResult[] | undefined>;
  writeKeepingSearches<T>(
    batch: IptablesBatch,
    needleOf: (spec: readonly string[]) => Buffer | undefined,
    write: () => Promise<T>,
  ): Promise<T>;
}

/**
 * A copy of `bytes` in memory of its own. Buffer.from's copy of a small buffer is a slice of a
 * shared 8 KiB pool, which it keeps alive whole: a needle kept per setup would keep a pool each,
 * some 16 MiB at a thousand allocations (measured: the agent's RSS went from 139 to 153 MiB).
 */
function ownCopy(bytes: Buffer): Buffer {
  const copy = Buffer.allocUnsafeSlow(bytes.length);
  bytes.copy(copy);
  return copy;
}

/** One chain's search: each needle looked for in every rule's message (valid only in `inspect`). */
async function searchChain(
  link: NftLink,
  search: RuleSearch,
  keep: Buffer[] | undefined,
): Promise<RuleSearchResult> {
  const found = search.needles.map(() => false);
  const table = checkTable(search.table);
  const chain = checkChain(search.chain);
  let rules;
  try {
    rules = await link.rules(table, chain, (_, message) => {
      keep?.push(ownCopy(message));
      search.needles.forEach((needle, i) => {
        if (!found[i] && message.includes(needle)) found[i] = true;
      });
    });
  } catch (error) {
    if (error instanceof IptablesError && error.code === 'not-found') return { exists: false };
    throw error;
  }
  // No rules: an empty chain, or none at all (the dump cannot tell them apart).
  if (rules.length === 0 && !(await link.chainExists(table, chain))) return { exists: false };
  return { exists: true, found };
}

export function searchOps(options: {
  readonly family: Family;
  readonly netns: string | undefined;
  readonly nft: ((family: Family, netns: string | undefined) => NftLink) | false;
  readonly logger: Logger;
}): SearchOps {
  const { family, netns, nft, logger } = options;
  const kept = new Map<string, Kept>();

  function openLink(why: string): NftLink | undefined {
    try {
      return nft === false ? undefined : nft(family, netns);
    } catch (error) {
      logger.debug(`iptables: no nf_tables link; ${why}`, {
        error: error instanceof Error ? error.message : String(error),
      });
      return undefined;
    }
  }

  async function generationNow(): Promise<number | undefined> {
    const link = openLink('searches not kept');
    try {
      return await link?.generation();
    } catch {
      return undefined;
    } finally {
      link?.close();
    }
  }

  /** Keeps what was read at `generation`, dropping what no search can use any more. */
  function keep(generation: number, read: ReadonlyMap<string, Buffer[]>): void {
    for (const [key, k] of kept) if (k.generation !== generation) kept.delete(key);
    for (const [key, messages] of read) {
      if (kept.size >= KEPT_MAX) kept.delete(kept.keys().next().value as string);
      kept.set(key, { generation, messages, appended: [] });
    }
  }

  return {
    async searchRules(searches) {
      const link = openLink('rules not searched');
      if (link === undefined) return undefined;
      try {
        const generation = await link.generation();
        const results: RuleSearchResult[] = [];
        const read = new Map<string, Buffer[]>();
        // One at a time: one call at a time per link.
        for (const s of searches) {
          const key = `${s.table} ${s.chain}`;
          const k = kept.get(key);
          if (k?.generation === generation) {
            const holds = (n: Buffer) => k.messages.some((m) => m.includes(n));
            const found = s.needles.map((n) => holds(n) || k.appended.some((a) => a.includes(n)));
            results.push({ exists: true, found });
            continue;
          }
          const messages: Buffer[] = [];
          const result = await searchChain(link, s, messages);
          results.push(result);
          if (result.exists) read.set(key, messages);
        }
        // Kept only when nothing moved the ruleset while it was read.
        if (read.size > 0 && (await link.generation()) === generation) keep(generation, read);
        return results;
      } finally {
        link.close();
      }
    },

    async writeKeepingSearches(batch, needleOf, write) {
      const tables = new Set(batch.ops.map((op) => op.table));
      const appends = batch.ops.flatMap((op) => (op.kind === 'append' ? [op] : []));
      // Each table commits only if it changes something: one that only appends does.
      const onlyAppends =
        batch.ops.every((op) => op.kind === 'append' || op.kind === 'declareChain') &&
        new Set(appends.map((op) => op.table)).size === tables.size;
      if (kept.size === 0 || !onlyAppends) return write();
      const before = await generationNow();
      const result = await write();
      const after = before === undefined ? undefined : await generationNow();
      if (before === undefined || after !== before + tables.size) return result;
      // A chain the batch declares was not there when it was read (a search keeps only those
      // that were), or has been made since by someone: either way not what is kept.
      for (const op of batch.ops)
        if (op.kind === 'declareChain') kept.delete(`${op.table} ${op.chain}`);
      for (const k of kept.values()) if (k.generation === before) k.generation = after;
      for (const op of appends) {
        const k = kept.get(`${op.table} ${op.chain}`);
        const needle = needleOf(op.spec);
        if (k?.generation === after && needle !== undefined) k.appended.push(ownCopy(needle));
      }
      return result;
    },
  };
}
