import { statSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { open } from 'lmdb';
import type { RootDatabase } from 'lmdb';
import { decode } from '@allocnet/cni';
import { formatPath, renderProblem } from '@allocnet/base';
import { RunnerError, invalidInputOf, kindOf, messageOf } from './errors.js';
import { SCHEMA_VERSION, recordCodec } from './record.js';
import { openStoreRoom, writeBytes } from './room.js';
import type { RoomSystem, StoreRoom } from './room.js';
import type { AllocRecord } from './record.js';
import { decodeSpec } from './spec.js';
import type { RunnerSpec } from './spec.js';

/** The key of the schema version. */
export const SCHEMA_KEY = 'meta/schema';
/** Records are `alloc/<allocId>`. */
export const RECORD_PREFIX = 'alloc/';

/** What a migration sees: the raw store, inside the one transaction that migrates it. */
export interface MigrationContext {
  get(key: string): unknown;
  put(key: string, value: unknown): void;
  remove(key: string): void;
  /** Every key starting with `prefix`, in order. */
  keys(prefix: string): string[];
}

/** Rewrites the store from schema `n` to `n + 1`; runs inside a synchronous transaction. */
export type Migration = (store: MigrationContext) => void;

/**
 * Migrations by the schema they start from. Schema 1 is the first; a store without a schema key
 * but with entries is schema 0, which no released version wrote, so there is nothing to migrate
 * from yet. A future schema 2 adds `1: (store) => { … }` here.
 */
export const MIGRATIONS: Readonly<Record<number, Migration>> = {};

/** Whether the store can be written; see `RunnerStore.health`. */
export interface StoreHealth {
  /**
   * False from a write that failed because the data dir's filesystem is full (or over quota)
   * until a write succeeds again.
   */
  readonly writable: boolean;
  /** When not writable: the failed write's message. */
  readonly problem?: string;
  /** When not writable: when the first failing write of this spell failed (ms since the epoch). */
  readonly sinceMs?: number;
  /** Writes that failed for lack of space, since the store was opened. */
  readonly writeFailures: number;
}

/** The runner's durable state: one record per allocation, in LMDB at `<dataDir>/state`. */
export interface RunnerStore {
  readonly path: string;
  /** Whether the last write found space; every write (and `probe`) updates it. */
  health(): StoreHealth;
  /**
   * Writes a small marker to find out whether space has come back; true when it was written
   * (the store is writable again). Never throws for lack of space.
   */
  probe(): Promise<boolean>;
  get(allocId: string): AllocRecord | undefined;
  /** Every record, by allocation id. */
  list(): AllocRecord[];
  /** Resolves once the transaction holding it is committed and synced to disk. */
  put(record: AllocRecord): Promise<void>;
  /** Resolves once the removal is committed and synced to disk. */
  remove(allocId: string): Promise<void>;
  close(): Promise<void>;
}

export interface OpenStoreOptions {
  readonly dataDir: string;
  /** Default `MIGRATIONS`. */
  readonly migrations?: Readonly<Record<number, Migration>>;
  /** The schema this code writes. Default `SCHEMA_VERSION`. */
  readonly schema?: number;
  /** The clock of `health().sinceMs`. Default `Date.now`. */
  readonly now?: () => number;
  /** The system calls of the store's room on disk (room.ts). Default the real ones. */
  readonly roomSystem?: RoomSystem;
}

function storeError(message: string, cause?: unknown): RunnerError {
  return new RunnerError(message, { code: 'store', ...(cause === undefined ? {} : { cause }) });
}

/** The key `probe` writes. */
export const PROBE_KEY = 'meta/probe';

/** errno values that mean the filesystem has no room: ENOSPC, EDQUOT. */
const NO_SPACE_ERRNOS = new Set([28, 122]);

/**
 * The error behind a failed lmdb-js write. A failed commit rejects every write of its
 * transaction with a generic "Commit failed" whose `commitError` is a promise of the real one
 * (`No space left on device`, `code` 28); it is rejected by the time the write's rejection is
 * seen, and a handler is attached either way so that it is never an unhandled rejection.
 */
async function writeErrorOf(error: unknown): Promise<unknown> {
  const commitError =
    typeof error === 'object' && error !== null
      ? (error as { commitError?: unknown }).commitError
      : undefined;
  if (!(commitError instanceof Promise)) return error;
  const settled = commitError.then(
    () => error,
    (real: unknown) => real,
  );
  // Should the real error never come, the generic one after a second (the timer is let go as
  // soon as the race is decided; its abort rejection is handled by the race).
  const stop = new AbortController();
  try {
    return await Promise.race([settled, delay(1000, error, { signal: stop.signal })]);
  } finally {
    stop.abort();
  }
}

/** What `health().problem` says of a full data dir; `detail` is the write error's message. */
export function noSpaceProblem(dataDir: string, detail: string): string {
  return `the data dir "${dataDir}" has no space left (${detail})`;
}

/** The `store-full` error of a write (`what`) the full data dir refused. */
export function storeFullError(what: string, problem: string, cause?: unknown): RunnerError {
  return new RunnerError(
    `${what} failed: ${problem}; nothing was changed, and writes work again once space is freed there`,
    { code: 'store-full', ...(cause === undefined ? {} : { cause }) },
  );
}

/**
 * Whether a write failed because the filesystem is full or over quota, by the error's code:
 * lmdb-js sets `code` to the errno (28), Node's fs errors carry `code` `ENOSPC` and a negative
 * `errno`. The message is not read: it is for people, and varies with the libc and the locale.
 */
export function isNoSpace(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, errno } = error as { code?: unknown; errno?: unknown };
  if (code === 'ENOSPC' || code === 'EDQUOT') return true;
  return [code, errno].some((n) => typeof n === 'number' && NO_SPACE_ERRNOS.has(Math.abs(n)));
}

/**
 * Opens (creating it if needed) and migrates the store, then reads every record into memory,
 * checking each: a record that does not decode refuses the open, naming its key and field.
 *
 * Durability: LMDB is opened with its default sync on commit and `overlappingSync: false`, so a
 * write's promise resolves only after the transaction is committed and fsynced (with lmdb-js's
 * default `overlappingSync` the promise resolves at commit and the flush follows later, which a
 * power loss could undo). Writes made in one event turn share one transaction (lmdb-js batching).
 */
export async function openRunnerStore(options: OpenStoreOptions): Promise<RunnerStore> {
  const path = join(options.dataDir, 'state');
  const current = options.schema ?? SCHEMA_VERSION;
  const migrations = options.migrations ?? MIGRATIONS;
  const now = options.now ?? Date.now;
  let db: RootDatabase;
  try {
    // `eventTurnBatching: false`: with it, lmdb-js starts each event turn's transaction with a
    // promise of its own that nobody holds, and a failed commit (a full disk) rejects it
    // unhandled, which ends the process. Without it, writes made before the commit runs (a
    // setImmediate later) still share one transaction.
    db = open({ path, encoding: 'json', overlappingSync: false, eventTurnBatching: false });
  } catch (error) {
    throw storeError(`opening the state store "${path}" failed: ${messageOf(error)}`, error);
  }
  let room: StoreRoom;
  try {
    room = openStoreRoom(path, options.roomSystem);
  } catch (error) {
    await db.close();
    throw storeError(`opening the state store "${path}" failed: ${messageOf(error)}`, error);
  }
  const shut = async (): Promise<void> => {
    await db.close();
    room.close();
  };

  let full: { readonly problem: string; readonly sinceMs: number } | undefined;
  let writeFailures = 0;
  /** The `store-full` error of a write, counted, and the store marked not writable. */
  const noSpace = (what: string, detail: string, cause?: unknown): RunnerError => {
    writeFailures++;
    const problem = noSpaceProblem(options.dataDir, detail);
    full ??= { problem, sinceMs: now() };
    return storeFullError(what, problem, cause);
  };
  const admit: Admit = (what, bytes) => {
    const refused = room.admit(bytes);
    if (refused === undefined) {
      return () => {
        room.release(bytes);
      };
    }
    throw isNoSpace(refused)
      ? noSpace(what, refused.message)
      : storeError(`${what} failed: ${refused.message}`);
  };

  let records: Map<string, AllocRecord>;
  try {
    await migrate(db, path, current, migrations, admit);
    records = readRecords(db, path);
  } catch (error) {
    await shut();
    throw error;
  }

  let closed = false;
  /** One write of about `valueBytes`, admitted by the room first (room.ts). */
  const write = async (
    what: string,
    valueBytes: number,
    op: () => Promise<boolean>,
  ): Promise<void> => {
    if (closed) throw storeError(`${what} failed: the state store "${path}" is closed`);
    const release = admit(what, writeBytes(valueBytes));
    try {
      await op();
    } catch (thrown) {
      const error = await writeErrorOf(thrown);
      if (!isNoSpace(error)) throw storeError(`${what} failed: ${messageOf(error)}`, error);
      throw noSpace(what, messageOf(error), error);
    } finally {
      release();
    }
    full = undefined;
  };

  return {
    path,
    health: () =>
      full === undefined
        ? { writable: true, writeFailures }
        : { writable: false, problem: full.problem, sinceMs: full.sinceMs, writeFailures },
    async probe() {
      try {
        await write('writing the probe', 64, () => db.put(PROBE_KEY, now()));
        return true;
      } catch (error) {
        if (kindOf(error) === 'exhausted') return false;
        throw error;
      }
    },
    get: (allocId) => records.get(allocId),
    list: () => [...records.values()].sort((a, b) => (a.allocId < b.allocId ? -1 : 1)),
    async put(record) {
      const key = `${RECORD_PREFIX}${record.allocId}`;
      await write(
        `writing the record of allocation "${record.allocId}"`,
        Buffer.byteLength(key) + Buffer.byteLength(JSON.stringify(record)),
        () => db.put(key, record),
      );
      records.set(record.allocId, record);
    },
    async remove(allocId) {
      await write(`removing the record of allocation "${allocId}"`, 0, () =>
        db.remove(`${RECORD_PREFIX}${allocId}`),
      );
      records.delete(allocId);
    },
    async close() {
      if (closed) return;
      closed = true;
      await shut();
    },
  };
}

/** Every record of the store, each checked: one that does not decode throws, naming its key and field. */
function readRecords(db: RootDatabase, path: string): Map<string, AllocRecord> {
  const records = new Map<string, AllocRecord>();
  for (const { key, value } of db.getRange({
    start: RECORD_PREFIX,
    end: `${RECORD_PREFIX}\uffff`,
  })) {
    const result = decode(recordCodec, value);
    if (!result.ok) {
      const { field, problem } = result.problem;
      throw storeError(
        `the state store "${path}" has an unreadable record "${String(key)}": ${field === '' ? 'the record' : field} ${problem}`,
      );
    }
    let spec: RunnerSpec;
    try {
      spec = decodeSpec(result.value.spec);
    } catch (error) {
      const bad = invalidInputOf(error);
      if (bad === undefined) throw error;
      throw storeError(
        `the state store "${path}" has an unreadable record "${String(key)}": ${formatPath(bad.path)} ${renderProblem(bad.problem)}`,
        error,
      );
    }
    records.set(result.value.allocId, { ...(result.value as unknown as AllocRecord), spec });
  }
  return records;
}

/**
 * Admits a write of `bytes` (room.ts) and answers what releases it, or throws why it may not be
 * made: `store-full` when the data dir has no room.
 */
type Admit = (what: string, bytes: number) => () => void;

async function migrate(
  db: RootDatabase,
  path: string,
  current: number,
  migrations: Readonly<Record<number, Migration>>,
  admit: Admit,
): Promise<void> {
  const stored: unknown = db.get(SCHEMA_KEY);
  let version: number;
  if (stored === undefined) {
    const empty = db.getKeysCount({ limit: 1 }) === 0;
    if (empty) {
      const release = admit('writing the schema version', writeBytes(SCHEMA_KEY.length + 8));
      try {
        await db.put(SCHEMA_KEY, current);
      } finally {
        release();
      }
      return;
    }
    version = 0;
  } else if (typeof stored === 'number' && Number.isInteger(stored) && stored >= 0) {
    version = stored;
  } else {
    throw storeError(
      `the state store "${path}" has a schema version that is not a number: ${JSON.stringify(stored)}`,
    );
  }
  if (version === current) return;
  if (version > current) {
    throw storeError(
      `the state store "${path}" has schema ${version}, newer than this agent's ${current}: run an agent that knows schema ${version}, or move the store away`,
    );
  }
  for (let v = version; v < current; v++) {
    if (migrations[v] === undefined) {
      throw storeError(
        `the state store "${path}" has schema ${version} and there is no migration from schema ${v} to ${v + 1}`,
      );
    }
  }
  const context: MigrationContext = {
    get: (key) => db.get(key) as unknown,
    put: (key, value) => {
      db.putSync(key, value);
    },
    remove: (key) => {
      db.removeSync(key);
    },
    keys: (prefix) => [...db.getKeys({ start: prefix, end: `${prefix}\uffff` })].map(String),
  };
  // A migration may rewrite every page: room for the whole file again.
  const release = admit(
    `migrating the state store "${path}" from schema ${version} to ${current}`,
    writeBytes(statSync(join(path, 'data.mdb')).size),
  );
  try {
    // One synchronous transaction: the store is at the old schema or the new one, never between.
    db.transactionSync(() => {
      for (let v = version; v < current; v++) (migrations[v] as Migration)(context);
      db.putSync(SCHEMA_KEY, current);
    });
  } catch (error) {
    throw storeError(
      `migrating the state store "${path}" from schema ${version} to ${current} failed: ${messageOf(error)}`,
      error,
    );
  } finally {
    release();
  }
  // transactionSync commits with LMDB's own sync; db.flushed covers the overlapped case too.
  await db.flushed;
}
