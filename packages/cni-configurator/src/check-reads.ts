// What a CHECK reads besides the kernel's links and routes (route-reader.ts): iptables chains
// and host-local's reservations. One CHECK alone (the CheckAllocNetwork RPC) reads them fresh
// (chains through the context's batched reader); the CHECKs of a batch (a restore's, see
// `AllocNetworking.checkBatch`) share one read of each iptables table and of each host-local
// directory, taken when the first of them needs it: every CHECK of the batch sees the node as it
// was then (a restore checks what the last run left; nothing else sets these allocations up
// meanwhile, the runner runs one operation per allocation at a time).
//
// Concurrency: reads are shared through promises kept in maps filled synchronously; a read that
// failed is forgotten, so that the next CHECK of the batch reads again.
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Family, Rule, Table } from '@allocnet/iptables-node';
import type { ReadChain } from './chain-reader.js';
import { reservationTexts } from './native-check.js';
import type { IptablesState } from './types.js';

export interface CheckReads {
  readonly readChain: ReadChain;
  /**
   * Whether host-local's `dir` holds a reservation of `containerId` on `ifName` (its CHECK's
   * FindByID: any file whose trimmed text names them). The files named by `addresses` are read
   * first; only when none of them names the container is the whole directory read.
   */
  hasReservation(
    dir: string,
    containerId: string,
    ifName: string,
    addresses: readonly string[],
  ): Promise<boolean>;
}

function isMissing(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR';
}

/** A file's trimmed text; undefined when it is not there (or is a directory). */
async function trimmedText(path: string): Promise<string | undefined> {
  try {
    return (await readFile(path, 'utf8')).trim();
  } catch (error) {
    if (isMissing(error)) return undefined;
    throw error;
  }
}

/** The trimmed texts of every file under `dir`, as host-local's walk reads them. */
async function directoryTexts(dir: string): Promise<ReadonlySet<string>> {
  let entries;
  try {
    entries = await readdir(dir, { recursive: true, withFileTypes: true });
  } catch (error) {
    if (isMissing(error)) return new Set();
    throw error;
  }
  const texts = await Promise.all(
    entries.filter((e) => e.isFile()).map((e) => trimmedText(join(e.parentPath, e.name))),
  );
  return new Set(texts.filter((t): t is string => t !== undefined));
}

function reservations(
  scan: (dir: string) => Promise<ReadonlySet<string>>,
): CheckReads['hasReservation'] {
  return async (dir, containerId, ifName, addresses) => {
    const wanted = reservationTexts(containerId, ifName);
    for (const address of addresses) {
      const text = await trimmedText(join(dir, address));
      if (text !== undefined && wanted.includes(text)) return true;
    }
    const texts = await scan(dir);
    return wanted.some((w) => texts.has(w));
  };
}

/** Reads for one CHECK: chains through `readChain`, the directory read each time. */
export function freshReads(readChain: ReadChain): CheckReads {
  return { readChain, hasReservation: reservations(directoryTexts) };
}

/** A shared promise per key, forgotten when it fails. */
function memo<T>(): (key: string, read: () => Promise<T>) => Promise<T> {
  const kept = new Map<string, Promise<T>>();
  return (key, read) => {
    let found = kept.get(key);
    if (found === undefined) {
      found = read();
      kept.set(key, found);
      found.catch(() => {
        // Another CHECK of the batch reads again; this one reports the failure itself.
        if (kept.get(key) === found) kept.delete(key);
      });
    }
    return found;
  };
}

/** Reads for the CHECKs of a batch: one `iptables-save -t <table>` per family and table, one read of each directory. */
export function sharedReads(
  iptables: Readonly<Record<Family, Pick<IptablesState, 'save'>>>,
): CheckReads {
  const tables = memo<ReadonlyMap<string, readonly Rule[]>>();
  const dirs = memo<ReadonlySet<string>>();
  const readTable = async (family: Family, table: Table) => {
    const saved = await iptables[family].save({ table });
    const chains = new Map<string, Rule[]>();
    for (const t of saved.filter((s) => s.name === table)) {
      for (const chain of t.chains) chains.set(chain.name, []);
      for (const rule of t.rules) chains.get(rule.chain)?.push(rule);
    }
    return chains;
  };
  return {
    async readChain(family, table, chain, call = {}) {
      call.signal?.throwIfAborted();
      const chains = await tables(`${family}:${table}`, () => readTable(family, table));
      return chains.get(chain);
    },
    hasReservation: reservations((dir) => dirs(dir, () => directoryTexts(dir))),
  };
}
