import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { lockExclusive, readHolder, tryLockExclusive, writeHolder } from './flock.js';

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'allocnet-libc-flock-'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('flock', () => {
  it('takes the exclusive lock once: a second open file is refused until the first releases', async () => {
    const path = join(dir, 'agent.lock');
    const first = tryLockExclusive(path);
    expect(first).toBeDefined();
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    // flock(2) locks an open file description: a second open, even in this process, waits.
    expect(tryLockExclusive(path)).toBeUndefined();
    first?.release();
    first?.release();
    const second = tryLockExclusive(path);
    expect(second).toBeDefined();
    second?.release();
  });

  it('says who holds a lock, and nothing for a file that is not there', () => {
    const path = join(dir, 'agent.lock');
    const held = tryLockExclusive(path);
    if (held === undefined) throw new Error('the lock was not taken');
    writeHolder(held, 'pid 1\n');
    writeHolder(held, 'pid 2\n');
    expect(readHolder(path)).toBe('pid 2');
    held.release();
    expect(readHolder(join(dir, 'missing'))).toBe('');
  });

  it('waits for the lock, polling, up to the timeout', async () => {
    const path = join(dir, '.lock');
    const held = tryLockExclusive(path);
    await expect(lockExclusive(path, 30)).rejects.toThrow(`the lock ${path} stayed held for 30 ms`);
    const waiting = lockExclusive(path, 5_000);
    held?.release();
    (await waiting).release();
  });
});
