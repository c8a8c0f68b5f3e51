// The daemon's lifecycle: start (compose.ts opens the parts; a failure closes what was opened),
// the ready file, and stop. Signals reach it through command.ts (SIGTERM/SIGINT stop, a second
// one forces; SIGHUP reloads). It acts in the network namespace it runs in: plugins and iptables
// get no namespace option.
//
// Shutdown (stop, SIGTERM): health turns NOT_SERVING, the listeners close (no new calls), calls
// in flight finish within shutdownTimeoutMs (then they are cancelled: their setups roll back),
// the runner closes (it waits for every operation, rollbacks included), then the configurator,
// the metrics listener, the socket file and the ready file go.
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { writeFileDurably } from '@allocnet/base/files';
import type { Registry } from 'prom-client';
import { defaultSpawnMethod } from '@allocnet/spawn';
import { composeAgent } from './compose.js';
import type { AgentSeams, ComposedAgent } from './compose.js';
import { checkAgentConfig } from './config.js';
import type { AgentConfig } from './config.js';
import { checkNotAborted, messageOf } from './errors.js';
import { createAgentLogger } from './logging.js';
import type { AgentLogger } from './logging.js';
import { createOpenedParts } from './parts.js';
import type { RestoreProgress } from './notify.js';
import type { ReloadReport } from './reload.js';

/** The agent's version, from its package.json (one level above both src/ and dist/). */
export function agentVersion(): string {
  const text = readFileSync(new URL('../package.json', import.meta.url), 'utf8');
  return (JSON.parse(text) as { version: string }).version;
}

export interface StartAgentOptions extends AgentSeams {
  /** Default: a winston logger to stderr with `config.log`'s level and format. */
  readonly logger?: AgentLogger;
  /** Aborts the start (a signal during restore): what was opened is closed, `aborted` is thrown. */
  readonly signal?: AbortSignal;
  /**
   * Reads the configuration again on reload (SIGHUP, ReloadConfig), so that what can change live
   * does: the log level and the operator token. Without it, reload re-reads the CNI configs and
   * the token file only.
   */
  readonly reloadConfig?: () => Promise<AgentConfig>;
}

export interface RunningAgent {
  readonly version: string;
  readonly config: AgentConfig;
  /** The unix socket's path. */
  readonly socket: string;
  /** `ip:port` the TCP listener bound (the port picked when 0 was asked for), if any. */
  readonly tcpAddress: string | undefined;
  /** `ip:port` of the metrics listener, if any. */
  readonly metricsAddress: string | undefined;
  readonly startedAtMs: number;
  readonly metrics: Registry;
  /** SIGHUP: re-read the CNI configs and what can change live. */
  reload(): Promise<ReloadReport>;
  /**
   * Stops: no new calls, in-flight calls drain (at most `shutdownTimeoutMs`, or not at all with
   * `force`), then everything closes. Resolves when the agent is stopped; calling it again
   * (e.g. `force` after a second SIGTERM) hurries a stop under way.
   */
  stop(reason: string, options?: { readonly force?: boolean }): Promise<void>;
  /** Resolves once the agent has stopped. */
  readonly closed: Promise<void>;
  /** The background restore, now: what the unit's STATUS= shows (notify.ts). */
  restoreProgress(): RestoreProgress;
}

/** What the ready file holds: where the agent listens, for scripts and tests. */
export interface ReadyInfo {
  readonly pid: number;
  readonly version: string;
  readonly socket: string;
  readonly tcp: string | null;
  readonly metrics: string | null;
  readonly startedAtUnixMs: number;
}

async function writeReadyFile(file: string, info: ReadyInfo): Promise<void> {
  // Its directory as `mkdir -p` would make it: scripts of other users may read the file's place.
  await writeFileDurably(file, `${JSON.stringify(info)}\n`, { dirMode: 0o777 });
}

/** Stops the composed agent in the order the opening comment gives; logs what did not close. */
async function stopParts(
  parts: ComposedAgent,
  config: AgentConfig,
  logger: AgentLogger,
  reason: string,
  force: boolean,
): Promise<void> {
  const began = Date.now();
  parts.servers.setServing(false);
  parts.cniServer.setReady(false);
  parts.stopCniQueue();
  logger.info('agent stopping', { reason, inFlight: parts.handlers.inFlight(), force });
  const problems: string[] = [];
  const step = async (what: string, fn: () => Promise<void>) => {
    try {
      await fn();
    } catch (error) {
      problems.push(`${what}: ${messageOf(error)}`);
    }
  };
  await Promise.all([
    parts.servers.drain(force ? 0 : config.shutdownTimeoutMs),
    step('CNI server', () => parts.cniServer.close(force ? 0 : config.shutdownTimeoutMs)),
  ]);
  await step('socket file', () => parts.servers.socket.release());
  // Waits for every runner operation, the ones of cancelled calls rolling back included.
  await step('runner', () => parts.runner.close());
  parts.stopIdleHandBack();
  await step('configurator', () => parts.configurator.close());
  const { metricsServer } = parts;
  if (metricsServer !== undefined) await step('metrics listener', () => metricsServer.close());
  if (config.readyFile !== undefined)
    await step('ready file', () => rm(config.readyFile ?? '', { force: true }));
  // Last: the runner and its store are closed, another agent may open the data dir.
  await step('data dir lock', () => {
    parts.releaseDataDir();
    return Promise.resolve();
  });
  if (problems.length > 0) logger.error('the agent did not stop cleanly', { problems });
  logger.info('agent stopped', { reason, durationMs: Date.now() - began });
}

/**
 * Starts the agent with `config` (checked again here, as a file's would be). Resolves once it
 * serves: the runner open and its restore begun in the background (`restored allocations from
 * the last run` is logged when it is done), the socket (and TCP, metrics) listening, the ready
 * file written. Throws `AgentError` (`invalid-config`, `socket-in-use`, `listen-failed`,
 * `start-failed`, `aborted`) after closing whatever it had opened.
 */
export async function startAgent(
  input: AgentConfig,
  options: StartAgentOptions = {},
): Promise<RunningAgent> {
  const config = checkAgentConfig(input, 'startAgent');
  const logger = options.logger ?? createAgentLogger(config.log);
  const version = agentVersion();
  const startedAtMs = Date.now();
  const { signal } = options;
  const opened = createOpenedParts();
  // Set once `stop` is called; the handlers read it to tell a shutdown from a client's cancel.
  let stopping = false;

  let parts: ComposedAgent;
  try {
    parts = await composeAgent({
      config,
      logger,
      version,
      startedAtMs,
      ...(signal === undefined ? {} : { signal }),
      ...(options.reloadConfig === undefined ? {} : { reloadConfig: options.reloadConfig }),
      seams: options,
      opened,
      stopping: () => stopping,
    });
    if (config.readyFile !== undefined) {
      await writeReadyFile(config.readyFile, {
        pid: process.pid,
        version,
        socket: config.socket,
        tcp: parts.servers.tcpAddress ?? null,
        metrics: parts.metricsServer?.address ?? null,
        startedAtUnixMs: startedAtMs,
      });
    }
    checkNotAborted(signal);
  } catch (error) {
    await opened.closeAll(logger);
    throw error;
  }

  const spawnMethod = defaultSpawnMethod();
  if (spawnMethod !== 'posix_spawn')
    logger.warn(
      'plugins and iptables are started by forking the agent: posix_spawn could not be loaded (koffi or glibc missing); each process then costs more the larger the agent is (docs/spawn.md)',
      { spawn: spawnMethod },
    );
  logger.info('agent ready', {
    version,
    pid: process.pid,
    socket: config.socket,
    tcp: parts.servers.tcpAddress,
    tls: parts.tls,
    metrics: parts.metricsServer?.address,
    dataDir: config.dataDir,
    netnsPrefix: config.netnsPrefix,
    reconcile: config.reconcile.mode,
    spawn: spawnMethod,
    restoring: parts.restoring,
  });

  let resolveClosed!: () => void;
  const closed = new Promise<void>((resolve) => {
    resolveClosed = resolve;
  });
  let stopped: Promise<void> | undefined;
  const composed = parts;
  return {
    version,
    config,
    socket: config.socket,
    tcpAddress: composed.servers.tcpAddress,
    metricsAddress: composed.metricsServer?.address,
    startedAtMs,
    metrics: composed.metrics.registry,
    reload: composed.reload,
    stop(reason, stopOptions = {}) {
      if (stopped !== undefined) {
        if (stopOptions.force === true) composed.servers.cancelNow();
        return stopped;
      }
      stopping = true;
      stopped = stopParts(composed, config, logger, reason, stopOptions.force === true).then(
        resolveClosed,
      );
      return stopped;
    },
    closed,
    restoreProgress() {
      const stats = composed.runner.stats();
      return { total: composed.restoring, left: stats.restoring, live: stats.live };
    },
  };
}
