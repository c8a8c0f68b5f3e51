import { closeSync, openSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freeFor, openStoreRoom, writeBytes } from './room.js';
import type { RoomSystem } from './room.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'allocnet-runner-room-'));
  await mkdir(join(dir, 'state'));
  for (const name of ['data.mdb', 'lock.mdb']) closeSync(openSync(join(dir, 'state', name), 'w'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A filesystem with `free` bytes and a data file of `size`; records each allocation. */
function fakeSystem(state: { free: number; size: number; errno?: number }) {
  const calls: [number, number][] = [];
  const system: RoomSystem = {
    available: () => state.free,
    allocate: (_fd, offset, length) => {
      calls.push([offset, length]);
      return state.errno ?? 0;
    },
    size: () => state.size,
  };
  return { system, calls };
}

const KIB = 1024;

describe('openStoreRoom', () => {
  it('allocates ahead of the data file for every admitted write in flight, plus a lead', () => {
    const state = { free: 1 << 30, size: 32 * KIB };
    const { system, calls } = fakeSystem(state);
    const room = openStoreRoom(join(dir, 'state'), system);
    // The lock file's blocks first: all of them (the fake's size is the same for both files).
    expect(calls).toEqual([[0, 32 * KIB]]);
    calls.length = 0;

    expect(room.admit(writeBytes(5000))).toBeUndefined();
    // 2 pages of value + 8 = 40 KiB; need 32 + 40 + 64 slack = 136 KiB, allocated to 136 + 256.
    expect(writeBytes(5000)).toBe(40 * KIB);
    expect(calls).toEqual([[32 * KIB, (40 + 64 + 256) * KIB]]);
    // Within what is allocated: no call.
    expect(room.admit(writeBytes(0))).toBeUndefined();
    expect(calls).toHaveLength(1);
    // Held writes add up: 40 + 32 + 300 KiB in flight passes the end, so it grows.
    expect(room.admit(300 * KIB)).toBeUndefined();
    expect(calls[1]).toEqual([32 * KIB, (40 + 32 + 300 + 64 + 256) * KIB]);
    room.release(300 * KIB);
    room.release(writeBytes(0));
    room.release(writeBytes(5000));
    // The file grew; what is allocated still covers the next write.
    state.size = 100 * KIB;
    expect(room.admit(writeBytes(0))).toBeUndefined();
    expect(calls).toHaveLength(2);
    room.close();
  });

  it('refuses a write larger than the free space before allocating anything', () => {
    const { system, calls } = fakeSystem({ free: 12 * KIB, size: 32 * KIB });
    const room = openStoreRoom(join(dir, 'state'), system);
    calls.length = 0;
    expect(room.admit(writeBytes(100))).toEqual({
      code: 'ENOSPC',
      message: 'No space left on device: 12288 bytes free, and a write may need 36864',
    });
    expect(calls).toEqual([]);
    room.close();
  });

  it('refuses a write whose room cannot be allocated, naming the errno, and holds nothing for it', () => {
    const state: { free: number; size: number; errno?: number } = {
      free: 1 << 30,
      size: 8 * KIB,
      errno: 122,
    };
    const { system, calls } = fakeSystem(state);
    const room = openStoreRoom(join(dir, 'state'), system);
    calls.length = 0;
    expect(room.admit(writeBytes(0))).toEqual({
      code: 'EDQUOT',
      message: `Disk quota exceeded: allocating ${(32 + 64 + 256) * KIB} bytes after the store's ${8 * KIB} failed`,
    });
    state.errno = 28;
    expect(room.admit(writeBytes(0))?.code).toBe('ENOSPC');
    state.errno = 5;
    expect(room.admit(writeBytes(0))).toEqual({
      code: 'EIO',
      message: `EIO: allocating ${(32 + 64 + 256) * KIB} bytes after the store's ${8 * KIB} failed`,
    });
    // Nothing was held by the refused writes: the same request as the first, once allowed.
    delete state.errno;
    expect(room.admit(writeBytes(0))).toBeUndefined();
    expect(calls.at(-1)).toEqual([8 * KIB, (32 + 64 + 256) * KIB]);
    room.close();
  });

  it('only gates where the filesystem cannot allocate ahead', () => {
    const state: { free: number; size: number; errno?: number } = {
      free: 1 << 30,
      size: 0,
      errno: 95,
    };
    const { system, calls } = fakeSystem(state);
    const room = openStoreRoom(join(dir, 'state'), system);
    calls.length = 0;
    expect(room.ahead()).toBe(true);
    expect(room.admit(writeBytes(0))).toBeUndefined();
    expect(room.ahead()).toBe(false);
    expect(room.admit(writeBytes(0))).toBeUndefined();
    expect(calls).toHaveLength(1);
    state.free = 0;
    expect(room.admit(writeBytes(0))?.code).toBe('ENOSPC');
    room.close();
  });

  it('answers why when the free space cannot be read', () => {
    const room = openStoreRoom(join(dir, 'state'), {
      ...fakeSystem({ free: 0, size: 0 }).system,
      available: () => {
        throw Object.assign(new Error('EACCES: permission denied, statfs'), { code: 'EACCES' });
      },
    });
    expect(room.admit(1)).toEqual({
      code: 'EACCES',
      message: 'Error: EACCES: permission denied, statfs',
    });
    room.close();
  });

  it('counts the blocks kept back for root as free for root only', () => {
    const stats = { bavail: 10, bfree: 30, bsize: 4096 };
    expect(freeFor(stats, 0)).toBe(30 * 4096);
    expect(freeFor(stats, 1000)).toBe(10 * 4096);
    expect(freeFor(stats, undefined)).toBe(10 * 4096);
  });
});
