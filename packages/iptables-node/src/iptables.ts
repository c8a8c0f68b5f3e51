import type { IptablesBatch } from './batch.js';
import { formatRestoreInput, opArgs } from './batch.js';
import type { BatchOp, RestoreBlock } from './batch.js';
import { IptablesError, classifyFailure, isIptablesError } from './errors.js';
import type { IptablesErrorCode } from './errors.js';
import { createSpawnRunner } from './exec.js';
import { displayArgs } from './quote.js';
import { rollbackOps } from './rollback.js';
import type { Rule } from './rule.js';
import { SaveParseError, parseIptablesSave, parseRuleListing } from './save.js';
import type { Chain, SavedTable } from './save.js';
import type { CommandResult, CommandRunner, Logger } from './runner.js';
import { silentLogger } from './runner.js';
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
  readonly runner?: CommandRunner;
  readonly logger?: Logger;
  /** Seconds for `--wait`; default: plain `--wait`, which waits for the xtables lock as long as it takes. */
  readonly waitSeconds?: number;
  /** Per process. Default 30 000 ms. */
  readonly timeoutMs?: number;
  /** Where `nsenter` is. Default `nsenter` on PATH. */
  readonly nsenterPath?: string;
}

/** Per call: a cancel signal. */
export interface CallOptions {
  readonly signal?: AbortSignal;
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
  save(
    options?: CallOptions & {
      readonly table?: Table;
      readonly lines?: (line: string) => boolean;
    },
  ): Promise<readonly SavedTable[]>;
  /**
   * Applies a batch with one `iptables-restore --noflush` process, all or nothing: each table is
   * one kernel transaction, and when a later table fails, earlier tables that had committed are
   * put back (see docs/iptables.md).
   */
  restore(batch: IptablesBatch, options?: CallOptions): Promise<void>;
}

const BINARIES: Record<
  Family,
  { readonly main: string; readonly save: string; readonly restore: string }
> = {
  ipv4: { main: 'iptables', save: 'iptables-save', restore: 'iptables-restore' },
  ipv6: { main: 'ip6tables', save: 'ip6tables-save', restore: 'ip6tables-restore' },
};

const FAILED_CODES: Record<'spawn' | 'killed' | 'timeout' | 'aborted', IptablesErrorCode> = {
  spawn: 'spawn',
  killed: 'unknown',
  timeout: 'timeout',
  aborted: 'aborted',
};

/** iptables' stderr on one line: its first three non-blank lines, trimmed, joined by a space. */
function firstLines(text: string): string {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .slice(0, 3)
    .join(' ');
}

/** The input line iptables-restore blamed, from messages like "line 3 failed" or "line 3: …". */
function restoreErrorLine(stderr: string): number | undefined {
  const match = /line:? (\d+)/.exec(stderr);
  return match?.[1] === undefined ? undefined : Number(match[1]);
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
  const binaries = BINARIES[family];
  const netns = options.netns === undefined ? undefined : netnsPath(options.netns);
  const runner = options.runner ?? createSpawnRunner();
  const logger = options.logger ?? silentLogger;
  const timeoutMs = checkWhole(options.timeoutMs ?? 30_000, 'timeoutMs', 1);
  const wait =
    options.waitSeconds === undefined
      ? ['--wait']
      : ['--wait', String(checkWhole(options.waitSeconds, 'waitSeconds', 0))];
  const nsenter = options.nsenterPath ?? 'nsenter';

  /** What a message shows as "the command": the iptables argv, then where it ran. */
  const describe = (argv: readonly string[]): string =>
    `${displayArgs(argv)}${netns === undefined ? '' : ` (in netns ${netns})`}`;

  async function exec(
    argv: readonly string[],
    call: CallOptions | undefined,
    input?: string,
  ): Promise<{ result: CommandResult; command: readonly string[] }> {
    const [file, ...args] = netns === undefined ? argv : [nsenter, `--net=${netns}`, '--', ...argv];
    const command = [file as string, ...args];
    const started = performance.now();
    const result = await runner.run({
      file: file as string,
      args,
      timeoutMs,
      ...(input === undefined ? {} : { input }),
      ...(call?.signal === undefined ? {} : { signal: call.signal }),
    });
    logger.debug('iptables command', {
      command: describe(argv),
      ms: Math.round(performance.now() - started),
      ...(result.kind === 'exited' ? { exitCode: result.exitCode } : { failed: result.reason }),
    });
    return { result, command };
  }

  function failure(
    argv: readonly string[],
    command: readonly string[],
    result: CommandResult,
    context = '',
  ): IptablesError {
    if (result.kind === 'failed') {
      return new IptablesError(`${describe(argv)}${context} failed: ${result.message}`, {
        code: FAILED_CODES[result.reason],
        command,
        stderr: result.stderr,
      });
    }
    const stderr = result.stderr.trim() === '' ? 'no error message' : firstLines(result.stderr);
    return new IptablesError(
      `${describe(argv)}${context} failed (exit status ${result.exitCode}): ${stderr}`,
      {
        code: classifyFailure(result.exitCode, result.stderr),
        command,
        exitCode: result.exitCode,
        stderr: result.stderr,
      },
    );
  }

  /** Runs an iptables command; resolves stdout, throws `IptablesError` for any failure. */
  async function run(argv: readonly string[], call: CallOptions | undefined): Promise<string> {
    const { result, command } = await exec(argv, call);
    if (result.kind === 'exited' && result.exitCode === 0) return result.stdout;
    throw failure(argv, command, result);
  }

  const tableArgs = (table: Table): string[] => [binaries.main, ...wait, '-t', checkTable(table)];

  function parsed<T>(argv: readonly string[], read: () => T): T {
    try {
      return read();
    } catch (error) {
      if (error instanceof SaveParseError) {
        throw new IptablesError(`${describe(argv)} printed what cannot be read: ${error.message}`, {
          code: 'parse',
          cause: error,
        });
      }
      throw error;
    }
  }

  async function listing(table: Table, chain: string | undefined, call: CallOptions | undefined) {
    const argv = [...tableArgs(table), '-S', ...(chain === undefined ? [] : [checkChain(chain)])];
    const stdout = await run(argv, call);
    return parsed(argv, () => parseRuleListing(table, stdout));
  }

  async function save(
    call?: CallOptions & { readonly table?: Table; readonly lines?: (line: string) => boolean },
  ): Promise<SavedTable[]> {
    const argv = [
      binaries.save,
      ...(call?.table === undefined ? [] : ['-t', checkTable(call.table)]),
    ];
    const stdout = await run(argv, call);
    return parsed(argv, () => parseIptablesSave(stdout, call?.lines));
  }

  async function saveTables(
    tables: readonly Table[],
    call: CallOptions | undefined,
  ): Promise<Map<Table, SavedTable>> {
    const saved = new Map<Table, SavedTable>();
    for (const table of tables) {
      const [found] = await save({ ...call, table });
      saved.set(table, found ?? { name: table, chains: [], rules: [] });
    }
    return saved;
  }

  async function restoreOps(ops: readonly BatchOp[], call: CallOptions | undefined): Promise<void> {
    const input = formatRestoreInput(ops);
    if (input.blocks.length === 0) return;
    const argv = [binaries.restore, '--noflush', ...wait];
    // iptables-restore commits table by table, so a batch over several tables first reads them
    // as they are, to put back those that committed before a later one failed. One table is one
    // transaction and needs no snapshot.
    const before =
      input.blocks.length < 2
        ? undefined
        : await saveTables(
            input.blocks.map((b) => b.table),
            call,
          );

    const { result, command } = await exec(argv, call, input.text);
    if (result.kind === 'exited' && result.exitCode === 0) {
      if (result.stderr.trim() !== '')
        logger.warn('iptables-restore succeeded with messages', { stderr: result.stderr });
      return;
    }
    const line = result.kind === 'exited' ? restoreErrorLine(result.stderr) : undefined;
    const blamed = line === undefined ? undefined : findLine(input.blocks, line);
    const at =
      blamed === undefined
        ? ''
        : ` at line ${line} (${displayArgs(['-t', blamed.table, ...blamed.text])})`;
    const error = failure(argv, command, result, at);
    const withLine = new IptablesError(error.message, {
      code: error.code,
      command,
      ...(error.exitCode === undefined ? {} : { exitCode: error.exitCode }),
      stderr: error.stderr,
      ...(line === undefined ? {} : { line }),
    });
    if (before === undefined) throw withLine;

    // Tables whose COMMIT came before the blamed line went through. Without a line (the process
    // was killed, timed out, or said nothing usable) any table may have, the last one too;
    // undoing a table that did not commit changes nothing. The undo ignores the caller's signal:
    // an abort must not leave a batch half-applied.
    const committed = input.blocks.filter((b) => line === undefined || b.commitLine < line);
    await undo(committed, before, withLine);
    throw withLine;
  }

  async function undo(
    committed: readonly RestoreBlock[],
    before: Map<Table, SavedTable>,
    error: IptablesError,
  ): Promise<void> {
    if (committed.length === 0) return;
    const after = await saveTables(
      committed.map((b) => b.table),
      undefined,
    );
    for (const block of committed) {
      const touched = new Set(block.ops.map((o) => o.op.chain));
      const ops = rollbackOps(
        block.table,
        before.get(block.table) as SavedTable,
        after.get(block.table) as SavedTable,
        touched,
      );
      if (ops.length === 0) continue;
      logger.warn('iptables-restore failed after a table committed; putting the table back', {
        table: block.table,
        error: error.message,
        ops: ops.length,
      });
      try {
        await restoreOps(ops, undefined);
      } catch (undoError) {
        throw new IptablesError(
          `${error.message}; and putting table ${block.table} back failed: ${isIptablesError(undoError) ? undoError.message : String(undoError)}`,
          { code: error.code, command: error.command, stderr: error.stderr, cause: undoError },
        );
      }
    }
  }

  function findLine(
    blocks: readonly RestoreBlock[],
    line: number,
  ): { table: Table; text: string[] } | undefined {
    for (const block of blocks) {
      const found = block.ops.find((o) => o.line === line);
      if (found) return { table: block.table, text: opArgs(found.op) };
    }
    return undefined;
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
      const { result, command } = await exec(argv, call);
      if (result.kind === 'exited' && result.exitCode === 0) return true;
      const error = failure(argv, command, result);
      if (error.code === 'not-found') return false;
      throw error;
    },

    async ruleExists(table, chain, spec, call) {
      const argv = [...tableArgs(table), '-C', checkChain(chain), ...checkSpec(spec)];
      const { result, command } = await exec(argv, call);
      if (result.kind === 'exited' && result.exitCode === 0) return true;
      const error = failure(argv, command, result);
      if (error.code === 'not-found') return false;
      throw error;
    },

    async append(table, chain, spec, call) {
      await run([...tableArgs(table), '-A', checkChain(chain), ...checkSpec(spec)], call);
    },

    async insert(table, chain, spec, call) {
      const position = call?.position === undefined ? [] : [String(checkPosition(call.position))];
      await run(
        [...tableArgs(table), '-I', checkChain(chain), ...position, ...checkSpec(spec)],
        call,
      );
    },

    async delete(table, chain, spec, call) {
      await run([...tableArgs(table), '-D', checkChain(chain), ...checkSpec(spec)], call);
    },

    async newChain(table, chain, call) {
      await run([...tableArgs(table), '-N', checkChain(chain)], call);
    },

    async clearChain(table, chain, call) {
      await run([...tableArgs(table), '-F', checkChain(chain)], call);
    },

    async deleteChain(table, chain, call) {
      await run([...tableArgs(table), '-X', checkChain(chain)], call);
    },

    async clearAndDeleteChain(table, chain, call) {
      const ops: BatchOp[] = [
        { kind: 'clearChain', table: checkTable(table), chain: checkChain(chain) },
        { kind: 'deleteChain', table, chain },
      ];
      try {
        await restoreOps(ops, call);
        return true;
      } catch (error) {
        if (isIptablesError(error) && error.code === 'not-found') return false;
        throw error;
      }
    },

    save,

    async restore(batch, call) {
      await restoreOps(batch.ops, call);
    },
  };
}
