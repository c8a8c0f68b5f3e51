// Durable, atomic file writes, and the temporaries they leave: the one mechanism of every
// package that writes a state file (the CNI cache's results and ADD markers, the agent's ready
// file). Its own entry, `@allocnet/base/files`: the main entry stays free of I/O.
//
// A write goes to a temporary beside the target, `.<name>.<pid>.<8 hex>.tmp`, which is written,
// synced, closed and renamed over the target; then the directory is synced. When any step fails
// (a full disk fails the write or the sync), the temporary is removed and the first error thrown,
// so a failed write leaves the old file and nothing else. Only a process killed between the open
// and the rename leaves a temporary behind: its name says which process wrote it, and
// `isStaleTemporary` tells whether that writer is gone (the agent's start sweep and the leak
// report use it; a live writer's temporary is a write in flight).
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  fdatasync,
  fsync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { readdir, stat, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { promisify } from 'node:util';

/** The calls a write makes: node:fs by default; tests fail one of them. */
export interface WriteFs {
  openSync(path: string, flags: string, mode: number): number;
  writeSync(fd: number, text: string): number;
  fdatasync(fd: number): Promise<void>;
  fsync(fd: number): Promise<void>;
  closeSync(fd: number): void;
  renameSync(from: string, to: string): void;
  unlinkSync(path: string): void;
}

/**
 * The cheap calls (open, write, rename, close) are synchronous: state files are small, and a
 * round trip through libuv's thread pool for each would cost a CNI ADD more than the calls
 * themselves. The two syncs go through the thread pool: they wait on the disk, which plugins of
 * concurrent setups keep busy, and a synchronous sync would stall the whole process that long.
 */
export const nodeWriteFs: WriteFs = {
  openSync,
  writeSync: (fd, text) => writeSync(fd, text),
  fdatasync: promisify(fdatasync),
  fsync: promisify(fsync),
  closeSync,
  renameSync,
  unlinkSync,
};

export interface WriteFileOptions {
  /** The file's mode. Default 0600. */
  readonly mode?: number;
  /** The mode of directories made on the way (the umask applies). Default 0700. */
  readonly dirMode?: number;
  readonly fs?: WriteFs;
}

/** The temporary a write of `target` by process `pid` uses (`random`: 8 hex digits). */
export function temporaryPath(target: string, pid: number, random: string): string {
  return join(dirname(target), `.${basename(target)}.${pid}.${random}.tmp`);
}

const TEMPORARY = /^\.(.+)\.([1-9][0-9]*)\.[0-9a-f]{8}\.tmp$/;

/** What a temporary's name says: the file it was to become (its name) and its writer's pid. */
export function parseTemporary(name: string): { target: string; pid: number } | undefined {
  const match = TEMPORARY.exec(name);
  if (match === null) return undefined;
  return { target: match[1] ?? '', pid: Number(match[2]) };
}

/**
 * Runs `work` on `fd`, then closes it whatever happened; throws the first error of the two (a
 * `finally` would let the close's error replace the work's).
 */
async function thenClose(fs: WriteFs, fd: number, work: () => Promise<void>): Promise<void> {
  let first: { readonly error: unknown } | undefined;
  try {
    await work();
  } catch (error) {
    first = { error };
  }
  try {
    fs.closeSync(fd);
  } catch (error) {
    first ??= { error };
  }
  if (first !== undefined) throw first.error;
}

/**
 * Writes `text` to `path` atomically and durably (see the top of this file), making its
 * directory when missing. On failure nothing of the write is left, and the error of the first
 * step that failed is thrown as node:fs gave it (`code` `ENOSPC` on a full disk).
 */
export async function writeFileDurably(
  path: string,
  text: string,
  options: WriteFileOptions = {},
): Promise<void> {
  const fs = options.fs ?? nodeWriteFs;
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: options.dirMode ?? 0o700 });
  const temporary = temporaryPath(path, process.pid, randomBytes(4).toString('hex'));
  const fd = fs.openSync(temporary, 'w', options.mode ?? 0o600);
  try {
    await thenClose(fs, fd, async () => {
      fs.writeSync(fd, text);
      await fs.fdatasync(fd);
    });
    fs.renameSync(temporary, path);
  } catch (error) {
    try {
      fs.unlinkSync(temporary);
    } catch {
      // The first error is the one to report; a temporary that could not go either is left to
      // the agent's start sweep and `allocnet leaks`, which find it by its name.
    }
    throw error;
  }
  const dirFd = fs.openSync(dir, 'r', 0);
  await thenClose(fs, dirFd, () => fs.fsync(dirFd));
}

/** A temporary found in a directory. */
export interface Temporary {
  readonly path: string;
  /** The name of the file it was to become. */
  readonly target: string;
  /** Its writer's pid. */
  readonly pid: number;
  /** When it was last written. */
  readonly mtimeMs: number;
}

/**
 * The temporaries in `dir` (none when it does not exist), of `target` only when given. One that
 * goes while it is looked at is skipped.
 */
/** The names in `dir`, unsorted; a missing directory has none. */
export async function namesInDir(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

export async function listTemporaries(
  dir: string,
  options: { readonly target?: string } = {},
): Promise<Temporary[]> {
  const found: Temporary[] = [];
  for (const name of (await namesInDir(dir)).sort()) {
    const parsed = parseTemporary(name);
    if (parsed === undefined || (options.target !== undefined && parsed.target !== options.target))
      continue;
    const path = join(dir, name);
    try {
      found.push({ path, ...parsed, mtimeMs: (await stat(path)).mtimeMs });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
  return found;
}

/** Where a process's start time is read: `/proc`; tests give their own. */
export interface ProcessTable {
  /**
   * When `pid` started (ms since the epoch), or undefined when there is no such process (or only
   * its zombie).
   */
  startedAtMs(pid: number): number | undefined;
}

/** USER_HZ: the unit of /proc/<pid>/stat's start time, 100 on every architecture Linux runs Node. */
const TICKS_PER_SECOND = 100;

/** /proc's view of the processes of this pid namespace. */
export const procProcessTable: ProcessTable = {
  startedAtMs(pid) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ESRCH') return undefined;
      throw error;
    }
    // Fields after the command (which may hold spaces and parentheses): state is field 3, the
    // start time (ticks since boot) field 22.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // A zombie (killed, not yet waited for) writes nothing any more.
    if (fields[0] === 'Z' || fields[0] === 'X') return undefined;
    const ticks = Number(fields[19]);
    const btime = /^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'utf8'))?.[1];
    if (btime === undefined || !Number.isFinite(ticks)) return Number.NEGATIVE_INFINITY;
    return Number(btime) * 1000 + (ticks * 1000) / TICKS_PER_SECOND;
  },
};

/**
 * How much later than a temporary's last write its pid's process may seem to have started and
 * still be its writer: /proc/stat's boot time is in whole seconds.
 */
const START_SLACK_MS = 2000;

/**
 * Whether a temporary's writer is gone: not this process, and no process has its pid, or the one
 * that has it started after the temporary was last written (the pid was used again, after a
 * reboot say). A temporary of a live writer is a write in flight.
 */
export function isStaleTemporary(
  temporary: Pick<Temporary, 'pid' | 'mtimeMs'>,
  processes: ProcessTable = procProcessTable,
): boolean {
  if (temporary.pid === process.pid) return false;
  const started = processes.startedAtMs(temporary.pid);
  return started === undefined || started > temporary.mtimeMs + START_SLACK_MS;
}

/**
 * Removes the stale temporaries of `dirs` (each of its `target` only when given); resolves the
 * paths removed. One gone meanwhile is not counted.
 */
export async function removeStaleTemporaries(
  dirs: readonly { readonly dir: string; readonly target?: string }[],
  processes: ProcessTable = procProcessTable,
): Promise<string[]> {
  const removed: string[] = [];
  for (const { dir, target } of dirs) {
    const found = await listTemporaries(dir, target === undefined ? {} : { target });
    for (const t of found) {
      if (!isStaleTemporary(t, processes)) continue;
      try {
        await unlink(t.path);
        removed.push(t.path);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      }
    }
  }
  return removed;
}
