import { execa } from 'execa';
import type { CommandResult, CommandRunner, CommandSpec } from './runner.js';

/**
 * The real `CommandRunner`, on execa: no shell, `LC_ALL=C` so messages read the same everywhere,
 * stdin closed unless `input` is given, output kept whole.
 */
export function createExecaRunner(): CommandRunner {
  return {
    async run(spec: CommandSpec): Promise<CommandResult> {
      const result = await execa(spec.file, [...spec.args], {
        reject: false,
        env: { LC_ALL: 'C' },
        stripFinalNewline: false,
        ...(spec.input === undefined ? { stdin: 'ignore' as const } : { input: spec.input }),
        ...(spec.signal === undefined ? {} : { cancelSignal: spec.signal }),
        ...(spec.timeoutMs === undefined ? {} : { timeout: spec.timeoutMs }),
      });
      const stdout = typeof result.stdout === 'string' ? result.stdout : '';
      const stderr = typeof result.stderr === 'string' ? result.stderr : '';
      if (result.isCanceled) {
        return { kind: 'failed', reason: 'aborted', message: 'cancelled', stdout, stderr };
      }
      if (result.timedOut) {
        return {
          kind: 'failed',
          reason: 'timeout',
          message: `timed out after ${spec.timeoutMs ?? 0} ms`,
          stdout,
          stderr,
        };
      }
      if (result.exitCode === undefined) {
        // Either it did not start (ENOENT, EACCES) or a signal nobody here sent ended it.
        return result.signal === undefined
          ? {
              kind: 'failed',
              reason: 'spawn',
              message: result.originalMessage ?? 'did not start',
              stdout,
              stderr,
            }
          : {
              kind: 'failed',
              reason: 'killed',
              message: `killed by ${result.signal}`,
              stdout,
              stderr,
            };
      }
      return { kind: 'exited', exitCode: result.exitCode, stdout, stderr };
    },
  };
}
