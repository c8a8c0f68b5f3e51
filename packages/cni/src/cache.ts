import { rmSync } from 'node:fs';
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import * as t from 'io-ts';
import { isStaleTemporary, listTemporaries, writeFileDurably } from '@allocnet/base/files';
import { decode } from './decode.js';
import { CniError } from './errors.js';
import type { CniArgs } from './validate.js';

/** One attachment as the cache records it (libcni's cniCacheV1 document, decoded). */
export interface CacheEntry {
  readonly networkName: string;
  readonly containerId: string;
  readonly ifName: string;
  readonly netns: string | undefined;
  readonly cniArgs: CniArgs;
  readonly capabilityArgs: Readonly<Record<string, unknown>>;
  /** The network configuration list, as JSON text. */
  readonly config: string;
  /** The final ADD result as the last plugin printed it (absent in an ADD-in-progress marker). */
  readonly result: unknown;
}

const CACHE_KIND = 'cniCacheV1';
const PENDING_KIND = 'allocnetAddInProgressV1';

const Document = t.intersection([
  t.type({ kind: t.string, containerId: t.string, ifName: t.string, networkName: t.string }),
  t.partial({
    config: t.string,
    netns: t.string,
    cniArgs: t.array(t.tuple([t.string, t.string])),
    capabilityArgs: t.record(t.string, t.unknown),
    result: t.unknown,
  }),
]);

/**
 * The runtime's files under `cacheDir`:
 * - `results/<network>-<containerId>-<ifName>`: the final ADD result, in libcni's cniCacheV1 layout
 *   (directory 0700, file 0600, `config` base64), so libcni-based tools read it too. Written after
 *   an ADD succeeds, removed after a DEL succeeds.
 * - `allocnet/adding/<network>-<containerId>-<ifName>`: the same document, written and synced
 *   before the first plugin of an ADD runs and removed when the ADD has finished (either way);
 *   one still there after a crash names an attachment to DEL.
 * Every write goes to a temporary file (`.<name>.<pid>.<8 hex>.tmp`) that is synced and renamed
 * into place, and the directory is synced (`writeFileDurably`, @allocnet/base/files), so a crash
 * leaves the old file or the new one, never a torn one. A write that fails removes its temporary;
 * only a writer killed mid-write leaves one (`staleTemporaries` finds those).
 */
export interface CniCache {
  readonly dir: string;
  writeResult(entry: CacheEntry): Promise<void>;
  /** The cached result, undefined when there is none; a file that cannot be read throws `cache`. */
  readResult(network: string, containerId: string, ifName: string): Promise<CacheEntry | undefined>;
  removeResult(network: string, containerId: string, ifName: string): Promise<void>;
  /** Every readable result file (GC's view of what is attached). */
  listResults(): Promise<CacheEntry[]>;
  markAdding(entry: CacheEntry): Promise<void>;
  clearAdding(network: string, containerId: string, ifName: string): Promise<void>;
  /** ADDs that started and never finished, oldest file name first. */
  listAdding(): Promise<CacheEntry[]>;
  /**
   * Paths of the temporaries in `dirs` whose writer is gone (`isStaleTemporary`): a write killed
   * midway left them. A live writer's (a write in flight) is not one.
   */
  staleTemporaries(): Promise<string[]>;
  /** Removes a file `staleTemporaries` gave (gone already is fine). */
  removeTemporary(path: string): Promise<void>;
}

function fileName(network: string, containerId: string, ifName: string): string {
  return `${network}-${containerId}-${ifName}`;
}

function cacheError(message: string, cause?: unknown): CniError {
  return new CniError(message, { code: 'cache', specCode: 5, msg: message, cause });
}

function encode(kind: string, entry: CacheEntry): string {
  return JSON.stringify({
    kind,
    containerId: entry.containerId,
    config: Buffer.from(entry.config).toString('base64'),
    ifName: entry.ifName,
    networkName: entry.networkName,
    ...(entry.netns === undefined ? {} : { netns: entry.netns }),
    ...(entry.cniArgs.length === 0 ? {} : { cniArgs: entry.cniArgs }),
    ...(Object.keys(entry.capabilityArgs).length === 0
      ? {}
      : { capabilityArgs: entry.capabilityArgs }),
    ...(entry.result === undefined ? {} : { result: entry.result }),
  });
}

function parse(file: string, text: string, kind: string): CacheEntry {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw cacheError(
      `cache file ${JSON.stringify(file)} is not JSON: ${(error as Error).message}`,
      error,
    );
  }
  const decoded = decode(Document, value);
  if (!decoded.ok)
    throw cacheError(
      `cache file ${JSON.stringify(file)}: ${decoded.problem.field} ${decoded.problem.problem}`,
    );
  const doc = decoded.value;
  if (doc.kind !== kind)
    throw cacheError(
      `cache file ${JSON.stringify(file)} is of kind ${JSON.stringify(doc.kind)}, not ${kind}`,
    );
  return {
    networkName: doc.networkName,
    containerId: doc.containerId,
    ifName: doc.ifName,
    netns: doc.netns,
    cniArgs: doc.cniArgs ?? [],
    capabilityArgs: doc.capabilityArgs ?? {},
    config: Buffer.from(doc.config ?? '', 'base64').toString('utf8'),
    result: doc.result,
  };
}

async function readEntry(file: string, kind: string): Promise<CacheEntry | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw cacheError(
      `cache file ${JSON.stringify(file)} cannot be read: ${(error as Error).message}`,
      error,
    );
  }
  return parse(file, text, kind);
}

async function listDir(dir: string, kind: string): Promise<CacheEntry[]> {
  let names: string[];
  try {
    names = (await readdir(dir)).filter((n) => !n.startsWith('.')).sort();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw cacheError(
      `cache directory ${JSON.stringify(dir)} cannot be read: ${(error as Error).message}`,
      error,
    );
  }
  const entries: CacheEntry[] = [];
  for (const name of names) {
    try {
      const entry = await readEntry(join(dir, name), kind);
      if (entry !== undefined) entries.push(entry);
    } catch (error) {
      // A file another tool wrote in another form is not ours to read; skip it, as libcni does.
      if (!(error instanceof CniError)) throw error;
    }
  }
  return entries;
}

/**
 * Synchronous like the cheap calls of `writeFileDurably`: unlinking a small file costs less than the
 * trip through the thread pool would on the DEL path.
 */
function remove(file: string): Promise<void> {
  try {
    rmSync(file, { force: true });
    return Promise.resolve();
  } catch (error) {
    return Promise.reject(
      cacheError(
        `cache file ${JSON.stringify(file)} cannot be removed: ${(error as Error).message}`,
        error,
      ),
    );
  }
}

/** The cache under `dir` (libcni's default is /var/lib/cni). */
export function createCniCache(dir: string): CniCache {
  const results = join(dir, 'results');
  const adding = join(dir, 'allocnet', 'adding');
  const durably = async (what: string, name: string, text: string, into: string) => {
    try {
      await writeFileDurably(join(into, name), text);
    } catch (error) {
      throw cacheError(`${what}: ${(error as Error).message}`, error);
    }
  };
  return {
    dir,
    writeResult: (e) => {
      const name = fileName(e.networkName, e.containerId, e.ifName);
      return durably(`writing the cached result of ${name}`, name, encode(CACHE_KIND, e), results);
    },
    readResult: (n, c, i) => readEntry(join(results, fileName(n, c, i)), CACHE_KIND),
    removeResult: (n, c, i) => remove(join(results, fileName(n, c, i))),
    listResults: () => listDir(results, CACHE_KIND),
    markAdding: (e) => {
      const name = fileName(e.networkName, e.containerId, e.ifName);
      return durably(
        `writing the ADD marker of ${name}`,
        name,
        encode(PENDING_KIND, { ...e, result: undefined }),
        adding,
      );
    },
    clearAdding: (n, c, i) => remove(join(adding, fileName(n, c, i))),
    listAdding: () => listDir(adding, PENDING_KIND),
    staleTemporaries: async () => {
      const found: string[] = [];
      for (const d of [results, adding])
        try {
          for (const temporary of await listTemporaries(d))
            if (isStaleTemporary(temporary)) found.push(temporary.path);
        } catch (error) {
          throw cacheError(
            `cache directory ${JSON.stringify(d)} cannot be read: ${(error as Error).message}`,
            error,
          );
        }
      return found;
    },
    removeTemporary: (path) => remove(path),
  };
}
