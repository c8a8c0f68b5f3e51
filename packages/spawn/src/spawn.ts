import { spawn as nodeSpawn } from 'node:child_process';
import { accessSync, constants as fsConstants, statSync } from 'node:fs';
import { Socket } from 'node:net';
import { constants as osConstants } from 'node:os';
import { delimiter, join } from 'node:path';
import { isMainThread } from 'node:worker_threads';
import { PassThrough, Writable } from 'node:stream';
import type { Readable } from 'node:stream';
import { SpawnError, errnoName, isSpawnError, systemMessage } from './errors.js';
import { O_CLOEXEC, SIGSET_BYTES, WNOHANG, loadLibc, spawnFile } from './libc.js';
import type { Libc, SignalSets } from './libc.js';

/**
 * How a process is started. `posix_spawn` (glibc's, which clones with CLONE_VM|CLONE_VFORK) costs
 * the same whatever this process's size; `child_process` (libuv) forks this whole process first,
 * which costs more the larger it is (the figures are in docs/spawn.md).
 */
export type SpawnMethod = 'posix_spawn' | 'child_process';

export interface SpawnOptions {
  /** A path, or a name looked up in the `PATH` of `env` (else /usr/bin:/bin), as execvp does. */
  readonly file: string;
  /** The arguments after argv[0]; argv[0] is `file` as given. */
  readonly args?: readonly string[];
  /** The whole environment of the child: nothing is inherited. */
  readonly env: Readonly<Record<string, string>>;
  /** `pipe` (default): `stdin` is writable. `ignore`: the child reads /dev/null. */
  readonly stdin?: 'pipe' | 'ignore';
  /**
   * `pipe` (default): read it from `stdout`. `inherit`: the child writes to this process's own
   * stdout, and `stdout` here is an empty stream that has ended.
   */
  readonly stdout?: 'pipe' | 'inherit';
  /** As `stdout`, for stderr. */
  readonly stderr?: 'pipe' | 'inherit';
  /**
   * Start it in a new session and process group (setsid), as node:child_process's `detached`
   * does: a Ctrl-C on the terminal (SIGINT to the foreground group) then does not reach it.
   * Default false.
   */
  readonly detached?: boolean;
  /**
   * Once the process has exited, how long its stdout and stderr may stay open: a process it left
   * behind that inherited them (a shell script's `sleep &`, a daemon) would otherwise hold
   * `closed` until it ends. After the grace our ends are closed (what that process writes later
   * is lost) and `closed` settles. Default: no limit (as node:child_process's 'close').
   */
  readonly outputGraceMs?: number;
  /** Default: `posix_spawn` where it can be loaded (glibc), else `child_process`. */
  readonly method?: SpawnMethod;
}

/** How a child ended: an exit code, or the signal that killed it. */
export interface ChildExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface SpawnedChild {
  /** Absent when the process did not start (then `closed` rejects). */
  readonly pid: number | undefined;
  readonly method: SpawnMethod;
  /** `null` with `stdin: 'ignore'`. A write after the child exits fails with EPIPE. */
  readonly stdin: Writable | null;
  /** Empty and ended with `stdout: 'inherit'` (and `stderr: 'inherit'`). */
  readonly stdout: Readable;
  readonly stderr: Readable;
  /**
   * Settles once the process has been reaped and its stdout and stderr have ended (so all output
   * has been read), like child_process's 'close'. Rejects with a `SpawnError` when the process did
   * not start: not found, not executable, "text file busy" (code ETXTBSY), out of descriptors.
   */
  readonly closed: Promise<ChildExit>;
  /** Sends a signal (default SIGTERM); false once the process has been reaped. */
  kill(signal?: NodeJS.Signals): boolean;
  /**
   * With `detached`: sends the signal to its whole process group (what it started too), even
   * after it was reaped while others of the group live; false when none is left. Without
   * `detached` the child shares our group: the child alone, as `kill`.
   */
  killGroup(signal?: NodeJS.Signals): boolean;
}

/**
 * Closes the output streams of a process that has exited, `graceMs` from now, unless they ended
 * by themselves. Never before an event-loop poll that comes after the timer: a loop that was busy
 * when the grace ran out would otherwise close a pipe whose last output (written before the exit,
 * not read yet) is still in the kernel's buffer, and lose it (seen under load: a plugin's result
 * read as empty). setImmediate runs after that poll, which reads what is there.
 */
function closeAfterGrace(streams: readonly (Readable | null | undefined)[], graceMs: number): void {
  setTimeout(() => {
    setImmediate(() => {
      for (const s of streams) if (s !== null && s !== undefined && !s.destroyed) s.destroy();
    });
  }, graceMs);
}

/** Sends `signal` to process group `pid`; false when no process of it is left. */
function signalGroup(pid: number | undefined, signal: NodeJS.Signals): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(-pid, signal);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw error;
  }
}

const signalNames = new Map<number, NodeJS.Signals>(
  Object.entries(osConstants.signals).map(([name, value]) => [value, name as NodeJS.Signals]),
);
const EINTR = osConstants.errno.EINTR;
const DEFAULT_PATH = '/usr/bin:/bin';
/**
 * A backstop for the SIGCHLD listener, and what keeps the event loop alive while a child runs (a
 * signal listener does not). Reaping normally happens on SIGCHLD or when the child's output ends.
 */
const BACKSTOP_MS = 250;

/**
 * Reaps the children this module started, by pid (waitpid(pid, WNOHANG)), never waitpid(-1): libuv
 * reaps its own children the same way, so each side only ever reaps what it started. One per
 * process, made on the first spawn, because SIGCHLD is one per process.
 *
 * Concurrency: all of this runs on the event-loop thread. A pid is registered synchronously right
 * after posix_spawn returns, before any SIGCHLD callback can run; a pid is only signalled while it
 * is registered, and it stays registered until it is reaped, so a signal never reaches a reused pid.
 */
class Reaper {
  private readonly live = new Map<number, (status: number | undefined) => void>();
  private backstop: NodeJS.Timeout | undefined;
  private readonly onSignal = () => {
    this.sweep();
  };

  constructor(private readonly libc: Libc) {}

  watch(pid: number, reaped: (status: number | undefined) => void): void {
    if (this.live.size === 0) {
      process.on('SIGCHLD', this.onSignal);
      this.backstop = setInterval(this.onSignal, BACKSTOP_MS);
    }
    this.live.set(pid, reaped);
  }

  has(pid: number): boolean {
    return this.live.has(pid);
  }

  sweep(): void {
    for (const [pid, reaped] of this.live) {
      const status = [0];
      const got = this.libc.waitpid(pid, status, WNOHANG);
      if (got === 0) continue;
      if (got === -1 && this.libc.errno() === EINTR) continue; // the next sweep asks again
      this.live.delete(pid);
      // -1 otherwise is ECHILD: something else in this process reaped it (waitpid(-1) in an addon).
      reaped(got === pid ? status[0] : undefined);
    }
    if (this.live.size === 0 && this.backstop !== undefined) {
      process.off('SIGCHLD', this.onSignal);
      clearInterval(this.backstop);
      this.backstop = undefined;
    }
  }
}

interface PosixSpawner {
  readonly libc: Libc;
  readonly reaper: Reaper;
  readonly signals: SignalSets;
}

let spawner: PosixSpawner | null | undefined;

/** The posix_spawn machinery, loaded on first use; null where it cannot be (no glibc, no koffi). */
function posixSpawner(): PosixSpawner | null {
  if (spawner !== undefined) return spawner;
  // SIGCHLD reaches only the main thread's listeners; a worker keeps to child_process.
  if (process.platform !== 'linux' || !isMainThread) return (spawner = null);
  try {
    const libc = loadLibc();
    const emptySet = Buffer.alloc(SIGSET_BYTES);
    const fullSet = Buffer.alloc(SIGSET_BYTES);
    libc.sigEmptySet(emptySet);
    // Every signal 1-64, bit (n - 1). Not sigfillset: it leaves out glibc's internal signals 32
    // and 33, which posix_spawn then sets to SIG_IGN in the child, and an exec keeps that.
    fullSet.fill(0xff, 0, 8);
    spawner = { libc, reaper: new Reaper(libc), signals: { none: emptySet, all: fullSet } };
  } catch {
    // koffi has no binary for this platform, or there is no glibc: child_process still works.
    spawner = null;
  }
  return spawner;
}

/**
 * Hands the memory this process has freed back to the kernel (glibc's `malloc_trim(0)`): after a
 * burst of work (a restore reads thousands of plugin and iptables outputs into buffers) glibc
 * keeps the freed heap, which the resident size goes on counting. Returns false where there is
 * no glibc binding (then nothing is done). Not free: call it after such a burst, not per
 * operation.
 */
export function releaseFreeMemory(): boolean {
  const trim = posixSpawner()?.libc.mallocTrim;
  if (trim === undefined) return false;
  trim(0);
  return true;
}

/** The method `spawnChild` uses when none is asked for. */
export function defaultSpawnMethod(): SpawnMethod {
  return posixSpawner() === null ? 'child_process' : 'posix_spawn';
}

/** Starts a process with three pipes (or /dev/null on stdin). Never throws: see `closed`. */
export function spawnChild(options: SpawnOptions): SpawnedChild {
  const method = options.method ?? defaultSpawnMethod();
  if (method === 'child_process') return childProcessSpawn(options);
  const posix = posixSpawner();
  if (posix === null) {
    return notStarted(
      options,
      new SpawnError(options.file, 'ENOSYS', 'posix_spawn is not available here (koffi or glibc)'),
    );
  }
  return posixSpawn(posix, options);
}

function resolveFile(file: string, env: Readonly<Record<string, string>>): string {
  if (file.includes('/')) return file;
  let denied = false;
  for (const dir of (env.PATH ?? DEFAULT_PATH).split(delimiter)) {
    const candidate = join(dir === '' ? '.' : dir, file);
    try {
      if (!statSync(candidate).isFile()) continue;
      accessSync(candidate, fsConstants.X_OK);
      return candidate;
    } catch (error) {
      // Not there or not ours to run: execvp goes on to the next directory too.
      if ((error as NodeJS.ErrnoException).code === 'EACCES') denied = true;
    }
  }
  const path = env.PATH ?? DEFAULT_PATH;
  throw new SpawnError(
    file,
    denied ? 'EACCES' : 'ENOENT',
    denied ? `not executable in any directory of PATH ${path}` : `not found in PATH ${path}`,
  );
}

function posixSpawn(posix: PosixSpawner, options: SpawnOptions): SpawnedChild {
  const { libc } = posix;
  const opened: number[] = [];
  const closeAll = (fds: readonly number[]) => {
    for (const fd of fds) libc.close(fd);
  };
  const pipe = (): [number, number] => {
    const fds = [-1, -1];
    if (libc.pipe2(fds, O_CLOEXEC) !== 0) {
      const code = errnoName(libc.errno());
      throw new SpawnError(options.file, code, `could not make a pipe: ${systemMessage(code)}`);
    }
    const pair: [number, number] = [fds[0] ?? -1, fds[1] ?? -1];
    opened.push(...pair);
    return pair;
  };
  let pid: number;
  let input: [number, number] | undefined;
  let output: [number, number] | undefined;
  let errors: [number, number] | undefined;
  try {
    const path = resolveFile(options.file, options.env);
    input = options.stdin === 'ignore' ? undefined : pipe();
    output = options.stdout === 'inherit' ? undefined : pipe();
    errors = options.stderr === 'inherit' ? undefined : pipe();
    pid = spawnFile(libc, posix.signals, {
      file: options.file,
      path,
      args: options.args ?? [],
      env: options.env,
      // An inherited descriptor is our own 1 or 2, dup2'd onto itself.
      stdio: [input?.[0], output?.[1] ?? 1, errors?.[1] ?? 2],
      newSession: options.detached === true,
    });
  } catch (error) {
    closeAll(opened);
    return notStarted(
      options,
      isSpawnError(error) ? error : new SpawnError(options.file, 'EIO', String(error)),
    );
  }
  // The child has its own copies now; ours of its ends would hide its EOF from us.
  closeAll([input?.[0], output?.[1], errors?.[1]].filter((fd) => fd !== undefined));

  const reading = (pair: [number, number] | undefined) =>
    pair === undefined ? undefined : new Socket({ fd: pair[0], readable: true, writable: false });
  const stdoutPipe = reading(output);
  const stderrPipe = reading(errors);
  const stdin =
    input === undefined ? null : new Socket({ fd: input[1], readable: false, writable: true });

  let status: number | undefined | null = null; // null: not reaped yet
  let streamsOpen = (stdoutPipe === undefined ? 0 : 1) + (stderrPipe === undefined ? 0 : 1);
  let settle: () => void = () => undefined;
  const closed = new Promise<ChildExit>((resolve, reject) => {
    settle = () => {
      if (status === null || streamsOpen > 0) return;
      if (status === undefined) {
        reject(new SpawnError(options.file, 'ECHILD', `process ${pid} was reaped by someone else`));
        return;
      }
      resolve(decodeStatus(status));
    };
  });
  // The caller learns of a rejection from `closed`; this only keeps an unobserved one quiet.
  closed.catch(() => undefined);
  posix.reaper.watch(pid, (s) => {
    status = s;
    // Nobody reads it any more; a child killed before it got its input would otherwise leave
    // our end of the pipe open (node:child_process destroys stdin on exit too).
    stdin?.destroy();
    if (streamsOpen > 0 && options.outputGraceMs !== undefined)
      closeAfterGrace([stdoutPipe, stderrPipe], options.outputGraceMs);
    settle();
  });
  const streamEnded = () => {
    streamsOpen--;
    // The child usually closes its output by exiting: ask now rather than wait for SIGCHLD.
    if (streamsOpen === 0) posix.reaper.sweep();
    settle();
  };
  stdoutPipe?.once('close', streamEnded);
  stderrPipe?.once('close', streamEnded);

  return {
    pid,
    method: 'posix_spawn',
    stdin,
    stdout: stdoutPipe ?? endedStream(),
    stderr: stderrPipe ?? endedStream(),
    closed,
    kill(signal = 'SIGTERM') {
      if (!posix.reaper.has(pid)) return false;
      process.kill(pid, signal);
      return true;
    },
    killGroup(signal = 'SIGTERM') {
      if (options.detached !== true) return this.kill(signal);
      return signalGroup(pid, signal);
    },
  };
}

/** waitpid's status word: exited with a code, or killed by a signal. */
function decodeStatus(status: number): ChildExit {
  const signal = status & 0x7f;
  if (signal === 0) return { code: (status >> 8) & 0xff, signal: null };
  return { code: null, signal: signalNames.get(signal) ?? 'SIGKILL' };
}

/** What a child that writes elsewhere (or never started) gives to read: nothing, ended. */
function endedStream(): Readable {
  const stream = new PassThrough();
  stream.end();
  return stream;
}

function notStarted(options: SpawnOptions, error: SpawnError): SpawnedChild {
  const closed = Promise.reject(error);
  // The caller learns of it from `closed`; this only keeps an unobserved rejection quiet.
  closed.catch(() => undefined);
  return {
    pid: undefined,
    method: options.method ?? 'posix_spawn',
    stdin:
      options.stdin === 'ignore'
        ? null
        : new Writable({
            write(_chunk, _encoding, callback) {
              callback();
            },
          }),
    stdout: endedStream(),
    stderr: endedStream(),
    closed,
    kill: () => false,
    killGroup: () => false,
  };
}

function childProcessSpawn(options: SpawnOptions): SpawnedChild {
  let child;
  try {
    child = nodeSpawn(options.file, [...(options.args ?? [])], {
      env: { ...options.env },
      stdio: [options.stdin ?? 'pipe', options.stdout ?? 'pipe', options.stderr ?? 'pipe'],
      detached: options.detached === true,
    });
  } catch (error) {
    // Some execve failures (ETXTBSY, EACCES) are thrown here rather than emitted.
    const e = error as NodeJS.ErrnoException;
    return notStarted(
      { ...options, method: 'child_process' },
      new SpawnError(options.file, e.code ?? 'EIO', e.message, { cause: error }),
    );
  }
  const started = child;
  let spawnError: NodeJS.ErrnoException | undefined;
  const closed = new Promise<ChildExit>((resolve, reject) => {
    started.on('error', (error: NodeJS.ErrnoException) => {
      spawnError ??= error;
    });
    started.on('exit', () => {
      if (options.outputGraceMs !== undefined)
        closeAfterGrace([started.stdout, started.stderr], options.outputGraceMs);
    });
    started.on('close', (code, signal) => {
      if (spawnError !== undefined && started.pid === undefined) {
        reject(
          new SpawnError(options.file, spawnError.code ?? 'EIO', spawnError.message, {
            cause: spawnError,
          }),
        );
      } else {
        resolve({ code, signal });
      }
    });
  });
  closed.catch(() => undefined);
  return {
    pid: started.pid,
    method: 'child_process',
    stdin: started.stdin,
    // null where the child inherits ours.
    stdout: started.stdout ?? endedStream(),
    stderr: started.stderr ?? endedStream(),
    closed,
    kill: (signal = 'SIGTERM') => started.kill(signal),
    killGroup: (signal = 'SIGTERM') =>
      options.detached === true ? signalGroup(started.pid, signal) : started.kill(signal),
  };
}
