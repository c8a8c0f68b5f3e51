import { createRequire } from 'node:module';
import type * as Koffi from 'koffi';

/**
 * The few glibc functions `posix_spawn` needs, bound through koffi (an FFI library that ships
 * prebuilt binaries in its npm package, so nothing is compiled at install). Opaque glibc types
 * (`posix_spawn_file_actions_t`, `posix_spawnattr_t`, `sigset_t`) live in Buffers larger than
 * glibc's x86_64/arm64 sizes (80, 336 and 128 bytes).
 */
export interface Libc {
  pipe2(fds: number[], flags: number): number;
  close(fd: number): number;
  fileActionsInit(fa: Buffer): number;
  fileActionsDestroy(fa: Buffer): number;
  fileActionsAddDup2(fa: Buffer, fd: number, newFd: number): number;
  fileActionsAddOpen(fa: Buffer, fd: number, path: string, flags: number, mode: number): number;
  /** glibc 2.34 and later; absent before. */
  fileActionsAddCloseFrom: ((fa: Buffer, from: number) => number) | undefined;
  attrInit(attr: Buffer): number;
  attrDestroy(attr: Buffer): number;
  attrSetFlags(attr: Buffer, flags: number): number;
  attrSetSigMask(attr: Buffer, set: Buffer): number;
  attrSetSigDefault(attr: Buffer, set: Buffer): number;
  sigEmptySet(set: Buffer): number;
  posixSpawn(
    pid: number[],
    path: string,
    fa: Buffer,
    attr: Buffer,
    argv: readonly (string | null)[],
    envp: readonly (string | null)[],
  ): number;
  waitpid(pid: number, status: number[], options: number): number;
  errno(): number;
}

export const FILE_ACTIONS_BYTES = 256;
export const ATTR_BYTES = 1024;
export const SIGSET_BYTES = 256;
export const O_CLOEXEC = 0o2000000;
export const O_RDONLY = 0;
export const WNOHANG = 1;
export const POSIX_SPAWN_SETSIGDEF = 0x04;
export const POSIX_SPAWN_SETSIGMASK = 0x08;

/** Loads the bindings; throws when koffi or glibc is not there (musl, another OS). */
export function loadLibc(): Libc {
  // koffi is CommonJS; `require` keeps loading it (and dlopen-ing libc) out of import time.
  const require = createRequire(import.meta.url);
  const koffi = require('koffi') as typeof Koffi;
  const lib = koffi.load('libc.so.6');
  // The declared `Libc` member types are the contract; koffi checks each call's arguments.
  const fn = (signature: string): unknown => lib.func(signature);
  let addCloseFrom: ((fa: Buffer, from: number) => number) | undefined;
  try {
    addCloseFrom = fn(
      'int posix_spawn_file_actions_addclosefrom_np(void *fa, int from)',
    ) as Libc['fileActionsAddCloseFrom'];
  } catch {
    // Older glibc: children then inherit whatever descriptors lack O_CLOEXEC, as with
    // node:child_process.
    addCloseFrom = undefined;
  }
  return {
    pipe2: fn('int pipe2(_Out_ int *fds, int flags)') as Libc['pipe2'],
    close: fn('int close(int fd)') as Libc['close'],
    fileActionsInit: fn('int posix_spawn_file_actions_init(void *fa)') as Libc['fileActionsInit'],
    fileActionsDestroy: fn(
      'int posix_spawn_file_actions_destroy(void *fa)',
    ) as Libc['fileActionsDestroy'],
    fileActionsAddDup2: fn(
      'int posix_spawn_file_actions_adddup2(void *fa, int fd, int newfd)',
    ) as Libc['fileActionsAddDup2'],
    fileActionsAddOpen: fn(
      'int posix_spawn_file_actions_addopen(void *fa, int fd, const char *path, int oflag, uint32_t mode)',
    ) as Libc['fileActionsAddOpen'],
    fileActionsAddCloseFrom: addCloseFrom,
    attrInit: fn('int posix_spawnattr_init(void *attr)') as Libc['attrInit'],
    attrDestroy: fn('int posix_spawnattr_destroy(void *attr)') as Libc['attrDestroy'],
    attrSetFlags: fn(
      'int posix_spawnattr_setflags(void *attr, short flags)',
    ) as Libc['attrSetFlags'],
    attrSetSigMask: fn(
      'int posix_spawnattr_setsigmask(void *attr, void *set)',
    ) as Libc['attrSetSigMask'],
    attrSetSigDefault: fn(
      'int posix_spawnattr_setsigdefault(void *attr, void *set)',
    ) as Libc['attrSetSigDefault'],
    sigEmptySet: fn('int sigemptyset(void *set)') as Libc['sigEmptySet'],
    posixSpawn: fn(
      'int posix_spawn(_Out_ int *pid, const char *path, void *fa, void *attr, const char **argv, const char **envp)',
    ) as Libc['posixSpawn'],
    waitpid: fn('int waitpid(int pid, _Out_ int *status, int options)') as Libc['waitpid'],
    errno: () => koffi.errno(),
  };
}
