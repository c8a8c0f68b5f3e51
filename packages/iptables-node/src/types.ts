// What an `Iptables` is, apart from how it is made: the facade (iptables.ts) and the modules it
// composes (listing.ts, changes.ts, restore.ts, handles.ts) share these.
import type { IptablesBatch } from './batch.js';
import type { CallOptions, RestoreOptions, SaveOptions } from './commands.js';
import type { ReadAt, ReadAtOptions } from './nft-read.js';
import type { Rule } from './rule.js';
import type { Chain, SavedTable } from './save.js';
import type { Family, Table } from './validate.js';

/** A rule to remove by its place in a save (`SavedTable.places`). */
export interface PlacedRule {
  readonly rule: Rule;
  /** 0-based, in its chain. */
  readonly position: number;
  /** How many rules its chain had in the save. */
  readonly chainSize: number;
}

/**
 * What a removal by handle knows of an nf_tables ruleset: its generation, and the handles of the
 * chains read so far, in their order at the save the places come from (handles never change).
 * `removeAt` takes one and gives the next, for the next removal out of the same save.
 */
/** `saveAt`'s options: `save`'s, and chains whose rule handles are read beside the save. */
export type SaveAtOptions = SaveOptions & {
  /**
   * Chains whose handles are dumped over netlink while iptables-save runs (its process spends
   * most of its time before its first byte): a removal from them then needs no dump of its own.
   */
  readonly handlesOf?: readonly { readonly table: Table; readonly chain: string }[];
};

/** What `saveAt` read. */
export interface SavedAt {
  readonly tables: readonly SavedTable[];
  /** Undefined when the backend is not nf_tables, there is no link, or the ruleset moved. */
  readonly generation: number | undefined;
  /**
   * With a generation: the handles of the `handlesOf` chains at it, by `<table> <chain>`, those
   * whose number agrees with the save's (`RuleHandles.lists`).
   */
  readonly lists: ReadonlyMap<string, readonly bigint[]>;
}

export interface RuleHandles {
  readonly generation: number;
  readonly lists: ReadonlyMap<string, readonly bigint[]>;
}

/** What `removeAt` removes: rules by place, then chains (flushed, then deleted). */
export interface PlacedRemoval {
  readonly rules: readonly PlacedRule[];
  readonly chains: readonly { readonly table: Table; readonly chain: string }[];
}

/** A typed iptables for one family and one network namespace. Every command gets `--wait`. */
export interface Iptables {
  readonly family: Family;
  /** The netns path commands run in, or undefined for this process's namespace. */
  readonly netns: string | undefined;
  /** The rules of one chain (`-S <chain>`). */
  listRules(table: Table, chain: string, options?: CallOptions): Promise<readonly Rule[]>;
  /** Every chain of the table, built-in ones first (`-S`). */
  listChains(table: Table, options?: CallOptions): Promise<readonly Chain[]>;
  chainExists(table: Table, chain: string, options?: CallOptions): Promise<boolean>;
  /** `-C`: false when there is no such rule (or no such chain). */
  ruleExists(
    table: Table,
    chain: string,
    spec: readonly string[],
    options?: CallOptions,
  ): Promise<boolean>;
  append(
    table: Table,
    chain: string,
    spec: readonly string[],
    options?: CallOptions,
  ): Promise<void>;
  /** `-I`: at `position` (1-based), or first. */
  insert(
    table: Table,
    chain: string,
    spec: readonly string[],
    options?: CallOptions & { readonly position?: number },
  ): Promise<void>;
  /** `-D`: the first rule matching `spec`; `not-found` when there is none. */
  delete(
    table: Table,
    chain: string,
    spec: readonly string[],
    options?: CallOptions,
  ): Promise<void>;
  newChain(table: Table, chain: string, options?: CallOptions): Promise<void>;
  /** `-F`: empties the chain, which must exist. */
  clearChain(table: Table, chain: string, options?: CallOptions): Promise<void>;
  /** `-X`: the chain must be empty and nothing may jump to it. */
  deleteChain(table: Table, chain: string, options?: CallOptions): Promise<void>;
  /**
   * Flushes and deletes the chain in one transaction. Resolves true when it removed it, false when
   * it was already gone.
   */
  clearAndDeleteChain(table: Table, chain: string, options?: CallOptions): Promise<boolean>;
  /**
   * iptables-save, parsed: every table, or one. With `lines`, only the lines it keeps are parsed
   * (see `parseIptablesSave`): much cheaper when a large ruleset is searched for a few rules.
   */
  save(options?: SaveOptions): Promise<readonly SavedTable[]>;
  /**
   * Applies a batch with one `iptables-restore --noflush` process, all or nothing: each table is
   * one kernel transaction, and when a later table fails, earlier tables that had committed are
   * put back (see docs/iptables.md). With `perTable: true` only each table is all or nothing: a
   * table that committed before a later one failed stays, and no snapshot is read first (two
   * iptables-save runs fewer over two tables). For callers that scan again after a failure.
   */
  restore(batch: IptablesBatch, options?: RestoreOptions): Promise<void>;
  /**
   * `save`, and the nf_tables ruleset generation the save shows: undefined when the backend is
   * not nf_tables, the netlink link cannot be had, or the ruleset changed while it was read.
   */
  saveAt?(options?: SaveAtOptions): Promise<SavedAt>;
  /**
   * The ruleset read over nf_tables netlink instead of by iptables-save, at one generation, as
   * far as `options` asks (nft-read.ts): far cheaper on a large ruleset when the caller can skip
   * most chains' rules. Undefined when it cannot be had: the backend is not nf_tables, no link,
   * an abort, a message not understood, or the ruleset moving under every try (the caller then
   * uses `saveAt`).
   */
  readAt?(options?: ReadAtOptions, call?: CallOptions): Promise<ReadAt | undefined>;
  /**
   * Removes rules by their place in a save (`saveAt`), and flushes and deletes chains, in one
   * nf_tables transaction by rule handle (nft.ts): all or nothing, and only if the ruleset is
   * still at `at.generation` (`{ generation, lists: new Map() }` for the save's), else `changed`
   * (nothing removed). Also `changed` when a chain read for the first time does not agree with
   * the save (its size, a rule's comment or the CNI chain it jumps to). Resolves what the next
   * removal out of the same save starts from, when this one was the only change since; else
   * undefined.
   */
  removeAt?(at: RuleHandles, removal: PlacedRemoval): Promise<RuleHandles | undefined>;
  /**
   * `removeAt`'s path run without changing anything, to warm it (a process's first removal of
   * thousands of rules otherwise runs it cold): the generation and the handles of the first
   * rule's chain read through the netlink link (GETGEN and one GETRULE dump: reads only; a chain
   * or table that is not there is fine), then the transaction of `removal` built as if every
   * chain held the save's rules, and never sent. Resolves the transaction's size in bytes.
   */
  warmRemoval?(removal: PlacedRemoval): Promise<number>;
  /**
   * For each search, whether its chain exists and which of its needles some rule of the chain
   * holds in its nf_tables message (a byte search: a comment's text, an address's bytes), read
   * over netlink without an iptables exec, whatever the size of the ruleset. A needle found may
   * be a false alarm (the bytes elsewhere in the rule); one not found is in no rule. Resolves
   * undefined when there is no nf_tables link (`nft: false`, or it cannot be opened).
   */
  searchRules?(searches: readonly RuleSearch[]): Promise<readonly RuleSearchResult[] | undefined>;
  /**
   * Runs `write`, a restore of `batch`, so that what `searchRules` read stays good past it: a
   * search reads a chain from the kernel again only after the ruleset changed, and when the
   * generation after `write` is the one before it plus one commit per table of the batch,
   * nothing but the batch changed it. The chains read keep their reads then, with each appended
   * rule's needle (`needleOf` its spec, as the caller's searches make them) added to its chain's.
   * Only a batch of appends and chain declarations with an append in each table is followed; any
   * other is just written. Resolves what `write` does; a failure of `write` is passed on.
   */
  writeKeepingSearches?<T>(
    batch: IptablesBatch,
    needleOf: (spec: readonly string[]) => Buffer | undefined,
    write: () => Promise<T>,
  ): Promise<T>;
  /**
   * Over nf_tables netlink, in one transaction: for each target whose chain `from` holds rules
   * jumping to `chain`, those rules (by handle), then `chain` flushed and deleted; a target no
   * jump leads to is left alone. Resolves the chains removed, or undefined when it cannot be done
   * this way (no link, iptables not on nf_tables, an aborted call, the ruleset changed under every
   * try): the caller then removes by spec.
   */
  removeJumped?(
    targets: readonly JumpedChain[],
    call?: CallOptions,
  ): Promise<readonly string[] | undefined>;
  /**
   * Removes the accept rules of `removal` as `iptables -D` of each would (the first of each
   * that is there; one that is not is fine), over nf_tables netlink: one dump of the chain, each
   * rule holding an address's bytes read back as iptables-save prints it (nft-accept.ts), and one
   * transaction by rule handle. Resolves what it removed and what stays, or undefined when it
   * could not be sure this way (no link, iptables not on nf_tables, an aborted call, a rule
   * holding an address's bytes that is not an accept, the ruleset changed under every try): the
   * caller then removes by spec.
   */
  removeAccepts?(removal: AcceptRemoval, call?: CallOptions): Promise<AcceptsRemoved | undefined>;
}

/**
 * What `removeAccepts` did: the rules it removed, and how many rules holding an address's bytes
 * stay (each an accept: another copy, or another accept of the address, such as `-d A -j
 * ACCEPT`). `left` 0: the chain holds no rule about the addresses any more.
 */
export interface AcceptsRemoved {
  readonly removed: number;
  readonly left: number;
}

/**
 * The firewall plugin's accept rules of some addresses in a chain (`removeAccepts`): for each
 * address (its 4 or 16 bytes), `-d A -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT` and
 * `-s A -j ACCEPT` with A a /32 or /128.
 */
export interface AcceptRemoval {
  readonly table: Table;
  readonly chain: string;
  readonly addresses: readonly Buffer[];
}

/** A per-allocation chain (`removeJumped`) and the chain of its table that jumps to it. */
export interface JumpedChain {
  readonly table: Table;
  readonly from: string;
  readonly chain: string;
}

/** A chain to search (`searchRules`), and the byte strings to look for in its rules. */
export interface RuleSearch {
  readonly table: Table;
  readonly chain: string;
  readonly needles: readonly Buffer[];
}

/** What `searchRules` found in one chain: none of it when the chain is not there. */
export type RuleSearchResult =
  { readonly exists: false } | { readonly exists: true; readonly found: readonly boolean[] };
