// `allocnet agent`: the command that runs the daemon (the CLI mounts it; `allocnet-agent` runs it
// alone). Configuration precedence: flags over ALLOCNET_* environment over the config file.
// `--dev` hands over to a dev sandbox the mounting program gives (`DevSandbox`): the sandbox runs
// this package's bin in a namespace of its own, and this package does not import it.
import { fileURLToPath } from 'node:url';
import { Command, CommanderError, Option } from 'commander';
import { DEFAULT_PLUGIN_DIRS } from '@allocnet/cni';
import { startAgent } from './agent.js';
import type { RunningAgent } from './agent.js';
import { AGENT_COMMAND_DESCRIPTION, normalizeAgentArgs } from './command-line.js';
import { loadAgentConfig } from './config.js';
import type { AgentConfig, AgentFlags } from './config.js';
import { CNI_CACHE_SUBDIR, CNI_QUEUE_SUBDIR, CNI_SOCKET_NAME, DEFAULTS } from './defaults.js';
import { AgentError, isAgentError, messageOf } from './errors.js';
import { createAgentLogger } from './logging.js';
import { serviceManager } from './notify.js';
import { CONFIG_ENV, ENV_SETTINGS } from './settings.js';

/** The signals the agent reacts to. */
export type AgentSignal = 'SIGTERM' | 'SIGINT' | 'SIGHUP';

/** Where signals come from: `process`, or a test's emitter. */
export interface SignalSource {
  on(signal: AgentSignal, listener: () => void): unknown;
  removeListener(signal: AgentSignal, listener: () => void): unknown;
}

/** The command's world: output, environment, signals (the CLI's io plus `signals` and `isTTY`). */
export interface AgentIo {
  readonly stdout: { write(text: string): unknown };
  /** Logs go here. */
  readonly stderr: { write(text: string): unknown; readonly isTTY?: boolean };
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Default `process`. */
  readonly signals?: SignalSource;
}

/** What `--dev` is handed: the command's io and flags, and the agent's bin to run. */
export interface DevSandboxRequest {
  readonly io: AgentIo;
  readonly flags: AgentFlags;
  readonly configFile?: string;
  /** This package's `dist/main.js` (the `allocnet-agent` bin). */
  readonly entry: string;
}

/**
 * The dev sandbox `--dev` runs: @allocnet/dev-sandbox's `{ run: runDevAgent, isFailure:
 * isDevError }`, given by the programs that mount this command (the `allocnet-agent` bin, the
 * CLI). `run` resolves the agent's exit status; a rejection `isFailure` recognises is reported
 * as this command's own (`dev-failed`, its message unchanged), anything else is a bug.
 */
export interface DevSandbox {
  run(request: DevSandboxRequest): Promise<number>;
  isFailure(error: unknown): error is Error;
}

export interface AgentCommandOptions {
  /** Without it, `--dev` fails saying so. */
  readonly dev?: DevSandbox;
}

/** The flags of `allocnet agent`, by commander's option names, as the config loader's flags. */
function flagsOf(options: Record<string, unknown>): AgentFlags {
  const flags: Record<string, string | readonly string[]> = {};
  for (const s of ENV_SETTINGS) {
    if (s.flag === undefined) continue;
    const key = s.flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
    const value = options[key];
    if (typeof value === 'string' || Array.isArray(value))
      flags[s.flag] = value as string | readonly string[];
  }
  return flags;
}

function collect(value: string, previous: readonly string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** Runs the agent until a signal stops it; resolves when it has stopped. */
async function runAgent(
  io: AgentIo,
  load: () => Promise<AgentConfig>,
  config: AgentConfig,
): Promise<void> {
  const signals = io.signals ?? process;
  const logger = createAgentLogger({ ...config.log, stream: io.stderr });
  const manager = serviceManager(io.env, logger);
  const starting = new AbortController();
  let agent: RunningAgent | undefined;
  let stops = 0;
  const onStop = (name: AgentSignal) => () => {
    stops++;
    if (stops === 1)
      manager.tell({ STOPPING: '1', STATUS: `stopping (${name}): draining the calls in flight` });
    if (agent === undefined) {
      logger.info('signal while starting; stopping', { signal: name });
      starting.abort();
      return;
    }
    // A second SIGTERM/SIGINT does not wait for in-flight calls any more.
    void agent.stop(name, { force: stops > 1 });
  };
  const onTerm = onStop('SIGTERM');
  const onInt = onStop('SIGINT');
  const onHup = () => {
    if (agent === undefined) return;
    agent.reload().catch((error: unknown) => {
      logger.error('reload failed', { error: messageOf(error) });
    });
  };
  signals.on('SIGTERM', onTerm);
  signals.on('SIGINT', onInt);
  signals.on('SIGHUP', onHup);
  manager.tell({ STATUS: 'starting: opening the data dir, replaying queued DELs' });
  try {
    agent = await startAgent(config, { logger, signal: starting.signal, reloadConfig: load });
    const quiet = manager.ready(agent);
    try {
      await agent.closed;
    } finally {
      quiet();
    }
  } finally {
    signals.removeListener('SIGTERM', onTerm);
    signals.removeListener('SIGINT', onInt);
    signals.removeListener('SIGHUP', onHup);
  }
}

/** Runs `--dev`; a sandbox failure becomes the command's own `dev-failed`. */
async function runDev(
  dev: DevSandbox | undefined,
  request: Omit<DevSandboxRequest, 'entry'>,
): Promise<number> {
  if (dev === undefined)
    throw new AgentError(
      '--dev is not available: the program that runs this command has no dev sandbox (@allocnet/dev-sandbox)',
      { code: 'dev-failed' },
    );
  // The bin beside this module: dist/main.js (the sandbox runs it with this Node).
  const entry = fileURLToPath(new URL('./main.js', import.meta.url));
  try {
    return await dev.run({ ...request, entry });
  } catch (error) {
    if (!dev.isFailure(error)) throw error;
    throw new AgentError(error.message, { code: 'dev-failed', cause: error });
  }
}

/**
 * The `agent` command: `allocnet agent [--config F] [--data-dir D] [--socket PATH] [--conf-dir D]
 * [--plugin-dir D]… [--max-ports N] [--max-cni-args N] [--dev] …`. Its action resolves when the agent has stopped (after SIGTERM or
 * SIGINT: exit status 0) and rejects with an `AgentError` when it cannot start (status 1).
 */
export function agentCommand(io: AgentIo, options: AgentCommandOptions = {}): Command {
  const command = new Command('agent')
    .description(AGENT_COMMAND_DESCRIPTION)
    .addOption(new Option('--config <file>', `config file, JSON or YAML (env ${CONFIG_ENV})`))
    .addOption(new Option('--data-dir <dir>', `state directory (default ${DEFAULTS.dataDir})`))
    .addOption(new Option('--socket <path>', `unix socket (default ${DEFAULTS.socket})`))
    .addOption(new Option('--conf-dir <dir>', `CNI network configs (default ${DEFAULTS.confDir})`))
    .addOption(
      new Option(
        '--plugin-dir <dir>',
        `CNI plugin directory; repeat for several (default ${DEFAULT_PLUGIN_DIRS.join(':')})`,
      ).argParser(collect),
    )
    .addOption(
      new Option(
        '--cni-socket <path>',
        `the CNI server's unix socket, where allocnet-cni calls (default ${CNI_SOCKET_NAME} beside --socket)`,
      ),
    )
    .addOption(
      new Option(
        '--cni-queue-dir <dir>',
        `where allocnet-cni queues DELs while the agent is down (default <data-dir>/${CNI_QUEUE_SUBDIR})`,
      ),
    )
    .addOption(
      new Option('--cache-dir <dir>', `CNI result cache (default <data-dir>/${CNI_CACHE_SUBDIR})`),
    )
    .addOption(
      new Option(
        '--ipam-data-dir <dir>',
        `the default network's host-local dir (default ${DEFAULTS.ipamDataDir})`,
      ),
    )
    .addOption(
      new Option(
        '--netns-prefix <prefix>',
        `allocation namespace name prefix (default ${DEFAULTS.netnsPrefix})`,
      ),
    )
    .addOption(
      new Option('--tcp-address <ip:port>', 'also listen on TCP (TLS required off loopback)'),
    )
    .addOption(
      new Option(
        '--metrics-address <ip:port|off>',
        `Prometheus /metrics on loopback (default ${DEFAULTS.metricsAddress})`,
      ),
    )
    .addOption(
      new Option(
        '--log-level <level>',
        `error, warn, info or debug (default ${DEFAULTS.logLevel})`,
      ),
    )
    .addOption(new Option('--log-format <format>', 'json or text (default: text on a terminal)'))
    .addOption(
      new Option('--ready-file <file>', 'write {pid, socket, tcp, metrics} here once serving'),
    )
    .addOption(
      new Option(
        '--max-ports <n>',
        `ports one allocation may ask for, 0-1024 (default ${DEFAULTS.maxPorts})`,
      ),
    )
    .addOption(
      new Option(
        '--max-cni-args <n>',
        `CNI args one allocation may give, 0-64 (default ${DEFAULTS.maxCniArgs})`,
      ),
    )
    .addOption(
      new Option(
        '--max-attachments <n>',
        `networks one allocation may have, 1-64 (default ${DEFAULTS.maxAttachments})`,
      ),
    )
    .addOption(new Option('--print-config', 'print the effective configuration as JSON and exit'))
    .addOption(
      new Option(
        '--dev',
        'run in a throwaway sandbox namespace and temp dir, removed at exit (also -dev); needs root',
      ),
    )
    .action(async (values: Record<string, unknown>) => {
      const flags = flagsOf(values);
      const file =
        typeof values.config === 'string'
          ? values.config
          : io.env[CONFIG_ENV] === undefined || io.env[CONFIG_ENV] === ''
            ? undefined
            : io.env[CONFIG_ENV];
      if (values.dev === true) {
        const status = await runDev(options.dev, {
          io,
          flags,
          ...(file === undefined ? {} : { configFile: file }),
        });
        if (status !== 0) throw new CommanderError(status, 'allocnet.agent.dev', '');
        return;
      }
      const load = () =>
        loadAgentConfig({ file, env: io.env, flags, stderrIsTTY: io.stderr.isTTY === true });
      const config = await load();
      if (values.printConfig === true) {
        io.stdout.write(`${JSON.stringify(config, null, 2)}\n`);
        return;
      }
      await runAgent(io, load, config);
    });
  return command;
}

/**
 * `allocnet-agent <args>`: the agent command on its own. Resolves the exit status: 0 after a
 * stop by signal, 1 when the agent could not start (the message on stderr), 2 for a usage error.
 */
export async function runAgentCli(
  argv: readonly string[],
  io: AgentIo,
  options: AgentCommandOptions = {},
): Promise<number> {
  const command = agentCommand(io, options)
    .name('allocnet-agent')
    .exitOverride()
    .configureOutput({
      writeOut: (s) => io.stdout.write(s),
      writeErr: (s) => io.stderr.write(s),
    });
  try {
    await command.parseAsync(normalizeAgentArgs(argv), { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError)
      return error.exitCode === 0 ? 0 : error.code === 'allocnet.agent.dev' ? error.exitCode : 2;
    if (isAgentError(error)) {
      io.stderr.write(`allocnet agent: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
}
