// How one `Iptables` runs a command: its family's binaries, the nsenter prefix for its namespace,
// the per-process timeout, a debug line per command, and what a failed command becomes (an
// `IptablesError` whose message starts with the command). Every module of the facade
// (listing.ts, changes.ts, restore.ts, handles.ts) runs its processes through here.
import { IptablesError, classifyFailure, isIptablesError } from './errors.js';
import type { IptablesErrorCode } from './errors.js';
import type { CommandExec, CommandResult } from './exec.js';
import type { Logger } from './logger.js';
import { displayArgs } from './quote.js';
import { createSaveStream } from './save.js';
import type { SavedTable } from './save.js';
import { checkTable } from './validate.js';
import type { Family, Table } from './validate.js';

/** Per call: a cancel signal. */
export interface CallOptions {
  readonly signal?: AbortSignal;
}

/** `restore`'s options: a cancel signal, and whether only each table is all or nothing. */
export type RestoreOptions = CallOptions & {
  readonly perTable?: boolean;
};

/** `save`'s options: a cancel signal, one table or all, and a filter over lines (see `parseIptablesSave`). */
export type SaveOptions = CallOptions & {
  readonly table?: Table;
  readonly lines?: (line: string) => boolean;
};

export interface Binaries {
  readonly main: string;
  readonly save: string;
  readonly restore: string;
}

const BINARIES: Record<Family, Binaries> = {
  ipv4: { main: 'iptables', save: 'iptables-save', restore: 'iptables-restore' },
  ipv6: { main: 'ip6tables', save: 'ip6tables-save', restore: 'ip6tables-restore' },
};

const FAILED_CODES: Record<'spawn' | 'killed' | 'timeout' | 'aborted', IptablesErrorCode> = {
  spawn: 'spawn',
  killed: 'unknown',
  timeout: 'timeout',
  aborted: 'aborted',
};

/** iptables' stderr on one line: its first three non-blank lines, trimmed, joined by a space. */
function firstLines(text: string): string {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .slice(0, 3)
    .join(' ');
}

export interface CommandsOptions {
  readonly family: Family;
  /** A checked netns path, or undefined for this process's namespace. */
  readonly netns: string | undefined;
  readonly exec: CommandExec;
  readonly logger: Logger;
  readonly timeoutMs: number;
  /** `--wait`, with its seconds when there are any. */
  readonly wait: readonly string[];
  readonly nsenter: string;
}

export interface Commands {
  readonly binaries: Binaries;
  readonly wait: readonly string[];
  readonly logger: Logger;
  /** `iptables --wait [<seconds>] -t <table>`, the start of every rule and chain command. */
  readonly tableArgs: (table: Table) => string[];
  /** What a message shows as "the command": the iptables argv, then where it ran. */
  describe(argv: readonly string[]): string;
  /** Runs `argv` (with the nsenter prefix); any ending is a result. `command` is what really ran. */
  execute(
    argv: readonly string[],
    call: CallOptions | undefined,
    input?: string,
    onStdout?: (chunk: Buffer) => void,
  ): Promise<{ result: CommandResult; command: readonly string[] }>;
  /** The error for a command that did not exit 0; `context` goes after the command. */
  failure(
    argv: readonly string[],
    command: readonly string[],
    result: CommandResult,
    context?: string,
  ): IptablesError;
  /** Runs an iptables command; resolves stdout, throws `IptablesError` for any failure. */
  run(
    argv: readonly string[],
    call: CallOptions | undefined,
    onStdout?: (chunk: Buffer) => void,
  ): Promise<string>;
  /** `read()` (a parse), its `parse` error given again with the command that printed the text. */
  parsed<T>(argv: readonly string[], read: () => T | Promise<T>): Promise<T>;
  /** iptables-save, parsed as it is printed; `start`: its output's first 200 characters. */
  save(call?: SaveOptions): Promise<{ tables: SavedTable[]; start: string }>;
}

export function createCommands(options: CommandsOptions): Commands {
  const { netns, exec, logger, timeoutMs, wait, nsenter } = options;
  const binaries = BINARIES[options.family];

  const tableArgs = (table: Table): string[] => [binaries.main, ...wait, '-t', checkTable(table)];

  const describe = (argv: readonly string[]): string =>
    `${displayArgs(argv)}${netns === undefined ? '' : ` (in netns ${netns})`}`;

  async function execute(
    argv: readonly string[],
    call: CallOptions | undefined,
    input?: string,
    onStdout?: (chunk: Buffer) => void,
  ): Promise<{ result: CommandResult; command: readonly string[] }> {
    const [file, ...args] = netns === undefined ? argv : [nsenter, `--net=${netns}`, '--', ...argv];
    const command = [file as string, ...args];
    const started = performance.now();
    const result = await exec.run({
      file: file as string,
      args,
      timeoutMs,
      ...(input === undefined ? {} : { input }),
      ...(call?.signal === undefined ? {} : { signal: call.signal }),
      ...(onStdout === undefined ? {} : { onStdout }),
    });
    logger.debug('iptables command', {
      command: describe(argv),
      ms: Math.round(performance.now() - started),
      ...(result.kind === 'exited' ? { exitCode: result.exitCode } : { failed: result.reason }),
    });
    return { result, command };
  }

  function failure(
    argv: readonly string[],
    command: readonly string[],
    result: CommandResult,
    context = '',
  ): IptablesError {
    if (result.kind === 'failed') {
      return new IptablesError(`${describe(argv)}${context} failed: ${result.message}`, {
        code: FAILED_CODES[result.reason],
        command,
        stderr: result.stderr,
      });
    }
    const stderr = result.stderr.trim() === '' ? 'no error message' : firstLines(result.stderr);
    return new IptablesError(
      `${describe(argv)}${context} failed (exit status ${result.exitCode}): ${stderr}`,
      {
        code: classifyFailure(result.exitCode, result.stderr),
        command,
        exitCode: result.exitCode,
        stderr: result.stderr,
      },
    );
  }

  async function run(
    argv: readonly string[],
    call: CallOptions | undefined,
    onStdout?: (chunk: Buffer) => void,
  ): Promise<string> {
    const { result, command } = await execute(argv, call, undefined, onStdout);
    if (result.kind === 'exited' && result.exitCode === 0) return result.stdout;
    throw failure(argv, command, result);
  }

  async function parsed<T>(argv: readonly string[], read: () => T | Promise<T>): Promise<T> {
    try {
      return await read();
    } catch (error) {
      if (isIptablesError(error) && error.code === 'parse') {
        throw new IptablesError(`${describe(argv)} printed what cannot be read: ${error.message}`, {
          code: 'parse',
          cause: error,
        });
      }
      throw error;
    }
  }

  async function save(call?: SaveOptions): Promise<{ tables: SavedTable[]; start: string }> {
    const argv = [
      binaries.save,
      ...(call?.table === undefined ? [] : ['-t', checkTable(call.table)]),
    ];
    // Parsed as it is printed: the parse overlaps iptables-save's writing.
    const stream = createSaveStream(call?.lines);
    await run(argv, call, (chunk) => {
      stream.write(chunk);
    });
    const tables = await parsed(argv, () => stream.end());
    return { tables, start: stream.start(200) };
  }

  return { binaries, wait, logger, tableArgs, describe, execute, failure, run, parsed, save };
}
