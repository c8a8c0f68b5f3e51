// The `allocnet` command tree and its entry. Every command's flags and help are defined here at
// once and cost little; what a command runs (the contract's client, the CNI runtime, the
// configurator, the agent itself) is imported by its action, so that `allocnet version` does not
// load the agent nor `allocnet alloc list` the configurator (docs/cli.md). `allocnet agent` is
// the one command defined by another package: its definition comes with the agent, which is
// loaded when the command line runs it and stood in for in the list of commands otherwise.
import { Command, CommanderError, Option } from 'commander';
import type * as AgentPackage from '@allocnet/agent';
import type * as SandboxPackage from '@allocnet/dev-sandbox';
import { AGENT_COMMAND_DESCRIPTION, normalizeAgentArgs } from '@allocnet/agent/command-line';
import { kindOf, messageOf } from '@allocnet/base';
import type { ErrorKind } from '@allocnet/base';
import { cniCommand } from './cni-command.js';
import { isCliError } from './errors.js';
import { allocCommand } from './alloc-command.js';
import { fleetCommand } from './fleet-command.js';
import { cleanupCommand, leaksCommand } from './operator-command.js';
import { versionCommand } from './version-command.js';
import type { CliIo } from './io.js';

/**
 * What `allocnet --help` lists for `agent` when the agent is not loaded: its name, its
 * description, and an option (hidden) so that the list says `agent [options]` as for the real
 * command, whose options commander counts (cli.test.ts compares both helps).
 */
function agentStandIn(): Command {
  return new Command('agent')
    .description(AGENT_COMMAND_DESCRIPTION)
    .addOption(new Option('--config <file>').hideHelp());
}

/**
 * Builds the `allocnet` command tree. `agent` is the agent's own command (@allocnet/agent's
 * `agentCommand`, see `loadAgentCommand`); without it, a stand-in with its name and description
 * lists it in `allocnet --help`, and runs nothing.
 */
export function createProgram(io: CliIo, agent?: Command): Command {
  const program = new Command('allocnet')
    .description('allocnet: allocation networking on CNI plugins (operators’ tools)')
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) })
    .showHelpAfterError();
  program.addCommand(agent ?? agentStandIn());
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
 * True when `argv` runs `allocnet agent` or asks for its help (`allocnet help agent`): its first
 * word (the program has no options of its own before it but `-h`/`--help`) is `agent`, or `help`
 * followed by `agent`.
 */
export function runsAgent(argv: readonly string[]): boolean {
  const words = argv.filter((a) => !a.startsWith('-'));
  return words[0] === 'agent' || (words[0] === 'help' && words[1] === 'agent');
}

/** The packages `allocnet agent` runs, which the command's bundle leaves out (scripts/bundle.mjs). */
export type AgentPackages = readonly [typeof AgentPackage, typeof SandboxPackage];

/**
 * Imports the agent's packages. main.ts gives its own: the bundle runs as a script compiled with
 * its code cache (code-cache.ts), where an `import()` has no module loader to go to.
 */
export type LoadAgentPackages = () => Promise<AgentPackages>;

const importAgentPackages: LoadAgentPackages = () =>
  Promise.all([import('@allocnet/agent'), import('@allocnet/dev-sandbox')]);

/** The agent's command, with `--dev` run in @allocnet/dev-sandbox's sandbox, and its error test. */
async function loadAgentCommand(io: CliIo, load: LoadAgentPackages) {
  const [agent, sandbox] = await load();
  return {
    command: agent.agentCommand(io, {
      dev: { run: sandbox.runDevAgent, isFailure: sandbox.isDevError },
    }),
    isAgentError: agent.isAgentError,
  };
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

/**
 * A commander error (help or version shown, a usage error, the agent's `--dev` status), told by
 * its class's name and code rather than `instanceof`: `allocnet agent` is @allocnet/agent's
 * command, made with that package's commander, a copy other than the one bundled into this
 * command (scripts/bundle.mjs), whose errors are not instances of this one's.
 */
function isCommanderError(error: unknown): error is CommanderError {
  if (error instanceof CommanderError) return true;
  if (!(error instanceof Error)) return false;
  const { code, exitCode } = error as Partial<CommanderError>;
  return (
    (error.name === 'CommanderError' || error.name === 'InvalidArgumentError') &&
    typeof exitCode === 'number' &&
    typeof code === 'string' &&
    (code.startsWith('commander.') || code === 'allocnet.agent.dev')
  );
}

/** Usage errors: bad flags or arguments, nothing ran. */
export const USAGE_EXIT = 2;

/** The output's reader closed the pipe early: as a shell reports a death by SIGPIPE. */
export const SIGPIPE_EXIT = 141;

/**
 * Runs `allocnet` with `argv` (without node and script) and resolves the exit status: 0 on
 * success, 1 when the operation failed (the message goes to stderr), 2 for a usage error.
 * `loadAgent` imports the agent's packages for `allocnet agent` (default: an `import()` here).
 */
export async function runCli(
  argv: readonly string[],
  io: CliIo,
  loadAgent: LoadAgentPackages = importAgentPackages,
): Promise<number> {
  // `allocnet agent -dev` is Nomad's spelling; commander has no single-dash long options.
  const args = normalizeAgentArgs(argv);
  const agent = runsAgent(args) ? await loadAgentCommand(io, loadAgent) : undefined;
  try {
    await createProgram(io, agent?.command).parseAsync(args, { from: 'user' });
    return 0;
  } catch (error) {
    if (isCommanderError(error)) {
      // --help and --version end here with exit code 0; `agent --dev` ends with the agent's status.
      if (error.code === 'allocnet.agent.dev') return error.exitCode;
      return error.exitCode === 0 ? 0 : USAGE_EXIT;
    }
    if (agent?.isAgentError(error) === true) {
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
