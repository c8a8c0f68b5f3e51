import { closeSync, fstatSync, openSync, writeSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { allocateAhead } from './fallocate.js';

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'allocnet-libc-fallocate-'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Bytes the file holds on disk (st_blocks counts 512-byte units). */
const held = (fd: number): number => fstatSync(fd).blocks * 512;

describe('fallocate', () => {
  it('allocates blocks past the end without changing the size', () => {
    const fd = openSync(join(dir, 'data'), 'w+');
    try {
      writeSync(fd, Buffer.alloc(4096, 1));
      expect(held(fd)).toBeLessThan(1 << 20);
      expect(allocateAhead(fd, 0, 1 << 20)).toBe(0);
      expect(fstatSync(fd).size).toBe(4096);
      expect(held(fd)).toBeGreaterThanOrEqual(1 << 20);
      // A write into the allocated range needs no new block.
      writeSync(fd, Buffer.alloc(4096, 2), 0, 4096, 65536);
      expect(fstatSync(fd).size).toBe(65536 + 4096);
      expect(held(fd)).toBeGreaterThanOrEqual(1 << 20);
    } finally {
      closeSync(fd);
    }
  });

  it('answers the errno of a failed call instead of throwing', () => {
    const fd = openSync(join(dir, 'data'), 'w+');
    closeSync(fd);
    expect(allocateAhead(fd, 0, 4096)).toBe(9); // EBADF
    const read = openSync(join(dir, 'data'), 'r');
    try {
      expect(allocateAhead(read, 0, 4096)).toBe(9); // EBADF: not open for writing
      expect(allocateAhead(read, -1, 4096)).toBe(22); // EINVAL
    } finally {
      closeSync(read);
    }
  });
});
