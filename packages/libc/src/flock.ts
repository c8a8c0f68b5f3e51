// flock(2), which Node does not have: the agent's data-dir lock, held for the agent's life so
// that a second agent cannot open the same state (issue 16), and the exclusive lock of
// allocnet-cni's DEL queue (@allocnet/cni-server), which the Go plugin takes shared.
import { closeSync, ftruncateSync, openSync, readFileSync, writeSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { bindLibc } from './bind.js';

const LOCK_EX = 2;
const LOCK_NB = 4;
const LOCK_UN = 8;
const EWOULDBLOCK = 11;

const load = bindLibc<{ readonly flock: (fd: number, operation: number) => number }>({
  flock: 'int flock(int fd, int operation)',
});

/** A lock this process holds; `release` unlocks and closes it (a process's exit does too). */
export interface HeldLock {
  readonly fd: number;
  release(): void;
}

/**
 * Takes the exclusive lock on `path` (created 0600 if missing) without waiting: undefined when
 * another process holds it. Throws for any other failure.
 */
export function tryLockExclusive(path: string): HeldLock | undefined {
  const { flock, errno } = load();
  const fd = openSync(path, 'a+', 0o600);
  if (flock(fd, LOCK_EX | LOCK_NB) === 0) {
    let released = false;
    return {
      fd,
      release() {
        if (released) return;
        released = true;
        flock(fd, LOCK_UN);
        closeSync(fd);
      },
    };
  }
  const err = errno();
  closeSync(fd);
  if (err === EWOULDBLOCK) return undefined;
  throw new Error(`flock on ${path} failed (errno ${err})`);
}

/** The exclusive lock on `path`, polling every 10 ms (never blocking the event loop) up to `timeoutMs`. */
export async function lockExclusive(path: string, timeoutMs: number): Promise<HeldLock> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const held = tryLockExclusive(path);
    if (held !== undefined) return held;
    if (Date.now() > deadline) throw new Error(`the lock ${path} stayed held for ${timeoutMs} ms`);
    await sleep(10);
  }
}

/** Replaces what a held lock file says (who holds it, for the next one who finds it taken). */
export function writeHolder(lock: HeldLock, text: string): void {
  ftruncateSync(lock.fd, 0);
  writeSync(lock.fd, text, 0);
}

/** What a lock file says about its holder ('' when it cannot be read). */
export function readHolder(path: string): string {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    // Missing or unreadable: the caller's message says the lock is held, by someone unknown.
    return '';
  }
}
