import { isSpawnError, spawnChild } from '@allocnet/spawn';
import type { RunResult, SpawnError, SpawnMethod } from '@allocnet/spawn';

/** A plugin process to start. `env` is the whole environment: nothing is inherited. */
export interface PluginStartRequest {
  readonly path: string;
  readonly env: Readonly<Record<string, string>>;
  /** Counted from when the plugin gets its stdin. */
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
}

/** One plugin process to run to its end. */
export interface PluginExecRequest extends PluginStartRequest {
  readonly stdin: string;
}

/**
 * How a plugin process ended (@allocnet/spawn's `RunResult`). A non-zero exit is a result;
 * `failed` means it did not run to an end.
 */
export type PluginExecResult = RunResult;

/** A started plugin, waiting for its stdin. */
export interface StartedPlugin {
  /** Writes stdin, closes it, and resolves how the process ended. Call once. */
  run(stdin: string): Promise<PluginExecResult>;
  /** Kills a plugin that will not get its stdin (it has done nothing yet). */
  cancel(): void;
}

/**
 * The seam between the runtime and processes (libcni's `Exec`). `start` begins the process at
 * once and lets it wait for stdin: the runtime starts the next plugin of a chain while the current
 * one runs, so process start-up (fork, exec, the Go runtime's init) overlaps plugin work. A plugin
 * reads its whole configuration from stdin before it acts (the spec gives it no other), so a
 * started plugin has done nothing until `run`.
 */
export interface PluginExec {
  start(request: PluginStartRequest): StartedPlugin;
}

/** Starts a plugin and runs it with `stdin`: what a caller without a chain needs. */
export function execPlugin(
  exec: PluginExec,
  request: PluginExecRequest,
): Promise<PluginExecResult> {
  return exec.start(request).run(request.stdin);
}

export interface NodePluginExecOptions {
  /**
   * Run plugins inside this network namespace (a name under /run/netns, or /run/netns/<name>)
   * through `ip netns exec`, which also gives them that namespace's /sys. Default: this
   * process's namespace. Tests and benchmarks use it for the namespace that stands for the node.
   */
  readonly netns?: string;
  /** Fresh spawns after ETXTBSY ("text file busy": the binary is still open for writing). Default 5. */
  readonly textBusyRetries?: number;
  /** Wait between those spawns. Default 100 ms. */
  readonly textBusyDelayMs?: number;
  /** How to wait; tests pass one that resolves when they are ready. */
  readonly sleep?: (ms: number) => Promise<void>;
  /**
   * How plugin processes start. Default `posix_spawn` (through @allocnet/spawn), which does not
   * fork this process: node:child_process's fork costs more the larger the agent is (docs/spawn.md).
   */
  readonly spawnMethod?: SpawnMethod;
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function netnsName(netns: string): string {
  const name = netns.startsWith('/run/netns/') ? netns.slice('/run/netns/'.length) : netns;
  if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]*$/.test(name)) {
    throw new RangeError(`netns ${JSON.stringify(netns)} is not a name under /run/netns`);
  }
  return name;
}

interface Ended {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly spawnError?: SpawnError;
}

/** One spawn: the process, and a promise of how it ended (never rejects). */
function spawnOnce(
  file: string,
  args: readonly string[],
  env: Readonly<Record<string, string>>,
  method: SpawnMethod | undefined,
) {
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  const output = () => ({
    stdout: Buffer.concat(stdout).toString('utf8'),
    stderr: Buffer.concat(stderr).toString('utf8'),
  });
  const child = spawnChild({ file, args, env, ...(method === undefined ? {} : { method }) });
  child.stdout.on('data', (d: Buffer) => stdout.push(d));
  child.stderr.on('data', (d: Buffer) => stderr.push(d));
  // A plugin that exits without reading all of its stdin closes the pipe under us; its exit status
  // says what happened, the EPIPE adds nothing.
  child.stdin?.on('error', () => undefined);
  const ended: Promise<Ended> = child.closed.then(
    (exit) => exit,
    (error: unknown) => {
      if (isSpawnError(error)) return { code: null, signal: null, spawnError: error };
      throw error;
    },
  );
  return { child, ended, output };
}

/**
 * The real `PluginExec`, on @allocnet/spawn (posix_spawn, so starting a plugin does not fork the
 * agent): the plugin path is the whole argv, the environment is exactly the request's, and the
 * process is killed (SIGKILL) at the timeout or when the signal aborts. (execa, on
 * node:child_process, costs about 1.2 ms more per process here even from a small process, measured;
 * a chain runs four or more.)
 */
export function createNodePluginExec(options: NodePluginExecOptions = {}): PluginExec {
  const prefix =
    options.netns === undefined ? [] : ['ip', 'netns', 'exec', netnsName(options.netns)];
  const retries = options.textBusyRetries ?? 5;
  const delayMs = options.textBusyDelayMs ?? 100;
  const sleep = options.sleep ?? defaultSleep;

  return {
    start(request) {
      const file = prefix[0] ?? request.path;
      const args = prefix.length === 0 ? [] : [...prefix.slice(1), request.path];
      let current = spawnOnce(file, args, request.env, options.spawnMethod);
      let cancelled = false;
      return {
        cancel() {
          cancelled = true;
          current.child.kill('SIGKILL');
        },
        async run(stdin) {
          for (let attempt = 0; ; attempt++) {
            if (request.signal?.aborted === true || cancelled) {
              current.child.kill('SIGKILL');
              await current.ended;
              return {
                kind: 'failed',
                reason: 'aborted',
                message: 'cancelled',
                ...current.output(),
              };
            }
            // Set by the timer and the abort listener, read after the process ended.
            const why = { timedOut: false, aborted: false };
            const timer = setTimeout(() => {
              why.timedOut = true;
              current.child.kill('SIGKILL');
            }, request.timeoutMs);
            const onAbort = () => {
              why.aborted = true;
              current.child.kill('SIGKILL');
            };
            request.signal?.addEventListener('abort', onAbort, { once: true });
            current.child.stdin?.end(stdin);
            const end = await current.ended;
            clearTimeout(timer);
            request.signal?.removeEventListener('abort', onAbort);
            const output = current.output();
            if (end.spawnError !== undefined) {
              if (end.spawnError.code === 'ETXTBSY' && attempt < retries) {
                // The binary is being written (an upgrade in progress); a fresh spawn after a
                // short wait usually finds it complete. libcni retries the same way (it waits 1 s).
                await sleep(delayMs);
                current = spawnOnce(file, args, request.env, options.spawnMethod);
                continue;
              }
              return {
                kind: 'failed',
                reason: 'spawn',
                message: end.spawnError.message,
                ...output,
              };
            }
            if (why.aborted)
              return { kind: 'failed', reason: 'aborted', message: 'cancelled', ...output };
            if (why.timedOut)
              return {
                kind: 'failed',
                reason: 'timeout',
                message: `killed after ${request.timeoutMs} ms`,
                ...output,
              };
            if (end.code === null)
              return {
                kind: 'failed',
                reason: 'killed',
                message: `killed by ${end.signal ?? 'a signal'}`,
                ...output,
              };
            return { kind: 'exited', exitCode: end.code, ...output };
          }
        },
      };
    },
  };
}
