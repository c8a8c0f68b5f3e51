// How the manager runs one command: through the `CommandExec` seam of @allocnet/spawn, with the
// manager's timeout, and what a command that did not end well becomes (a `NetnsError` that says
// what `ip` said, after the command). Keeps no state between calls: calls may run in parallel.
import type { CommandExec } from '@allocnet/spawn';
import { NetnsError } from './errors.js';
import type { NetnsCommandOutcome } from './errors.js';

/** How one command ended: whether it exited 0, its stdout, and the outcome errors carry. */
export interface Ran {
  readonly ok: boolean;
  readonly stdout: string;
  readonly outcome: NetnsCommandOutcome;
}

export interface NetnsCommands {
  /** Runs a command; any ending but an abort is a result. An abort throws `aborted`. */
  readonly run: (file: string, args: readonly string[], signal?: AbortSignal) => Promise<Ran>;
  /** Runs a command that must exit 0; its stdout, else `command-failed`. */
  readonly must: (file: string, args: readonly string[], signal?: AbortSignal) => Promise<string>;
  /** The `command-failed` error for an outcome. */
  readonly failed: (outcome: NetnsCommandOutcome) => NetnsError;
}

export function createNetnsCommands(exec: CommandExec, timeoutMs: number): NetnsCommands {
  async function run(file: string, args: readonly string[], signal?: AbortSignal): Promise<Ran> {
    const argv = [file, ...args];
    const result = await exec.run({
      file,
      args,
      timeoutMs,
      ...(signal === undefined ? {} : { signal }),
    });
    const outcome: NetnsCommandOutcome = {
      argv,
      exitCode: result.kind === 'exited' ? result.exitCode : undefined,
      stderr: result.stderr.trim(),
      ...(result.kind === 'failed'
        ? { failure: { reason: result.reason, message: result.message } }
        : {}),
    };
    if (result.kind === 'failed' && result.reason === 'aborted') {
      throw new NetnsError(`${argv.join(' ')} was aborted`, { code: 'aborted', command: outcome });
    }
    return {
      ok: result.kind === 'exited' && result.exitCode === 0,
      stdout: result.stdout,
      outcome,
    };
  }

  function failed(outcome: NetnsCommandOutcome): NetnsError {
    const why = outcome.stderr || outcome.failure?.message || 'no error message';
    return new NetnsError(
      `${outcome.argv.join(' ')} failed (exit status ${outcome.exitCode ?? 'none'}): ${why}`,
      { code: 'command-failed', command: outcome },
    );
  }

  async function must(file: string, args: readonly string[], signal?: AbortSignal) {
    const r = await run(file, args, signal);
    if (!r.ok) throw failed(r.outcome);
    return r.stdout;
  }

  return { run, must, failed };
}
