import type { RunResult } from '@allocnet/spawn';

/** One process to run: an argv (never a shell string) and optional stdin. */
export interface CommandSpec {
  readonly file: string;
  readonly args: readonly string[];
  /** Written to stdin, which is otherwise closed. */
  readonly input?: string;
  readonly signal?: AbortSignal;
  readonly timeoutMs?: number;
}

/**
 * How a process ended (@allocnet/spawn's `RunResult`). A non-zero exit is a result, not an
 * exception: the caller decides what it means. `failed` is for a process that did not start, ran
 * out of time or was cancelled.
 */
export type CommandResult = RunResult;

/** The seam between this package and processes; `createSpawnRunner` is the real one. */
export interface CommandRunner {
  run(spec: CommandSpec): Promise<CommandResult>;
}

/** What libraries here log through; a winston logger fits it. */
export interface Logger {
  debug(message: string, meta?: Record<string, unknown>): void;
  warn(message: string, meta?: Record<string, unknown>): void;
}

export const silentLogger: Logger = {
  debug() {
    // Silent by design: the default when the caller passes no logger.
  },
  warn() {
    // Silent by design: the default when the caller passes no logger.
  },
};
