import { isSpawnError, spawnChild } from './spawn.js';
import type { SpawnOptions } from './spawn.js';

export interface RunOptions extends Omit<SpawnOptions, 'stdin'> {
  /** Written to stdin, then closed; without it the child reads /dev/null. */
  readonly input?: string;
  /** SIGKILL after this long. Default: none. */
  readonly timeoutMs?: number;
  /** SIGKILL when it aborts; already aborted: nothing starts. */
  readonly signal?: AbortSignal;
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
      readonly stdout: string;
      readonly stderr: string;
    };

/** Runs a process to its end and keeps its whole output (UTF-8). Never rejects for the process. */
export async function runProcess(options: RunOptions): Promise<RunResult> {
  const { input, timeoutMs, signal, ...spawnOptions } = options;
  if (signal?.aborted === true) {
    return { kind: 'failed', reason: 'aborted', message: 'cancelled', stdout: '', stderr: '' };
  }
  const child = spawnChild({ ...spawnOptions, stdin: input === undefined ? 'ignore' : 'pipe' });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout.on('data', (d: Buffer) => out.push(d));
  child.stderr.on('data', (d: Buffer) => err.push(d));
  // A child that exits without reading all its input closes the pipe under us; its exit status
  // says what happened, the EPIPE adds nothing.
  child.stdin?.on('error', () => undefined);
  child.stdin?.end(input);

  // Set by the timer and the abort listener, read after the process ended.
  const why = { timedOut: false, aborted: false };
  const timer =
    timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          why.timedOut = child.kill('SIGKILL');
        }, timeoutMs);
  const onAbort = () => {
    why.aborted = child.kill('SIGKILL');
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  const output = () => ({
    stdout: Buffer.concat(out).toString('utf8'),
    stderr: Buffer.concat(err).toString('utf8'),
  });
  try {
    const exit = await child.closed;
    if (why.aborted)
      return { kind: 'failed', reason: 'aborted', message: 'cancelled', ...output() };
    if (why.timedOut) {
      const message = `timed out after ${timeoutMs ?? 0} ms`;
      return { kind: 'failed', reason: 'timeout', message, ...output() };
    }
    if (exit.code === null) {
      const message = `killed by ${exit.signal ?? 'a signal'}`;
      return { kind: 'failed', reason: 'killed', message, ...output() };
    }
    return { kind: 'exited', exitCode: exit.code, ...output() };
  } catch (error) {
    if (!isSpawnError(error)) throw error;
    return { kind: 'failed', reason: 'spawn', message: error.message, ...output() };
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
}

/** This process's environment (unset entries dropped), with `overrides` on top. */
export function inheritedEnv(
  overrides: Readonly<Record<string, string>> = {},
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined) env[key] = value;
  return { ...env, ...overrides };
}
