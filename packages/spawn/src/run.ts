import { isSpawnError } from './errors.js';
import type { SpawnError } from './errors.js';
import { spawnChild } from './spawn.js';
import type { ChildExit, SpawnOptions } from './spawn.js';

export interface StartOptions extends SpawnOptions {
  /** SIGKILL this long after `run()` gave the process its input. Default: none. */
  readonly timeoutMs?: number;
  /** SIGKILL when it aborts, before `run()` or during it; already aborted: nothing starts. */
  readonly signal?: AbortSignal;
  /**
   * Given each piece of stdout as it arrives, in order, all of it before `run()` resolves, on the
   * event-loop thread: a reader that works on the output as it comes (iptables-save's parse)
   * overlaps the process's writing. The reader then has the output: the result's `stdout` is
   * empty (joining megabytes of pieces into one string holds the event loop for tens of
   * milliseconds: issue 28). It must not throw: it runs in the pipe's event handler.
   */
  readonly onStdout?: (chunk: Buffer) => void;
}

/**
 * A started process waiting for its input. It is killed (SIGKILL) when `signal` aborts or
 * `cancel()` is called, whether `run()` has been called or not, and `timeoutMs` after `run()`.
 */
export interface StartedProcess {
  /**
   * Writes `input` to stdin and closes it (with `stdin: 'ignore'` there is none to give), starts
   * the timeout, and resolves how the process ended. Call once; never rejects for the process.
   * After `cancel()` or an abort it resolves `aborted`, whatever the process did.
   */
  run(input?: string): Promise<RunResult>;
  /** Kills a process that will not be run, or stops one that is: `run()` resolves `aborted`. */
  cancel(): void;
  /**
   * Sends a signal (default SIGTERM), for a caller that forwards its own; the result then says
   * `killed by SIGTERM` (or the exit status, if the process handles it). False once reaped.
   */
  kill(signal?: NodeJS.Signals): boolean;
}

export interface RunOptions extends Omit<StartOptions, 'stdin'> {
  /** Written to stdin, then closed; without it the child reads /dev/null. */
  readonly input?: string;
}

/**
 * How a process ended. A non-zero exit is a result, not an exception: the caller decides what it
 * means. `failed` is a process that did not start, was killed by a signal nobody here sent, ran
 * out of time or was cancelled; output read until then is kept.
 */
export type RunResult =
  | {
      readonly kind: 'exited';
      readonly exitCode: number;
      readonly stdout: string;
      readonly stderr: string;
    }
  | {
      readonly kind: 'failed';
      readonly reason: 'spawn' | 'killed' | 'timeout' | 'aborted';
      readonly message: string;
      /** With `reason: 'spawn'`: the errno name (ENOENT, EACCES, ETXTBSY…), for deciding on it. */
      readonly code?: string;
      readonly stdout: string;
      readonly stderr: string;
    };

const aborted = (output: { stdout: string; stderr: string }): RunResult => ({
  kind: 'failed',
  reason: 'aborted',
  message: 'cancelled',
  ...output,
});

/**
 * Starts a process now and lets it wait for its input: a caller that knows the input only later
 * (the next plugin of a CNI chain) overlaps the process's start-up with other work, and the
 * timeout counts only the time the process has its input. Never throws for the process: a
 * process that did not start is a `spawn` result of `run()`.
 *
 * Concurrency: everything here runs on the event-loop thread. The first kill that reaches the
 * process (the timer's, the abort's or `cancel()`'s) names the result; a kill that finds the
 * process already reaped changes nothing, so a process that ended on its own says so.
 */
export function startProcess(options: StartOptions): StartedProcess {
  const { timeoutMs, signal, onStdout, ...spawnOptions } = options;
  // Already aborted: nothing starts, and `run()` says `aborted` (the signal stays aborted).
  const child = signal?.aborted === true ? undefined : spawnChild(spawnOptions);
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child?.stdout.on('data', (d: Buffer) => {
    if (onStdout === undefined) out.push(d);
    else onStdout(d);
  });
  child?.stderr.on('data', (d: Buffer) => err.push(d));
  // A child that exits without reading all its input closes the pipe under us; its exit status
  // says what happened, the EPIPE adds nothing.
  child?.stdin?.on('error', () => undefined);
  const output = () => ({
    stdout: Buffer.concat(out).toString('utf8'),
    stderr: Buffer.concat(err).toString('utf8'),
  });

  let killedFor: 'timeout' | 'aborted' | undefined;
  let cancelled = false;
  let ran = false;
  let over = false;
  let timer: NodeJS.Timeout | undefined;
  // A detached process leads its own group: the timeout and an abort end what it started too
  // (a plugin's `sleep &` holding its stdout would otherwise outlive it).
  // The result names the kill only when it found the process itself alive.
  const stop = (why: 'timeout' | 'aborted') => {
    const killed = child?.kill('SIGKILL') === true;
    if (spawnOptions.detached === true) child?.killGroup('SIGKILL');
    if (killed) killedFor ??= why;
  };
  const onAbort = () => {
    stop('aborted');
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  const closed: Promise<ChildExit | undefined> = child?.closed ?? Promise.resolve(undefined);
  const ended: Promise<ChildExit | SpawnError | undefined> = closed
    .catch((error: unknown) => {
      if (isSpawnError(error)) return error;
      throw error;
    })
    .finally(() => {
      over = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    });
  // `run()` reports how it ended; this keeps a process nobody runs (cancelled) quiet.
  ended.catch(() => undefined);

  return {
    run(input) {
      if (ran) throw new Error('run() was called twice on one started process');
      if (input !== undefined && spawnOptions.stdin === 'ignore')
        throw new TypeError("input for a process started with stdin: 'ignore'");
      ran = true;
      if (cancelled || signal?.aborted === true) {
        stop('aborted');
        return ended.then(() => aborted(output()));
      }
      child?.stdin?.end(input);
      if (timeoutMs !== undefined && !over)
        timer = setTimeout(() => {
          stop('timeout');
        }, timeoutMs);
      return ended.then((end) => result(end, killedFor, timeoutMs, output()));
    },
    cancel() {
      cancelled = true;
      stop('aborted');
    },
    kill: (sig) => child?.kill(sig) ?? false,
  };
}

/** How a process ended, from its exit (or why it did not start) and who killed it, if anyone. */
function result(
  end: ChildExit | SpawnError | undefined,
  killedFor: 'timeout' | 'aborted' | undefined,
  timeoutMs: number | undefined,
  output: { stdout: string; stderr: string },
): RunResult {
  if (isSpawnError(end)) {
    const { code, message } = end;
    return { kind: 'failed', reason: 'spawn', message, code, ...output };
  }
  if (end === undefined || killedFor === 'aborted') return aborted(output);
  if (killedFor === 'timeout') {
    const message = `timed out after ${timeoutMs ?? 0} ms`;
    return { kind: 'failed', reason: 'timeout', message, ...output };
  }
  if (end.code === null) {
    const message = `killed by ${end.signal ?? 'a signal'}`;
    return { kind: 'failed', reason: 'killed', message, ...output };
  }
  return { kind: 'exited', exitCode: end.code, ...output };
}

/** Runs a process to its end and keeps its whole output (UTF-8). Never rejects for the process. */
export function runProcess(options: RunOptions): Promise<RunResult> {
  const { input, ...startOptions } = options;
  const stdin = input === undefined ? 'ignore' : 'pipe';
  return startProcess({ ...startOptions, stdin }).run(input);
}

/** This process's environment (unset entries dropped), with `overrides` on top. */
export function inheritedEnv(
  overrides: Readonly<Record<string, string>> = {},
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined) env[key] = value;
  return { ...env, ...overrides };
}
