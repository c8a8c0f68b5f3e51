// An `Iptables`'s nf_tables side (nft.ts does the netlink): `saveAt`, iptables-save with the
// ruleset generation it shows, and `removeAt`, rules by their place in such a save and chains,
// removed in one transaction by rule handle, only if the ruleset is still what was saved. The
// searches over netlink are searches.ts', a teardown's removals removals.ts'.
import type { Commands } from './commands.js';
import { IptablesError } from './errors.js';
import type { Logger } from './logger.js';
import type { NftLink, NftOp } from './nft.js';
import { removalBatch } from './nft-messages.js';
import type { SavedTable } from './save.js';
import type { Iptables, PlacedRemoval, RuleHandles, SaveAtOptions, SavedAt } from './types.js';
import { checkChain, checkTable } from './validate.js';
import type { Family, Table } from './validate.js';

/** Opens the netlink link to the ruleset of a family in a namespace (a path; default this one). */
export type OpenNft = (family: Family, netns: string | undefined) => NftLink;

export interface HandlesOptions {
  readonly commands: Commands;
  readonly family: Family;
  readonly netns: string | undefined;
  /** `false`: none (`saveAt` then reads no generation, `removeAt` refuses). */
  readonly nft: OpenNft | false;
  readonly logger: Logger;
}

/** A chain not read yet by this removal's save: its size there, and the texts of its places. */
interface UnreadChain {
  readonly table: Table;
  readonly chain: string;
  readonly size: number;
  /** By place: what the kernel's rule there must hold (its comment, a CNI chain it jumps to). */
  readonly texts: Map<number, string[]>;
}

const changed = (why: string) =>
  new IptablesError(`nf_tables removal: ${why}; nothing was removed`, { code: 'changed' });

/**
 * The chains of `removal` not read before (`at.lists`), with the text each place's rule must
 * hold: its comment and the name of a CNI chain it jumps to (a verdict such as ACCEPT is a
 * number in the kernel's message).
 */
function unreadChains(at: RuleHandles, removal: PlacedRemoval): Map<string, UnreadChain> {
  const unread = new Map<string, UnreadChain>();
  for (const { rule, position, chainSize } of removal.rules) {
    const key = `${rule.table} ${rule.chain}`;
    if (at.lists.has(key)) continue;
    let chain = unread.get(key);
    if (chain === undefined) {
      chain = { table: rule.table, chain: rule.chain, size: chainSize, texts: new Map() };
      unread.set(key, chain);
    }
    const target = rule.target?.name;
    chain.texts.set(
      position,
      [rule.comment, target?.startsWith('CNI-') === true ? target : undefined].filter(
        (t): t is string => t !== undefined && t !== '',
      ),
    );
  }
  return unread;
}

/**
 * Reads the handles of the unread chains into a copy of `at.lists`: the kernel's rule at each
 * place must be the saved one (`changed` otherwise). A chain read before is as it was then but
 * for what the removals since took, by handle.
 */
async function readHandles(
  link: NftLink,
  at: RuleHandles,
  unread: ReadonlyMap<string, UnreadChain>,
): Promise<Map<string, readonly bigint[]>> {
  const lists = new Map(at.lists);
  for (const [key, c] of unread) {
    let stranger: number | undefined;
    const list = await link.rules(c.table, c.chain, (index, message) => {
      const texts = c.texts.get(index);
      if (texts !== undefined && texts.some((t) => !message.includes(t))) stranger ??= index;
    });
    if (list.length !== c.size)
      throw changed(`${key} has ${list.length} rules, the save showed ${c.size}`);
    if (stranger !== undefined)
      throw changed(`rule ${stranger + 1} of ${key} is not the saved one`);
    lists.set(key, list);
  }
  return lists;
}

/** The transaction: each rule by its handle, then each chain flushed, then deleted. */
function removalOps(
  removal: PlacedRemoval,
  lists: ReadonlyMap<string, readonly bigint[]>,
): NftOp[] {
  const ops: NftOp[] = [];
  for (const { rule, position } of removal.rules) {
    const handle = lists.get(`${rule.table} ${rule.chain}`)?.[position];
    if (handle === undefined)
      throw changed(`place ${position + 1} is beyond ${rule.table} ${rule.chain}`);
    ops.push({ kind: 'deleteRule', table: rule.table, chain: rule.chain, handle });
  }
  for (const c of removal.chains)
    ops.push({ kind: 'flushChain', table: checkTable(c.table), chain: checkChain(c.chain) });
  for (const c of removal.chains) ops.push({ kind: 'deleteChain', table: c.table, chain: c.chain });
  return ops;
}

/**
 * Whether the chain is there, asked over netlink (one GETCHAIN); undefined without a link or
 * when the question fails (the caller then asks iptables).
 */
export async function chainExistsByLink(
  options: Pick<HandlesOptions, 'family' | 'netns' | 'nft' | 'logger'>,
  table: Table,
  chain: string,
): Promise<boolean | undefined> {
  const { family, netns, nft, logger } = options;
  let link: NftLink | undefined;
  try {
    link = nft === false ? undefined : nft(family, netns);
    return await link?.chainExists(checkTable(table), checkChain(chain));
  } catch (error) {
    logger.debug('nf_tables: a chain was not asked about over netlink; asking iptables', {
      family,
      table,
      chain,
      error: error instanceof Error ? error.message : String(error),
    });
    return undefined;
  } finally {
    link?.close();
  }
}

/** The handles of `chains`, one dump after another; a chain that fails to read is left out. */
async function dumpHandles(
  link: NftLink | undefined,
  chains: NonNullable<SaveAtOptions['handlesOf']>,
  logger: Logger,
): Promise<Map<string, readonly bigint[]>> {
  const lists = new Map<string, readonly bigint[]>();
  if (link === undefined) return lists;
  for (const { table, chain } of chains)
    try {
      lists.set(`${table} ${chain}`, await link.rules(checkTable(table), checkChain(chain)));
    } catch (error) {
      logger.debug('nf_tables: handles not read beside the save', {
        table,
        chain,
        error: error instanceof Error ? error.message : String(error),
      });
    }
  return lists;
}

/**
 * The lists whose number of rules is the save's for that chain (at one generation, the kernel's
 * order is the save's; a dump cannot tell an empty chain from a missing one, so a chain the save
 * does not show is left out).
 */
function agreeing(
  lists: ReadonlyMap<string, readonly bigint[]>,
  tables: readonly SavedTable[],
): Map<string, readonly bigint[]> {
  const out = new Map<string, readonly bigint[]>();
  for (const [key, list] of lists) {
    const [table, chain] = key.split(' ') as [string, string];
    const saved = tables.find((t) => t.name === table);
    if (saved?.chains.some((c) => c.name === chain) !== true) continue;
    const size = saved.places?.sizes.get(chain) ?? 0;
    if (size === list.length) out.set(key, list);
  }
  return out;
}

/** `Iptables.saveAt`: the save, its generation, and the `handlesOf` chains' handles at it. */
async function saveAt(options: HandlesOptions, call?: SaveAtOptions): Promise<SavedAt> {
  const { commands, family, netns, nft, logger } = options;
  let link: NftLink | undefined;
  let dumps: NftLink | undefined;
  try {
    if (nft !== false) {
      link = nft(family, netns);
      if (call?.handlesOf !== undefined) dumps = nft(family, netns);
    }
  } catch (error) {
    logger.debug('iptables: no nf_tables link; saving without a generation', {
      error: error instanceof Error ? error.message : String(error),
    });
  }
  try {
    const before = await link?.generation();
    // The dumps run while iptables-save builds its cache, before its first byte.
    const [{ tables, start }, lists] = await Promise.all([
      commands.save(call),
      dumpHandles(dumps, call?.handlesOf ?? [], logger),
    ]);
    const after = await link?.generation();
    // The header names the backend: `# Generated by iptables-save v1.8.9 (nf_tables) on …`.
    const nfTables = /^# Generated by \S+ v\S+ \(nf_tables\)/m.test(start);
    const generation = nfTables && before === after ? before : undefined;
    return {
      tables,
      generation,
      lists: generation === undefined ? new Map() : agreeing(lists, tables),
    };
  } finally {
    link?.close();
    dumps?.close();
  }
}

export function handleOps(
  options: HandlesOptions,
): Required<Pick<Iptables, 'saveAt' | 'removeAt' | 'warmRemoval'>> {
  const { family, netns, nft, logger } = options;

  // The steps below interleave with other work of this process (each netlink call runs on a
  // worker thread): anything another writer commits between them moves the generation, which the
  // second check or, after it, the kernel at the commit refuses (`changed`; the caller then
  // removes by spec). What is read here is never trusted past a commit at its generation.
  async function removeAtNow(
    at: RuleHandles,
    removal: PlacedRemoval,
  ): Promise<RuleHandles | undefined> {
    if (nft === false)
      throw new IptablesError('removeAt: this Iptables has no nf_tables link', {
        code: 'invalid-argument',
      });
    const started = performance.now();
    const { generation } = at;
    const link = nft(family, netns);
    try {
      if ((await link.generation()) !== generation)
        throw changed(`the ruleset is no longer at generation ${generation}`);
      const lists = await readHandles(link, at, unreadChains(at, removal));
      if ((await link.generation()) !== generation)
        throw changed(`the ruleset moved on from generation ${generation} while it was read`);
      const ops = removalOps(removal, lists);
      const after = ops.length === 0 ? generation : await link.commit(generation, ops);
      logger.debug('nf_tables removal', {
        family,
        rules: removal.rules.length,
        chains: removal.chains.length,
        ms: Math.round(performance.now() - started),
        ...(netns === undefined ? {} : { netns }),
      });
      return after === undefined ? undefined : { generation: after, lists };
    } finally {
      link.close();
    }
  }

  return {
    saveAt: (call) => saveAt(options, call),

    removeAt: removeAtNow,

    async warmRemoval(removal) {
      let generation = 0;
      const first = removal.rules[0]?.rule;
      let link: NftLink | undefined;
      try {
        link = nft === false ? undefined : nft(family, netns);
        generation = (await link?.generation()) ?? generation;
        if (first !== undefined)
          await link?.rules(first.table, first.chain, (_, message) => message.includes('CNI-'));
      } catch (error) {
        logger.debug('nf_tables: a warm-up read failed (nothing depends on it)', {
          family,
          error: error instanceof Error ? error.message : String(error),
        });
      } finally {
        link?.close();
      }
      const lists = new Map<string, bigint[]>();
      for (const [key, c] of unreadChains({ generation, lists }, removal))
        lists.set(
          key,
          Array.from({ length: c.size }, (_, i) => BigInt(i + 1)),
        );
      return removalBatch(family, generation, removalOps(removal, lists)).bytes.length;
    },
  };
}
