// fallocate(2), which Node does not have: the agent's state store keeps disk blocks allocated
// ahead of LMDB's file (@allocnet/alloc-runner `room.ts`), so that LMDB's own page writes never
// meet a full disk (lmdb-js 3.5.6 can abort the process when one does: docs/reliability.md).
import { bindLibc } from './bind.js';

/** Allocate without changing the file's size: blocks past the end wait for later writes. */
const FALLOC_FL_KEEP_SIZE = 0x01;
const EINTR = 4;

const load = bindLibc<{
  readonly fallocate: (fd: number, mode: number, offset: number, length: number) => number;
}>({
  // off_t is 64 bits on x86-64 and arm64 glibc; koffi passes a JS number as int64.
  fallocate: 'int fallocate(int fd, int mode, int64_t offset, int64_t len)',
});

/**
 * Allocates the blocks of `[offset, offset + length)` of the open file `fd`, past its end too,
 * without changing its size (FALLOC_FL_KEEP_SIZE). Later writes there need no new blocks, so they
 * cannot fail for lack of space. Answers 0, or the errno: ENOSPC (28) or EDQUOT (122) when the
 * filesystem or the quota has no room (some blocks may have been allocated all the same),
 * EOPNOTSUPP (95) where the filesystem cannot allocate ahead.
 */
export function allocateAhead(fd: number, offset: number, length: number): number {
  const { fallocate, errno } = load();
  for (;;) {
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, offset, length) === 0) return 0;
    const err = errno();
    if (err !== EINTR) return err;
  }
}
