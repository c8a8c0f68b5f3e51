import { Command, CommanderError } from 'commander';
import { agentCommand, isAgentError, normalizeAgentArgs } from '@allocnet/agent';
import { isCniError } from '@allocnet/cni';
import { isConfiguratorError } from '@allocnet/cni-configurator';
import { isIptablesError } from '@allocnet/iptables-node';
import { AgentCallError } from './agent-client.js';
import { cniCommand } from './cni-command.js';
import { ExitStatus, UsageError } from './errors.js';
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
  program.addCommand(agentCommand(io));
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
      return error.exitCode === 0 ? 0 : 2;
    }
    if (error instanceof ExitStatus) {
      if (error.message !== '') io.stderr.write(`allocnet: ${error.message}\n`);
      return error.status;
    }
    if (isAgentError(error)) {
      io.stderr.write(`allocnet agent: ${error.message}\n`);
      return 1;
    }
    if (error instanceof UsageError) {
      io.stderr.write(`allocnet: ${error.message}\n`);
      return 2;
    }
    if (
      error instanceof AgentCallError ||
      isCniError(error) ||
      isConfiguratorError(error) ||
      isIptablesError(error)
    ) {
      io.stderr.write(`allocnet: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
}
