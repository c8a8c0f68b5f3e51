import { loadKoffiLibc } from '@allocnet/libc';
import { SpawnError, errnoName } from './errors.js';

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
  /** glibc's malloc_trim: hands free heap memory back to the kernel; absent outside glibc. */
  mallocTrim: ((pad: number) => number) | undefined;
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
/** glibc 2.26 and later: the child calls setsid(), as node:child_process's `detached` does. */
export const POSIX_SPAWN_SETSID = 0x80;

/** Loads the bindings; throws when koffi or glibc is not there (musl, another OS). */
export function loadLibc(): Libc {
  const { koffi, lib } = loadKoffiLibc();
  // The declared `Libc` member types are the contract; koffi checks each call's arguments.
  const fn = (signature: string): unknown => lib.func(signature);
  let addCloseFrom: ((fa: Buffer, from: number) => number) | undefined;
  let mallocTrim: ((pad: number) => number) | undefined;
  try {
    mallocTrim = fn('int malloc_trim(size_t pad)') as Libc['mallocTrim'];
  } catch {
    mallocTrim = undefined;
  }
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
    mallocTrim,
    errno: () => koffi.errno(),
  };
}

/** What `spawnFile` starts: the file, its argv and environment, and its descriptors 0, 1, 2. */
export interface SpawnRequest {
  /** As given: argv[0], and the name in errors. */
  readonly file: string;
  /** The file to execute (`file` looked up in PATH). */
  readonly path: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  /**
   * The child's descriptor 0 (`undefined`: /dev/null), 1 and 2: each is dup2'd onto its place.
   * Passing 1 for 1 (or 2 for 2) hands down this process's own: dup2 of a descriptor onto itself
   * clears its O_CLOEXEC in posix_spawn (glibc 2.29 and later), so it survives the exec.
   */
  readonly stdio: readonly [number | undefined, number, number];
  /** A new session and process group (setsid). */
  readonly newSession: boolean;
}

/** Signal sets made once: none (the mask) and every signal 1-64 (set to default). */
export interface SignalSets {
  readonly none: Buffer;
  readonly all: Buffer;
}

/**
 * posix_spawn itself: the descriptors the child gets as 0, 1, 2, a clean signal state. Returns the
 * pid; throws a `SpawnError` when the process did not start.
 */
export function spawnFile(libc: Libc, sets: SignalSets, request: SpawnRequest): number {
  const fa = Buffer.alloc(FILE_ACTIONS_BYTES);
  const attr = Buffer.alloc(ATTR_BYTES);
  const check = (rc: number, what: string) => {
    if (rc !== 0) throw new SpawnError(request.file, errnoName(rc), what);
  };
  const [stdinFd, stdoutFd, stderrFd] = request.stdio;
  check(libc.fileActionsInit(fa), 'posix_spawn_file_actions_init');
  try {
    check(libc.attrInit(attr), 'posix_spawnattr_init');
    try {
      check(
        stdinFd === undefined
          ? libc.fileActionsAddOpen(fa, 0, '/dev/null', O_RDONLY, 0)
          : libc.fileActionsAddDup2(fa, stdinFd, 0),
        'stdin',
      );
      check(libc.fileActionsAddDup2(fa, stdoutFd, 1), 'stdout');
      check(libc.fileActionsAddDup2(fa, stderrFd, 2), 'stderr');
      // Only 0, 1 and 2 reach the child, whatever else this process holds open.
      if (libc.fileActionsAddCloseFrom !== undefined)
        check(libc.fileActionsAddCloseFrom(fa, 3), 'closefrom');
      // Node ignores SIGPIPE and libuv's threads block signals; an exec keeps ignored signals
      // and the mask, so the child gets every signal at its default and none blocked.
      const flags =
        POSIX_SPAWN_SETSIGDEF |
        POSIX_SPAWN_SETSIGMASK |
        (request.newSession ? POSIX_SPAWN_SETSID : 0);
      check(libc.attrSetFlags(attr, flags), 'posix_spawnattr_setflags');
      check(libc.attrSetSigMask(attr, sets.none), 'posix_spawnattr_setsigmask');
      check(libc.attrSetSigDefault(attr, sets.all), 'posix_spawnattr_setsigdefault');
      const argv = [request.file, ...request.args, null];
      const envp = [...Object.entries(request.env).map(([k, v]) => `${k}=${v}`), null];
      const pid = [0];
      // glibc reports a failed exec (ENOENT, EACCES, ETXTBSY…) here and reaps that child itself.
      const rc = libc.posixSpawn(pid, request.path, fa, attr, argv, envp);
      if (rc !== 0) throw new SpawnError(request.file, errnoName(rc));
      return pid[0] ?? 0;
    } finally {
      libc.attrDestroy(attr);
    }
  } finally {
    libc.fileActionsDestroy(fa);
  }
}
