import type { CommandResult, CommandRunner, CommandSpec } from '../runner.js';

/** What the recording runner saw for one process. */
export interface RecordedCommand {
  readonly file: string;
  readonly args: readonly string[];
  readonly input: string | undefined;
  /** `file` and `args` as one array, for exact argv assertions. */
  readonly argv: readonly string[];
}

export type Reply = CommandResult | ((spec: CommandSpec) => CommandResult);

/** A fake `CommandRunner` that records every command and answers from a queue of replies. */
export interface RecordingRunner extends CommandRunner {
  readonly calls: readonly RecordedCommand[];
  /** Queues replies, used in order; when the queue is empty the runner answers `exit 0`. */
  reply(...replies: Reply[]): this;
}

/** A successful exit with this stdout. */
export function ok(stdout = ''): CommandResult {
  return { kind: 'exited', exitCode: 0, stdout, stderr: '' };
}

/** A failed exit with this status and stderr. */
export function exit(exitCode: number, stderr: string, stdout = ''): CommandResult {
  return { kind: 'exited', exitCode, stdout, stderr };
}

export function createRecordingRunner(): RecordingRunner {
  const calls: RecordedCommand[] = [];
  const queue: Reply[] = [];
  return {
    calls,
    reply(...replies) {
      queue.push(...replies);
      return this;
    },
    run(spec) {
      calls.push({
        file: spec.file,
        args: [...spec.args],
        input: spec.input,
        argv: [spec.file, ...spec.args],
      });
      const next = queue.shift() ?? ok();
      return Promise.resolve(typeof next === 'function' ? next(spec) : next);
    },
  };
}
