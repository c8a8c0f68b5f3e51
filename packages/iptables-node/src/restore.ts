// `Iptables.restore` and `clearAndDeleteChain`: a batch through one `iptables-restore --noflush`,
// all or nothing. One table is one kernel transaction; iptables-restore commits table by table,
// so a batch over several tables first saves them and, when a later table fails, puts back
// those that had committed (rollback.ts computes the ops; docs/iptables.md has the
// measurements).
import { formatRestoreInput, opArgs } from './batch.js';
import type { BatchOp, RestoreBlock } from './batch.js';
import type { CallOptions, Commands } from './commands.js';
import { IptablesError, isIptablesError } from './errors.js';
import { displayArgs } from './quote.js';
import { rollbackOps } from './rollback.js';
import type { SavedTable } from './save.js';
import type { Iptables } from './types.js';
import { checkChain, checkTable } from './validate.js';
import type { Table } from './validate.js';

/** The input line iptables-restore blamed, from messages like "line 3 failed" or "line 3: …". */
function restoreErrorLine(stderr: string): number | undefined {
  const match = /line:? (\d+)/.exec(stderr);
  return match?.[1] === undefined ? undefined : Number(match[1]);
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

async function saveTables(
  commands: Commands,
  tables: readonly Table[],
  call: CallOptions | undefined,
): Promise<Map<Table, SavedTable>> {
  const saved = new Map<Table, SavedTable>();
  for (const table of tables) {
    const [found] = (await commands.save({ ...call, table })).tables;
    saved.set(table, found ?? { name: table, chains: [], rules: [] });
  }
  return saved;
}

/**
 * Applies `ops` with one iptables-restore; throws `IptablesError` after putting tables back.
 * With `perTable`, each table is its own all-or-nothing transaction and a table that committed
 * before a later one failed stays committed: no snapshot is read first (two iptables-save runs
 * fewer for a batch over nat and filter), for callers that look again after a failure.
 */
export async function restoreOps(
  commands: Commands,
  ops: readonly BatchOp[],
  call: CallOptions | undefined,
  perTable = false,
): Promise<void> {
  const input = formatRestoreInput(ops);
  if (input.blocks.length === 0) return;
  const argv = [commands.binaries.restore, '--noflush', ...commands.wait];
  // iptables-restore commits table by table, so a batch over several tables first reads them
  // as they are, to put back those that committed before a later one failed. One table is one
  // transaction and needs no snapshot.
  const before =
    input.blocks.length < 2 || perTable
      ? undefined
      : await saveTables(
          commands,
          input.blocks.map((b) => b.table),
          call,
        );

  const { result, command } = await commands.execute(argv, call, input.text);
  if (result.kind === 'exited' && result.exitCode === 0) {
    if (result.stderr.trim() !== '')
      commands.logger.warn('iptables-restore succeeded with messages', { stderr: result.stderr });
    return;
  }
  const line = result.kind === 'exited' ? restoreErrorLine(result.stderr) : undefined;
  const blamed = line === undefined ? undefined : findLine(input.blocks, line);
  const at =
    blamed === undefined
      ? ''
      : ` at line ${line} (${displayArgs(['-t', blamed.table, ...blamed.text])})`;
  const error = commands.failure(argv, command, result, at);
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
  await undo(commands, committed, before, withLine);
  throw withLine;
}

async function undo(
  commands: Commands,
  committed: readonly RestoreBlock[],
  before: Map<Table, SavedTable>,
  error: IptablesError,
): Promise<void> {
  if (committed.length === 0) return;
  const after = await saveTables(
    commands,
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
    commands.logger.warn(
      'iptables-restore failed after a table committed; putting the table back',
      {
        table: block.table,
        error: error.message,
        ops: ops.length,
      },
    );
    try {
      await restoreOps(commands, ops, undefined);
    } catch (undoError) {
      throw new IptablesError(
        `${error.message}; and putting table ${block.table} back failed: ${isIptablesError(undoError) ? undoError.message : String(undoError)}`,
        { code: error.code, command: error.command, stderr: error.stderr, cause: undoError },
      );
    }
  }
}

/** The `Iptables` methods that are one batch: `restore`, and `clearAndDeleteChain` (`-F`, `-X`). */
export function batchOps(commands: Commands): Pick<Iptables, 'restore' | 'clearAndDeleteChain'> {
  return {
    async restore(batch, options) {
      const { perTable, ...call } = options ?? {};
      await restoreOps(commands, batch.ops, call, perTable === true);
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
  };
}
