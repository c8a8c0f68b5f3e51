// `Iptables.readAt`: a family's ruleset read over netlink instead of by iptables-save, for a leak
// reap (docs/iptables.md, "Reading the ruleset over netlink"). One GETCHAIN dump names every
// chain; one GETRULE dump per chain read gives its rules, each read back as the arguments
// iptables-save prints (nft-rule.ts) or, for a rule of another shape, only its comment and
// target (`opaque`: the caller judges whether it may ignore them). The caller may skip the rules
// of some chains (a reap skips the per-allocation chains, the bulk of a full node, whose rules it
// needs only in the cases it names after the first pass: `more`). The generation is read before
// and after: a read the ruleset moved under is read again, at most `TRIES` times.
import type { Logger } from './logger.js';
import type { NftLink } from './nft.js';
import type { ChainMessage } from './nft-messages.js';
import { Malformed, readBackRule } from './nft-rule.js';
import { knownRule } from './rule.js';
import type { Rule } from './rule.js';
import type { Chain, SavedTable } from './save.js';
import { TABLES } from './validate.js';
import type { Family, Table } from './validate.js';

/** A chain, by table and name. */
export interface ChainRef {
  readonly table: Table;
  readonly chain: string;
}

export interface ReadAtOptions {
  /** Chains whose rules are not read (their declarations are). Default: none. */
  readonly skip?: (table: Table, chain: string) => boolean;
  /**
   * Whether a rule read is kept, by its chain, comment and target; one that is not is still
   * counted in its chain's places (as a save's `lines` filter does). Default: all.
   */
  readonly keep?: (
    chain: string,
    comment: string | undefined,
    target: string | undefined,
  ) => boolean;
  /**
   * Skipped chains to read after all, asked once the others are read (given what they hold): at
   * most `MORE_MAX`, else the read gives up (a reader then uses iptables-save).
   */
  readonly more?: (
    tables: readonly SavedTable[],
  ) => readonly ChainRef[] | Promise<readonly ChainRef[]>;
}

/** A kept rule this reader could not read back as arguments: where it is, and what it shows. */
export interface OpaqueRule {
  readonly table: Table;
  readonly chain: string;
  readonly position: number;
  readonly comment: string | undefined;
  readonly target: string | undefined;
}

/** What `readAt` read, all at one generation. */
export interface ReadAt {
  /** As a save's, rules read back in iptables-save's order; `places` counts every rule of a chain read. */
  readonly tables: readonly SavedTable[];
  readonly generation: number;
  /** The handles of every chain read, by `<table> <chain>`. */
  readonly lists: ReadonlyMap<string, readonly bigint[]>;
  readonly opaque: readonly OpaqueRule[];
}

/** Each table's built-in chains, and their hooks (NF_INET_PRE_ROUTING 0 … POST_ROUTING 4). */
const BUILTIN_CHAINS: Readonly<Record<Table, readonly string[]>> = {
  filter: ['INPUT', 'FORWARD', 'OUTPUT'],
  nat: ['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING'],
  mangle: ['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'],
  raw: ['PREROUTING', 'OUTPUT'],
  security: ['INPUT', 'FORWARD', 'OUTPUT'],
};
const HOOKS: Readonly<Record<string, number>> = {
  PREROUTING: 0,
  INPUT: 1,
  FORWARD: 2,
  OUTPUT: 3,
  POSTROUTING: 4,
};

/** Tries when the ruleset moves between the first and the last read. */
const TRIES = 3;
/** Most chains `more` may ask for: each is a dump of its own. */
export const MORE_MAX = 256;

/** A chain's rules as read. */
interface ReadChain {
  readonly rules: Rule[];
  readonly positions: number[];
  readonly size: number;
}

/** iptables-save's order: base chains by hook, then the others by name. */
function saveOrder(a: ChainMessage, b: ChainMessage): number {
  if (a.hook !== undefined || b.hook !== undefined)
    return (a.hook ?? Number.MAX_SAFE_INTEGER) - (b.hook ?? Number.MAX_SAFE_INTEGER);
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

type Once = ReadAt | 'changed' | { readonly giveUp: string };

async function readOnce(link: NftLink, family: Family, options: ReadAtOptions): Promise<Once> {
  const generation = await link.generation();
  const byTable = new Map<Table, ChainMessage[]>();
  for (const c of await link.chains()) {
    const table = TABLES.find((t) => t === c.table);
    if (table === undefined) continue; // not one of iptables' tables: iptables-save skips it too
    const list = byTable.get(table) ?? [];
    list.push(c);
    byTable.set(table, list);
  }
  // iptables-save shows a table's built-in chains whether nf_tables has them or not; those it
  // does not have hold no rules to read.
  const absent = new Set<ChainMessage>();
  for (const [table, chains] of byTable) {
    for (const name of BUILTIN_CHAINS[table])
      if (!chains.some((c) => c.name === name)) {
        const builtin = { table, name, hook: HOOKS[name], policy: 'ACCEPT' } as const;
        chains.push(builtin);
        absent.add(builtin);
      }
    chains.sort(saveOrder);
  }
  const read = new Map<string, ReadChain>();
  const lists = new Map<string, readonly bigint[]>();
  const opaque: OpaqueRule[] = [];
  const readChain = async (table: Table, chain: string) => {
    const rules: Rule[] = [];
    const positions: number[] = [];
    const handles = await link.rules(table, chain, (position, message) => {
      const back = readBackRule(message, family);
      if (options.keep?.(chain, back.comment, back.target) === false) return;
      if (back.spec === undefined)
        opaque.push({ table, chain, position, comment: back.comment, target: back.target });
      else {
        // Built as read back, not checked again (`knownRule`). None is marked quoted: the only
        // value a save quotes that could read as an option or a `!` is a comment, and
        // `--comment` always takes the one value after it (rule.ts).
        rules.push(knownRule(table, chain, back.spec, back.comment, back.targetAt));
        positions.push(position);
      }
    });
    read.set(`${table} ${chain}`, { rules, positions, size: handles.length });
    lists.set(`${table} ${chain}`, handles);
  };
  const tables = (): SavedTable[] =>
    TABLES.flatMap((name) => {
      const chains = byTable.get(name);
      if (chains === undefined) return [];
      const rules: Rule[] = [];
      const positions: number[] = [];
      const sizes = new Map<string, number>();
      for (const c of chains) {
        const r = read.get(`${name} ${c.name}`);
        if (r === undefined) continue;
        // One by one: a chain of 100,000 rules spread into `push` is past V8's argument limit.
        for (const rule of r.rules) rules.push(rule);
        for (const position of r.positions) positions.push(position);
        sizes.set(c.name, r.size);
      }
      const declared: Chain[] = chains.map((c) => ({ name: c.name, policy: c.policy }));
      return [{ name, chains: declared, rules, places: { positions, sizes } }];
    });
  // The chains nf_tables has, by `<table> <chain>`.
  const there = new Set<string>();
  for (const [table, chains] of byTable)
    for (const c of chains) if (!absent.has(c)) there.add(`${table} ${c.name}`);
  for (const [table, chains] of byTable)
    for (const c of chains)
      if (!absent.has(c) && options.skip?.(table, c.name) !== true) await readChain(table, c.name);
  const firstPass = tables();
  const more = (await options.more?.(firstPass)) ?? [];
  if (more.length > MORE_MAX)
    return { giveUp: `${more.length} chains asked for after the first pass (at most ${MORE_MAX})` };
  let readMore = false;
  for (const c of more)
    if (!read.has(`${c.table} ${c.chain}`) && there.has(`${c.table} ${c.chain}`)) {
      await readChain(c.table, c.chain);
      readMore = true;
    }
  if ((await link.generation()) !== generation) return 'changed';
  // Assembled again only when `more` added chains.
  return { tables: readMore ? tables() : firstPass, generation, lists, opaque };
}

/**
 * Reads the family's ruleset over `link` (see the file's comment); undefined when it gave up
 * (logged: a message not understood, `more` asking too much, a ruleset moving under every try).
 * A failed request throws.
 */
export async function readAt(
  link: NftLink,
  family: Family,
  options: ReadAtOptions,
  logger: Logger,
): Promise<ReadAt | undefined> {
  for (let i = 0; i < TRIES; i++) {
    let once: Once;
    try {
      once = await readOnce(link, family, options);
    } catch (error) {
      if (!(error instanceof Malformed)) throw error;
      once = { giveUp: `a message not understood: ${error.message}` };
    }
    if (once === 'changed') continue;
    if ('giveUp' in once) {
      logger.debug(`nf_tables read: ${once.giveUp}; reading with iptables-save`, { family });
      return undefined;
    }
    return once;
  }
  logger.debug('nf_tables read: the ruleset changed under every try; reading with iptables-save', {
    family,
    tries: TRIES,
  });
  return undefined;
}
