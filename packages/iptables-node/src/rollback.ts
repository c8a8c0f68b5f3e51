import type { BatchOp } from './batch.js';
import type { Rule } from './rule.js';
import type { SavedTable } from './save.js';
import type { Table } from './validate.js';

const key = (rule: Rule): string => rule.spec.join('\0');

function rulesOf(table: SavedTable, chain: string): Rule[] {
  return table.rules.filter((r) => r.chain === chain);
}

function counts(rules: readonly Rule[]): Map<string, number> {
  const map = new Map<string, number>();
  for (const rule of rules) map.set(key(rule), (map.get(key(rule)) ?? 0) + 1);
  return map;
}

/**
 * The ops that bring the `touched` chains of one table back from `after` to `before` (both read
 * with iptables-save), used to undo a table that committed before a later table of the same batch
 * failed. Rules that `after` has beyond `before` are deleted, rules it lacks are inserted at their
 * old positions, chains the batch made are flushed and deleted, chains it deleted come back.
 *
 * Only the touched chains change; within them, changes another process made between the two
 * snapshots are undone as well (the window is one failed restore long).
 */
export function rollbackOps(
  table: Table,
  before: SavedTable,
  after: SavedTable,
  touched: ReadonlySet<string>,
): BatchOp[] {
  const existedBefore = new Set(before.chains.map((c) => c.name));
  const existsAfter = new Set(after.chains.map((c) => c.name));
  const recreate: BatchOp[] = [];
  const deletes: BatchOp[] = [];
  const flushes: BatchOp[] = [];
  const removals: BatchOp[] = [];
  const restores: BatchOp[] = [];

  for (const chain of touched) {
    const wasThere = existedBefore.has(chain);
    const isThere = existsAfter.has(chain);
    if (!wasThere && isThere) {
      flushes.push({ kind: 'clearChain', table, chain });
      removals.push({ kind: 'deleteChain', table, chain });
      continue;
    }
    if (!wasThere) continue;
    const old = rulesOf(before, chain);
    if (!isThere) {
      recreate.push({ kind: 'newChain', table, chain });
      for (const rule of old) restores.push({ kind: 'append', table, chain, spec: rule.spec });
      continue;
    }
    const current = rulesOf(after, chain);
    const oldCounts = counts(old);
    const currentCounts = counts(current);
    // Copies beyond what `before` had are deleted; `-D` takes the first copy, and copies are alike.
    const allowed = new Map(oldCounts);
    for (const rule of current) {
      const left = allowed.get(key(rule)) ?? 0;
      if (left > 0) allowed.set(key(rule), left - 1);
      else deletes.push({ kind: 'delete', table, chain, spec: rule.spec });
    }
    // What is left keeps its order, so inserting each missing rule at its old position, in
    // ascending order, rebuilds the old chain.
    const kept = new Map(
      [...oldCounts].map(([k, n]) => [k, Math.min(n, currentCounts.get(k) ?? 0)]),
    );
    old.forEach((rule, index) => {
      const left = kept.get(key(rule)) ?? 0;
      if (left > 0) kept.set(key(rule), left - 1);
      else restores.push({ kind: 'insert', table, chain, spec: rule.spec, position: index + 1 });
    });
  }
  return [...recreate, ...deletes, ...flushes, ...removals, ...restores];
}
