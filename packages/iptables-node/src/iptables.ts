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

  return {
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

    save(call) {
      return commands.save(call);
    },

    async restore(batch, options) {
      const { perTable, ...call } = options ?? {};
      await restoreOps(commands, batch.ops, call, perTable === true);
    },
  };
}
