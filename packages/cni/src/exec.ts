import { setTimeout as wait } from 'node:timers/promises';
import { NETNS_RUN_DIR, resolveNetns } from '@allocnet/netns';
import { startProcess } from '@allocnet/spawn';
import type { RunResult, SpawnMethod } from '@allocnet/spawn';
import { invalidArgument } from './errors.js';

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

const defaultSleep = (ms: number): Promise<void> => wait(ms);

/**
 * The name `ip netns exec` needs for `netns` (a name, or a path under /run/netns), by
 * @allocnet/netns's rule; `invalid-argument` naming the field `netns` otherwise.
 */
function netnsName(netns: string): string {
  const resolved = resolveNetns(netns);
  if ('problem' in resolved)
    throw invalidArgument('netns', `${JSON.stringify(netns)} ${resolved.problem}`);
  if (resolved.name === undefined)
    throw invalidArgument('netns', `${JSON.stringify(netns)} is not a name under ${NETNS_RUN_DIR}`);
  return resolved.name;
}

/** How long a plugin's output may stay open after it exited (docs/cni.md). */
export const PLUGIN_OUTPUT_GRACE_MS = 250;

/**
 * The real `PluginExec`, on @allocnet/spawn's `startProcess` (posix_spawn, so starting a plugin
 * does not fork the agent): the plugin path is the whole argv, the environment is exactly the
 * request's, and the process — with its whole process group — is killed (SIGKILL) at the
 * timeout or when the signal aborts. (Not execa: node:child_process forks the agent for each
 * plugin, and a chain runs four or more; docs/spawn.md.)
 *
 * "Text file busy" is retried here, not in @allocnet/spawn: it is libcni's answer to plugin
 * binaries being copied into place while the runtime runs them (an installer upgrading
 * /opt/cni/bin), and the options and defaults are this package's.
 */
export function createNodePluginExec(options: NodePluginExecOptions = {}): PluginExec {
  const prefix =
    options.netns === undefined ? [] : ['ip', 'netns', 'exec', netnsName(options.netns)];
  const retries = options.textBusyRetries ?? 5;
  const delayMs = options.textBusyDelayMs ?? 100;
  const sleep = options.sleep ?? defaultSleep;

  return {
    start(request) {
      const startOnce = () =>
        startProcess({
          file: prefix[0] ?? request.path,
          args: prefix.length === 0 ? [] : [...prefix.slice(1), request.path],
          env: request.env,
          timeoutMs: request.timeoutMs,
          // Its own process group: the timeout (or an abort) ends what it started too. And once it
          // exited, a process it left holding its stdout (a script's `sleep &`, a daemon) gets
          // PLUGIN_OUTPUT_GRACE_MS, then the exec ends: the chain is not held by it.
          detached: true,
          outputGraceMs: PLUGIN_OUTPUT_GRACE_MS,
          ...(request.signal === undefined ? {} : { signal: request.signal }),
          ...(options.spawnMethod === undefined ? {} : { method: options.spawnMethod }),
        });
      let current = startOnce();
      let cancelled = false;
      return {
        cancel() {
          cancelled = true;
          current.cancel();
        },
        async run(stdin) {
          for (let attempt = 0; ; attempt++) {
            const result = await current.run(stdin);
            if (result.kind === 'exited' || result.code !== 'ETXTBSY' || attempt >= retries)
              return result;
            // The binary is being written (an upgrade in progress); a fresh spawn after a short
            // wait usually finds it complete. libcni retries the same way (it waits 1 s).
            await sleep(delayMs);
            current = startOnce();
            // A cancel during the wait ends the fresh process before it gets its stdin.
            if (cancelled) current.cancel();
          }
        },
      };
    },
  };
}
