import { Command, CommanderError } from 'commander';
import { kindOf, messageOf } from '@allocnet/base';
import type { ErrorKind } from '@allocnet/base';
import { agentCommand, isAgentError, normalizeAgentArgs } from '@allocnet/agent';
import { isDevError, runDevAgent } from '@allocnet/dev-sandbox';
import { cniCommand } from './cni-command.js';
import { isCliError } from './errors.js';
import { allocCommand } from './alloc-command.js';
import { fleetCommand } from './fleet-command.js';
import { cleanupCommand, leaksCommand } from './operator-command.js';
import { versionCommand } from './version-command.js';
import type { CliIo } from './io.js';

/** Builds the `allocnet` command tree. */
export function createProgram(io: CliIo): Command {
  const program = new Command('allocnet')
    .description('allocnet: allocation networking on CNI plugins (operators’ tools)')
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) })
    .showHelpAfterError();
  // `agent --dev` runs the agent in @allocnet/dev-sandbox's sandbox.
  program.addCommand(agentCommand(io, { dev: { run: runDevAgent, isFailure: isDevError } }));
  program.addCommand(cniCommand(io));
  program.addCommand(allocCommand(io));
  program.addCommand(cleanupCommand(io));
  program.addCommand(leaksCommand(io));
  program.addCommand(fleetCommand(io));
  program.addCommand(versionCommand(io));
  // Sub-commands report usage errors through exitOverride as well.
  for (const command of program.commands) {
    command.exitOverride().configureOutput({
      writeOut: (s) => io.stdout.write(s),
      writeErr: (s) => io.stderr.write(s),
    });
    for (const sub of command.commands) {
      sub.exitOverride().configureOutput({
        writeOut: (s) => io.stdout.write(s),
        writeErr: (s) => io.stderr.write(s),
      });
    }
  }
  return program;
}

/**
 * The one mapping of error kinds (@allocnet/base) to exit statuses. Every kind is an operation
 * that failed, whatever the reason, and exits 1 (docs/cli.md: scripts test for 0, 1 and 2); 2 is
 * the CLI's own usage error, found before anything ran. A kind gets a status of its own here, and
 * only here, the day a script needs to tell it apart.
 */
export const KIND_EXIT: Readonly<Record<ErrorKind, number>> = {
  invalid: 1,
  'not-found': 1,
  conflict: 1,
  unavailable: 1,
  aborted: 1,
  broken: 1,
  exhausted: 1,
  internal: 1,
};

/** Usage errors: bad flags or arguments, nothing ran. */
export const USAGE_EXIT = 2;

/**
 * Runs `allocnet` with `argv` (without node and script) and resolves the exit status: 0 on
 * success, 1 when the operation failed (the message goes to stderr), 2 for a usage error.
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  try {
    // `allocnet agent -dev` is Nomad's spelling; commander has no single-dash long options.
    await createProgram(io).parseAsync(normalizeAgentArgs(argv), { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end here with exit code 0; `agent --dev` ends with the agent's status.
      if (error.code === 'allocnet.agent.dev') return error.exitCode;
      return error.exitCode === 0 ? 0 : USAGE_EXIT;
    }
    if (isAgentError(error)) {
      io.stderr.write(`allocnet agent: ${error.message}\n`);
      return KIND_EXIT[error.kind];
    }
    // The CLI's own errors (usage, a reported failure, an agent's answer) and the libraries'
    // (--local, cni) have a kind; a usage error, found before anything ran, exits 2.
    const kind = kindOf(error);
    if (kind !== undefined) {
      const message = messageOf(error);
      if (message !== '') io.stderr.write(`allocnet: ${message}\n`);
      return isCliError(error) && error.code === 'usage' ? USAGE_EXIT : KIND_EXIT[kind];
    }
    // Anything else is a bug: its stack says where.
    throw error;
  }
}
