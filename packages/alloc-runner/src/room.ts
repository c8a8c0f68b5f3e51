// The state store's room on disk: every store write is admitted here first, so that LMDB's own
// page writes never meet a full disk.
//
// Why: when a page write fails, lmdb-js 3.5.6's LMDB (`mdb_page_flush`) formats its error with
// `sprintf` into `malloc(100)`, printing iovec lengths it never set. When that garbage is long, the
// text overruns the heap and glibc aborts the agent (docs/reliability.md, "A full disk"). So a
// write must be refused before LMDB tries it, not after it failed:
//
// - the gate: a write that may need more bytes than the filesystem has free for this process
//   (statfs: the free blocks for root, which ext4 lets use the blocks it keeps back, what `df`
//   calls Avail for anyone else) is refused at once;
// - the room ahead: the blocks after the end of LMDB's data file are allocated ahead
//   (fallocate(2) with FALLOC_FL_KEEP_SIZE) to cover every admitted write still in flight, plus
//   a lead. LMDB only ever writes pages inside its file or just past its end, so its pwrites land
//   on blocks that are already there and cannot fail for lack of space, even when something else
//   fills the disk between the gate and the commit, or when a quota (which statfs does not show)
//   is what runs out: then the allocation is what fails, and the write is refused.
//
// Concurrency: admit and release run on the event loop, synchronously; LMDB's commits run on
// lmdb-js's write thread. A write holds its bytes from admit until its promise settles, which is
// after its transaction was committed or failed, so the room never shrinks under a commit.
import { closeSync, fstatSync, openSync, statfsSync } from 'node:fs';
import { getSystemErrorName } from 'node:util';
import { join } from 'node:path';
import { allocateAhead } from '@allocnet/libc';

/** What a write may need: an upper bound on how far it can grow LMDB's file. */
export const PAGE_BYTES = 4096;
/** Pages besides a value's own that one write can dirty: its leaf, branches, the free list's. */
const PAGES_PER_WRITE = 8;
/** What a transaction can add besides its writes (free-list pages of a large commit). */
const SLACK_BYTES = 64 * 1024;
/** Allocated ahead past what is needed, so that most writes make no fallocate call. */
const LEAD_BYTES = 256 * 1024;

const ENOSPC = 28;
const EDQUOT = 122;
/** fallocate is not supported by the filesystem (or the kernel). */
const UNSUPPORTED = new Set([95, 38]); // EOPNOTSUPP, ENOSYS

/** The most a write of a value of `valueBytes` (key and value, encoded) can grow LMDB's file. */
export function writeBytes(valueBytes: number): number {
  return (Math.ceil(valueBytes / PAGE_BYTES) + PAGES_PER_WRITE) * PAGE_BYTES;
}

/** Why a write was refused before LMDB saw it. */
export interface NoRoom {
  /** ENOSPC or EDQUOT when there is no room; another name when allocating failed otherwise. */
  readonly code: string;
  readonly message: string;
}

export interface StoreRoom {
  /**
   * Before a write that may grow LMDB's file by `bytes`: undefined when it may go on (its bytes
   * are then held until `release(bytes)`), or why it may not. Never throws.
   */
  admit(bytes: number): NoRoom | undefined;
  release(bytes: number): void;
  /**
   * False where the filesystem cannot allocate ahead (fallocate unsupported): writes are then
   * only gated, and one that meets a disk filled after the gate reaches LMDB's failing write.
   */
  readonly ahead: () => boolean;
  close(): void;
}

/** The system calls `openStoreRoom` makes; the real ones by default. */
export interface RoomSystem {
  /** Bytes the filesystem of `path` has free for this process (`freeFor`). */
  available(path: string): number;
  /** fallocate(fd, FALLOC_FL_KEEP_SIZE, offset, length): 0 or the errno. */
  allocate(fd: number, offset: number, length: number): number;
  /** The file's size. */
  size(fd: number): number;
}

/**
 * Bytes a filesystem has free for a process of effective uid `euid`: every free block for root
 * (ext4 lets root write into the blocks it keeps back, 5% by default; XFS keeps none, so its two
 * counts agree), the blocks available to anyone for others (`df`'s Avail). Should root be denied
 * them all the same (another `resuid`), the allocation ahead is what fails, and the write is
 * refused there.
 */
export function freeFor(
  stats: { readonly bavail: number; readonly bfree: number; readonly bsize: number },
  euid: number | undefined,
): number {
  return (euid === 0 ? stats.bfree : stats.bavail) * stats.bsize;
}

export const realRoomSystem: RoomSystem = {
  available: (path) => freeFor(statfsSync(path), process.geteuid?.()),
  allocate: allocateAhead,
  size: (fd) => fstatSync(fd).size,
};

function describe(errno: number): NoRoom {
  if (errno === ENOSPC) return { code: 'ENOSPC', message: 'No space left on device' };
  if (errno === EDQUOT) return { code: 'EDQUOT', message: 'Disk quota exceeded' };
  let code = `errno ${errno}`;
  try {
    code = getSystemErrorName(-errno);
  } catch {
    // An errno Node has no name for: the number says it.
  }
  return { code, message: code };
}

/**
 * Opens LMDB's data file (`<storePath>/data.mdb`, which lmdb-js has created) and its lock file to
 * keep their room; the caller closes it after the store. The lock file, which LMDB writes through
 * a memory map (where a missing block is a SIGBUS, not an error), gets all its blocks at once;
 * failing that (a full disk at start) is left for later writes to meet at the gate.
 */
export function openStoreRoom(storePath: string, system: RoomSystem = realRoomSystem): StoreRoom {
  const fd = openSync(join(storePath, 'data.mdb'), 'r+');
  let lock: number | undefined;
  try {
    lock = openSync(join(storePath, 'lock.mdb'), 'r+');
    // Nothing to do when it fails: see the comment above.
    system.allocate(lock, 0, system.size(lock));
  } catch {
    // lmdb-js may keep its locks elsewhere (a future version): the data file is what matters.
  } finally {
    if (lock !== undefined) closeSync(lock);
  }

  let ahead = true;
  /** The end of the blocks allocated ahead (0: nothing known yet). */
  let allocatedEnd = 0;
  /** Bytes held by admitted writes that have not settled. */
  let held = 0;
  let closed = false;

  return {
    admit(bytes) {
      let free: number;
      try {
        free = system.available(storePath);
      } catch (error) {
        const code = (error as { code?: unknown }).code;
        return { code: typeof code === 'string' ? code : 'statfs', message: String(error) };
      }
      if (free < bytes) {
        return {
          code: 'ENOSPC',
          message: `No space left on device: ${free} bytes free, and a write may need ${bytes}`,
        };
      }
      if (ahead && !closed) {
        const size = system.size(fd);
        const need = size + held + bytes + SLACK_BYTES;
        if (need > allocatedEnd) {
          const end = need + LEAD_BYTES;
          const errno = system.allocate(fd, size, end - size);
          if (UNSUPPORTED.has(errno)) ahead = false;
          else if (errno !== 0) {
            const { code, message } = describe(errno);
            return {
              code,
              message: `${message}: allocating ${end - size} bytes after the store's ${size} failed`,
            };
          } else allocatedEnd = end;
        }
      }
      held += bytes;
      return undefined;
    },
    release(bytes) {
      held = Math.max(0, held - bytes);
    },
    ahead: () => ahead,
    close() {
      if (closed) return;
      closed = true;
      closeSync(fd);
    },
  };
}
