// The `allocnet` command's code compiled once, not at every start: V8's code cache for the
// CommonJS bundle of the command (dist/allocnet.cjs, scripts/bundle.mjs), kept in a directory of
// this user's (docs/cli.md, "How the command starts"). Node 20 has no cache of its own for a
// module's compiled code (`module.enableCompileCache` came with Node 22.1), so the bundle is
// compiled here as Node compiles a CommonJS module, through `vm.Script`, given the cache's bytes.
//
// What the cache holds is every function compiled when it was written, at the end of a command
// (main.ts calls `save` at the process's exit).
// A command whose code was not in it yet (its key, `commandKey`, not among those it was written
// after) writes it again at its end: then it holds that command's code too. So the first run of
// each command, after an install or an upgrade, compiles as before and pays the write (a few ms).
// V8 refuses a cache made by another V8, or with other flags (`cachedDataRejected`): the bundle
// is then compiled from its source, and the cache written anew.
//
// Nothing here may fail a command: a cache that cannot be read, or written (no such directory, a
// full disk, a read-only file system), is done without, silently. A cache is code this process
// runs: one that another user could have written is not read (`ownedBy`).
import { createHash } from 'node:crypto';
import {
  closeSync,
  constants,
  fstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  renameSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import type { Stats } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Script } from 'node:vm';

/** The directory of the root user's cache (`ALLOCNET_CLI_CACHE_DIR` says another). */
export const ROOT_CACHE_DIR = '/var/cache/allocnet';
/** Commands a cache is written after, at most: more keys (typos of commands) write no more. */
export const MAX_KEYS = 32;
/** The start of a cache file: then the length of its keys' JSON (u32 LE), the JSON, V8's bytes. */
const MAGIC = Buffer.from('ANCC1\n');
const PREFIX = 'cli-';
const SUFFIX = '.v8cache';

/**
 * Where this user's cache is: `ALLOCNET_CLI_CACHE_DIR` when set (empty or `off`: no cache), else
 * /var/cache/allocnet for root, else `$XDG_CACHE_HOME/allocnet` (default ~/.cache/allocnet).
 */
export function cacheDirOf(
  env: NodeJS.ProcessEnv,
  uid: number | undefined,
  home: string,
): string | undefined {
  const set = env.ALLOCNET_CLI_CACHE_DIR;
  if (set !== undefined) return set === '' || set === 'off' ? undefined : set;
  if (uid === 0) return ROOT_CACHE_DIR;
  const xdg = env.XDG_CACHE_HOME;
  const base = xdg !== undefined && xdg.startsWith('/') ? xdg : join(home, '.cache');
  return join(base, 'allocnet');
}

/**
 * Which command `argv` runs, as far as the code it runs goes: its first words (`alloc list`,
 * `leaks`), and `local` when it runs `--local`. Anything else (a typo, a path) is `other`.
 */
export function commandKey(argv: readonly string[]): string {
  const words: string[] = [];
  for (const arg of argv.slice(0, 2)) {
    if (arg.startsWith('-')) break;
    words.push(arg);
  }
  if (argv.includes('--local')) words.push('local');
  const key = words.join(' ');
  return /^[a-z0-9 -]{0,48}$/.test(key) ? key : 'other';
}

/** Whether `stats` are this user's, and no one else may write there. */
function ownedBy(stats: Stats, uid: number | undefined): boolean {
  return (uid === undefined || stats.uid === uid) && (stats.mode & 0o022) === 0;
}

interface CacheFile {
  readonly keys: readonly string[];
  readonly data: Buffer;
}

/** The cache file at `path`, if it is there, this user's, and whole. */
function readCache(path: string, uid: number | undefined): CacheFile | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch {
    return undefined; // none yet (or not a file to follow)
  }
  try {
    if (!ownedBy(fstatSync(fd), uid) || !ownedBy(statSync(dirname(path)), uid)) return undefined;
    const bytes = readFileSync(fd);
    if (!bytes.subarray(0, MAGIC.length).equals(MAGIC)) return undefined;
    const length = bytes.readUInt32LE(MAGIC.length);
    const start = MAGIC.length + 4;
    const keys: unknown = JSON.parse(bytes.toString('utf8', start, start + length));
    if (!Array.isArray(keys) || !keys.every((k) => typeof k === 'string')) return undefined;
    return { keys, data: bytes.subarray(start + length) };
  } catch {
    return undefined; // truncated, or not ours to read
  } finally {
    closeSync(fd);
  }
}

/**
 * Writes the cache at `path` (a file of its own, then renamed: a reader sees the old file or the
 * new one), and removes the caches of other builds beside it.
 */
function writeCache(path: string, uid: number | undefined, keys: readonly string[], data: Buffer) {
  const dir = dirname(path);
  const temporary = `${path}.${process.pid}.tmp`;
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (!ownedBy(statSync(dir), uid)) return;
    const json = Buffer.from(JSON.stringify(keys));
    const length = Buffer.alloc(4);
    length.writeUInt32LE(json.length);
    writeFileSync(temporary, Buffer.concat([MAGIC, length, json, data]), { mode: 0o600 });
    renameSync(temporary, path);
    for (const name of readdirSync(dir))
      if (name.startsWith(PREFIX) && name.endsWith(SUFFIX) && join(dir, name) !== path)
        unlinkSync(join(dir, name));
  } catch {
    try {
      unlinkSync(temporary);
    } catch {
      // never made
    }
  }
}

/** What `loadBundle` did with the cache, for tests and the curious. */
export type CacheUse = 'off' | 'none' | 'used' | 'rejected';

/** A bundle run by `loadBundle`. */
export interface LoadedBundle {
  readonly exports: unknown;
  readonly cache: CacheUse;
  /**
   * Writes the cache when it did not hold the code of this command (or none was read): what
   * this process compiled by now goes in. Called at the process's exit (main.ts); never throws.
   */
  readonly save: () => void;
}

/**
 * Runs the CommonJS bundle `file` as Node runs a CommonJS module, compiled from the cache in
 * `dir` when it holds this bundle's code for this Node, and gives its exports; `key` names the
 * command the process runs (`commandKey`).
 */
export function loadBundle(
  file: string,
  key: string,
  dir: string | undefined,
  uid: number | undefined,
): LoadedBundle {
  const source = readFileSync(file, 'utf8');
  // The build and the Node it runs on, by the cache's name: V8 checks its own version and flags,
  // but tells sources apart by their length only.
  const stamp = createHash('sha1')
    .update(`${process.version} ${process.arch}\0`)
    .update(source)
    .digest('hex')
    .slice(0, 20);
  const path = dir === undefined ? undefined : join(dir, `${PREFIX}${stamp}${SUFFIX}`);
  const cached = path === undefined ? undefined : readCache(path, uid);
  const script = new Script(
    `(function (exports, require, module, __filename, __dirname) {${source}\n})`,
    { filename: file, ...(cached === undefined ? {} : { cachedData: cached.data }) },
  );
  const cache: CacheUse =
    path === undefined
      ? 'off'
      : cached === undefined
        ? 'none'
        : script.cachedDataRejected === true
          ? 'rejected'
          : 'used';
  const keys = cache === 'used' ? (cached?.keys ?? []) : [];
  let saved = path === undefined || keys.includes(key) || keys.length >= MAX_KEYS;
  const save = () => {
    if (saved || path === undefined) return;
    saved = true;
    try {
      writeCache(path, uid, [...keys, key], script.createCachedData());
    } catch {
      // not written: the next run compiles and tries again
    }
  };
  const wrapper = script.runInThisContext() as (
    exports: unknown,
    require: NodeJS.Require,
    module: { exports: unknown },
    filename: string,
    dirname: string,
  ) => void;
  const module = { exports: {} as unknown };
  wrapper.call(module.exports, module.exports, createRequire(file), module, file, dirname(file));
  return { exports: module.exports, cache, save };
}
