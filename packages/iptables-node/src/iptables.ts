// The facade: `createIptables` checks its options and turns each method into an argv. How a
// command runs and fails is commands.ts; the all-or-nothing batch is restore.ts.
import type { BatchOp, IptablesBatch } from './batch.js';
import { createCommands } from './commands.js';
import type { CallOptions, RestoreOptions, SaveOptions } from './commands.js';
import { IptablesError, isIptablesError } from './errors.js';
import { createSpawnExec } from './exec.js';
import type { CommandExec } from './exec.js';
import type { Logger } from './logger.js';
import { silentLogger } from './logger.js';
import { openNftLink } from './nft.js';
import type { NftLink, NftOp } from './nft.js';
import { restoreOps } from './restore.js';
import type { Rule } from './rule.js';
import { createRuleMemo, parseRuleListing } from './save.js';
import type { Chain, SavedTable } from './save.js';
import { checkChain, checkPosition, checkSpec, checkTable, netnsPath } from './validate.js';
import type { Family, Table } from './validate.js';

export interface IptablesOptions {
  /** `ipv4` runs iptables*, `ipv6` ip6tables*. Default `ipv4`. */
  readonly family?: Family;
  /**
   * The network namespace to act in: a path (`/proc/<pid>/ns/net`, `/run/netns/x`) or a name
   * under /run/netns. Commands then run through `nsenter --net=<path> --`. Default: this
   * process's namespace.
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
  readonly nft?: ((family: Family, netns: string | undefined) => NftLink) | false;
}

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
  saveAt?(
    options?: SaveOptions,
  ): Promise<{ readonly tables: readonly SavedTable[]; readonly generation: number | undefined }>;
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

  const tableArgs = (table: Table): string[] => [
    commands.binaries.main,
    ...wait,
    '-t',
    checkTable(table),
  ];

  // The same lines come back read after read (the shared chains): each is parsed once.
  const memo = createRuleMemo();

  async function listing(table: Table, chain: string | undefined, call: CallOptions | undefined) {
    const argv = [...tableArgs(table), '-S', ...(chain === undefined ? [] : [checkChain(chain)])];
    const stdout = await commands.run(argv, call);
    return commands.parsed(argv, () => parseRuleListing(table, stdout, memo));
  }

  const iptables: Iptables = {
    family,
    netns,

    async listRules(table, chain, call) {
      return (await listing(table, chain, call)).rules;
    },

    async listChains(table, call) {
      return (await listing(table, undefined, call)).chains;
    },

    async chainExists(table, chain, call) {
      // `-S <chain> 1` prints at most one rule, so the answer costs the same for any chain size.
      const argv = [...tableArgs(table), '-S', checkChain(chain), '1'];
      const { result, command } = await commands.execute(argv, call);
      if (result.kind === 'exited' && result.exitCode === 0) return true;
      const error = commands.failure(argv, command, result);
      if (error.code === 'not-found') return false;
      throw error;
    },

    async ruleExists(table, chain, spec, call) {
      const argv = [...tableArgs(table), '-C', checkChain(chain), ...checkSpec(spec)];
      const { result, command } = await commands.execute(argv, call);
      if (result.kind === 'exited' && result.exitCode === 0) return true;
      const error = commands.failure(argv, command, result);
      if (error.code === 'not-found') return false;
      throw error;
    },

    async append(table, chain, spec, call) {
      await commands.run([...tableArgs(table), '-A', checkChain(chain), ...checkSpec(spec)], call);
    },

    async insert(table, chain, spec, call) {
      const position = call?.position === undefined ? [] : [String(checkPosition(call.position))];
      await commands.run(
        [...tableArgs(table), '-I', checkChain(chain), ...position, ...checkSpec(spec)],
        call,
      );
    },

    async delete(table, chain, spec, call) {
      await commands.run([...tableArgs(table), '-D', checkChain(chain), ...checkSpec(spec)], call);
    },

    async newChain(table, chain, call) {
      await commands.run([...tableArgs(table), '-N', checkChain(chain)], call);
    },

    async clearChain(table, chain, call) {
      await commands.run([...tableArgs(table), '-F', checkChain(chain)], call);
    },

    async deleteChain(table, chain, call) {
      await commands.run([...tableArgs(table), '-X', checkChain(chain)], call);
    },

    async clearAndDeleteChain(table, chain, call) {
      const ops: BatchOp[] = [
        { kind: 'clearChain', table: checkTable(table), chain: checkChain(chain) },
        { kind: 'deleteChain', table, chain },
      ];
      try {
        await restoreOps(commands, ops, call);
        return true;
      } catch (error) {
        if (isIptablesError(error) && error.code === 'not-found') return false;
        throw error;
      }
    },

    async save(call) {
      return (await commands.save(call)).tables;
    },

    async restore(batch, options) {
      const { perTable, ...call } = options ?? {};
      await restoreOps(commands, batch.ops, call, perTable === true);
    },

    async saveAt(call) {
      let link: NftLink | undefined;
      try {
        link = nft === false ? undefined : nft(family, netns);
      } catch (error) {
        logger.debug('iptables: no nf_tables link; saving without a generation', {
          error: error instanceof Error ? error.message : String(error),
        });
      }
      try {
        const before = link?.generation();
        const { tables, start } = await commands.save(call);
        const after = link?.generation();
        // The header names the backend: `# Generated by iptables-save v1.8.9 (nf_tables) on …`.
        const nfTables = /^# Generated by \S+ v\S+ \(nf_tables\)/m.test(start);
        return { tables, generation: nfTables && before === after ? before : undefined };
      } finally {
        link?.close();
      }
    },

    removeAt(at, removal) {
      // Synchronous underneath (nft.ts); a throw becomes the promise's rejection.
      return new Promise((resolve) => {
        resolve(removeAtNow(at, removal));
      });
    },
  };

  return iptables;

  function removeAtNow(at: RuleHandles, removal: PlacedRemoval): RuleHandles | undefined {
    if (nft === false)
      throw new IptablesError('removeAt: this Iptables has no nf_tables link', {
        code: 'invalid-argument',
      });
    const started = performance.now();
    const { generation } = at;
    const link = nft(family, netns);
    try {
      const changed = (why: string) =>
        new IptablesError(`nf_tables removal: ${why}; nothing was removed`, { code: 'changed' });
      if (link.generation() !== generation)
        throw changed(`the ruleset is no longer at generation ${generation}`);
      // The chains not read yet: the places to remove there, and the text each rule's message
      // must hold (its comment, and the name of a CNI chain it jumps to; a verdict such as
      // ACCEPT is a number): the kernel's rule at that place must be the saved one. A chain
      // read before is as it was then but for what the removals since took, by handle.
      const unread = new Map<
        string,
        { table: Table; chain: string; size: number; texts: Map<number, string[]> }
      >();
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
      const lists = new Map(at.lists);
      for (const [key, c] of unread) {
        let stranger: number | undefined;
        const list = link.rules(c.table, c.chain, (index, message) => {
          const texts = c.texts.get(index);
          if (texts !== undefined && texts.some((t) => !message.includes(t))) stranger ??= index;
        });
        if (list.length !== c.size)
          throw changed(`${key} has ${list.length} rules, the save showed ${c.size}`);
        if (stranger !== undefined)
          throw changed(`rule ${stranger + 1} of ${key} is not the saved one`);
        lists.set(key, list);
      }
      if (link.generation() !== generation)
        throw changed(`the ruleset moved on from generation ${generation} while it was read`);
      const ops: NftOp[] = [];
      for (const { rule, position } of removal.rules) {
        const handle = lists.get(`${rule.table} ${rule.chain}`)?.[position];
        if (handle === undefined)
          throw changed(`place ${position + 1} is beyond ${rule.table} ${rule.chain}`);
        ops.push({ kind: 'deleteRule', table: rule.table, chain: rule.chain, handle });
      }
      for (const c of removal.chains)
        ops.push({ kind: 'flushChain', table: checkTable(c.table), chain: checkChain(c.chain) });
      for (const c of removal.chains)
        ops.push({ kind: 'deleteChain', table: c.table, chain: c.chain });
      const after = ops.length === 0 ? generation : link.commit(generation, ops);
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
}
