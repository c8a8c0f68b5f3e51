import { IptablesError } from './errors.js';
import { formatArg, formatArgs } from './quote.js';
import type { Rule } from './rule.js';
import { checkChain, checkPosition, checkSpec, checkTable } from './validate.js';
import type { Table } from './validate.js';

/** One change in a batch. */
export type BatchOp =
  | {
      readonly kind: 'append';
      readonly table: Table;
      readonly chain: string;
      readonly spec: readonly string[];
    }
  | {
      readonly kind: 'insert';
      readonly table: Table;
      readonly chain: string;
      readonly spec: readonly string[];
      readonly position: number | undefined;
    }
  | {
      readonly kind: 'delete';
      readonly table: Table;
      readonly chain: string;
      readonly spec: readonly string[];
    }
  | { readonly kind: 'newChain'; readonly table: Table; readonly chain: string }
  | { readonly kind: 'declareChain'; readonly table: Table; readonly chain: string }
  | { readonly kind: 'clearChain'; readonly table: Table; readonly chain: string }
  | { readonly kind: 'deleteChain'; readonly table: Table; readonly chain: string };

function checkRestorable(spec: readonly string[]): readonly string[] {
  checkSpec(spec);
  spec.forEach((arg, i) => {
    if (/[\n\r]/.test(arg)) {
      throw new IptablesError(
        `spec[${i}] holds a line break, which iptables-restore input cannot carry; use Iptables.delete`,
        { code: 'invalid-argument' },
      );
    }
  });
  return [...spec];
}

/**
 * Changes to apply together with `Iptables.restore`: one `iptables-restore --noflush` process,
 * all or nothing. Each method checks its arguments and throws `IptablesError`
 * (`invalid-argument`) at once, so a batch that was built is one iptables can be given.
 */
export class IptablesBatch {
  readonly #ops: BatchOp[] = [];

  get ops(): readonly BatchOp[] {
    return this.#ops;
  }

  get size(): number {
    return this.#ops.length;
  }

  append(table: Table, chain: string, spec: readonly string[]): this {
    this.#ops.push({
      kind: 'append',
      table: checkTable(table),
      chain: checkChain(chain),
      spec: checkRestorable(spec),
    });
    return this;
  }

  /** Inserts at `position` (1-based), or first when it is left out. */
  insert(table: Table, chain: string, spec: readonly string[], position?: number): this {
    this.#ops.push({
      kind: 'insert',
      table: checkTable(table),
      chain: checkChain(chain),
      spec: checkRestorable(spec),
      position: position === undefined ? undefined : checkPosition(position),
    });
    return this;
  }

  delete(table: Table, chain: string, spec: readonly string[]): this {
    this.#ops.push({
      kind: 'delete',
      table: checkTable(table),
      chain: checkChain(chain),
      spec: checkRestorable(spec),
    });
    return this;
  }

  /** Deletes a rule read back by `Iptables.save` or `Iptables.listRules`. */
  deleteRule(rule: Rule): this {
    return this.delete(rule.table, rule.chain, rule.spec);
  }

  newChain(table: Table, chain: string): this {
    this.#ops.push({ kind: 'newChain', table: checkTable(table), chain: checkChain(chain) });
    return this;
  }

  /**
   * Makes the chain, or empties it when it exists (iptables-restore's `:CHAIN - [0:0]` line under
   * --noflush): rules appended after it are then the chain's whole content, however often the
   * batch is applied.
   */
  declareChain(table: Table, chain: string): this {
    this.#ops.push({ kind: 'declareChain', table: checkTable(table), chain: checkChain(chain) });
    return this;
  }

  /** Flushes the chain (`-F`): it must exist. */
  clearChain(table: Table, chain: string): this {
    this.#ops.push({ kind: 'clearChain', table: checkTable(table), chain: checkChain(chain) });
    return this;
  }

  /** Deletes the chain (`-X`): it must exist, be empty and have no rule jumping to it. */
  deleteChain(table: Table, chain: string): this {
    this.#ops.push({ kind: 'deleteChain', table: checkTable(table), chain: checkChain(chain) });
    return this;
  }
}

/** Creates an empty batch. */
export function createBatch(): IptablesBatch {
  return new IptablesBatch();
}

/** The argv of one op, after `-t <table>`. */
export function opArgs(op: BatchOp): string[] {
  switch (op.kind) {
    case 'append':
      return ['-A', op.chain, ...op.spec];
    case 'insert':
      return [
        '-I',
        op.chain,
        ...(op.position === undefined ? [] : [String(op.position)]),
        ...op.spec,
      ];
    case 'delete':
      return ['-D', op.chain, ...op.spec];
    case 'newChain':
      return ['-N', op.chain];
    case 'declareChain':
      return [`:${op.chain}`, '-', '[0:0]'];
    case 'clearChain':
      return ['-F', op.chain];
    case 'deleteChain':
      return ['-X', op.chain];
  }
}

/** One table's part of restore input: which input lines hold which ops. */
export interface RestoreBlock {
  readonly table: Table;
  /** 1-based line of `*table`; `COMMIT` is at `commitLine`. */
  readonly firstLine: number;
  readonly commitLine: number;
  readonly ops: readonly { readonly line: number; readonly op: BatchOp }[];
}

export interface RestoreInput {
  readonly text: string;
  readonly blocks: readonly RestoreBlock[];
}

/**
 * Writes ops as iptables-restore input: one `*table … COMMIT` block per table, tables in the order
 * they first appear, ops in their order within each table (iptables has no jumps across tables,
 * so grouping does not change what the batch means). Chains are made with `-N`; a `:CHAIN` line,
 * which under --noflush empties a chain that exists, is written only for `declareChain`.
 */
export function formatRestoreInput(ops: readonly BatchOp[]): RestoreInput {
  const byTable = new Map<Table, BatchOp[]>();
  for (const op of ops) {
    const list = byTable.get(op.table);
    if (list) list.push(op);
    else byTable.set(op.table, [op]);
  }
  const lines: string[] = [];
  const blocks: RestoreBlock[] = [];
  for (const [table, tableOps] of byTable) {
    lines.push(`*${formatArg(table)}`);
    const firstLine = lines.length;
    const placed = tableOps.map((op) => {
      lines.push(op.kind === 'declareChain' ? opArgs(op).join(' ') : formatArgs(opArgs(op)));
      return { line: lines.length, op };
    });
    lines.push('COMMIT');
    blocks.push({ table, firstLine, commitLine: lines.length, ops: placed });
  }
  return { text: lines.length === 0 ? '' : `${lines.join('\n')}\n`, blocks };
}
