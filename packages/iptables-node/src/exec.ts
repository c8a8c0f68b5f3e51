import { inheritedEnv, runProcess } from '@allocnet/spawn';
import type { RunResult } from '@allocnet/spawn';

/** One process to run: an argv (never a shell string) and optional stdin. */
export interface CommandSpec {
  readonly file: string;
  readonly args: readonly string[];
  /** Written to stdin, which is otherwise closed. */
  readonly input?: string;
  readonly signal?: AbortSignal;
  readonly timeoutMs?: number;
  /**
   * Given stdout piece by piece as it arrives, in order, before `run` resolves (a reader that
   * parses as the process writes). An exec that has the output only at the end gives it once;
   * the result holds it whole all the same. It must not throw.
   */
  readonly onStdout?: (chunk: Buffer) => void;
}

/**
 * How a process ended (@allocnet/spawn's `RunResult`). A non-zero exit is a result, not an
 * exception: the caller decides what it means. `failed` is for a process that did not start, ran
 * out of time or was cancelled.
 */
export type CommandResult = RunResult;

/**
 * The seam between this package and processes (what `PluginExec` is to @allocnet/cni);
 * `createSpawnExec` is the real one, `createRecordingExec` (`./testing`) the fake.
 */
export interface CommandExec {
  run(spec: CommandSpec): Promise<CommandResult>;
}

/**
 * The real `CommandExec`, on @allocnet/spawn's `runProcess` (posix_spawn: starting iptables does
 * not fork the agent, which costs 6 ms or more per command from an agent-sized process;
 * docs/spawn.md): no shell, the agent's environment with `LC_ALL=C` so messages read the same
 * everywhere, stdin /dev/null unless `input` is given, output kept whole, SIGKILL at the timeout
 * ("timed out after N ms") or on abort ("cancelled"). The timeout, abort and how a process ended
 * are @allocnet/spawn's, the same for plugins and `ip netns`.
 */
export function createSpawnExec(): CommandExec {
  return {
    run(spec: CommandSpec): Promise<CommandResult> {
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
