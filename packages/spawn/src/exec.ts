// The seam between a library and the processes it runs: @allocnet/iptables-node runs iptables
// through it, @allocnet/netns `ip netns` and nsenter. One shape for both, so one recording fake
// serves any of them and the real one is written once: no shell, the caller's argv, this
// process's environment with LC_ALL=C (the callers read English messages), and `startProcess`'s
// timeout, abort and results.
import { inheritedEnv, runProcess } from './run.js';
import type { RunResult } from './run.js';

/** One process to run: an argv (never a shell string) and optional stdin. */
export interface CommandSpec {
  readonly file: string;
  readonly args: readonly string[];
  /** Written to stdin, which is otherwise /dev/null. */
  readonly input?: string;
  /** SIGKILL when it aborts; already aborted: nothing starts (`aborted`). */
  readonly signal?: AbortSignal;
  /** SIGKILL this long after the input was given. Default: none. */
  readonly timeoutMs?: number;
  /**
   * Given stdout piece by piece as it arrives, in order, before `run` resolves (a reader that
   * parses as the process writes). An exec that has the output only at the end gives it once.
   * The reader then has the output: the result's `stdout` is empty. It must not throw.
   */
  readonly onStdout?: (chunk: Buffer) => void;
}

/**
 * What runs one command. `createCommandExec` is the real one; tests pass a fake that records
 * each spec and answers a `RunResult` (`@allocnet/iptables-node/testing` has one). A non-zero
 * exit is a result, not an exception: the caller decides what it means.
 */
export interface CommandExec {
  run(spec: CommandSpec): Promise<RunResult>;
}

/**
 * The real `CommandExec`: `runProcess` (posix_spawn, so a large agent is not forked for each
 * command) with this process's environment and LC_ALL=C, stdin /dev/null unless `input` is
 * given, output kept whole, SIGKILL at the timeout (`timed out after N ms`) or on abort
 * (`cancelled`).
 */
export function createCommandExec(): CommandExec {
  return {
    run(spec) {
      return runProcess({
        file: spec.file,
        args: spec.args,
        env: inheritedEnv({ LC_ALL: 'C' }),
        ...(spec.input === undefined ? {} : { input: spec.input }),
        ...(spec.signal === undefined ? {} : { signal: spec.signal }),
        ...(spec.timeoutMs === undefined ? {} : { timeoutMs: spec.timeoutMs }),
        ...(spec.onStdout === undefined ? {} : { onStdout: spec.onStdout }),
      });
    },
  };
}
