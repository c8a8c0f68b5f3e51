// The daemon: opens the runner (restoring what the last run left), then serves the two services,
// health and reflection on the unix socket (and, optionally, TCP with TLS and identities), and
// metrics on loopback. It acts in the network namespace it runs in: plugins and iptables get no
// namespace option.
//
// Shutdown (stop, SIGTERM): health turns NOT_SERVING, the listeners close (no new calls), calls
// in flight finish within shutdownTimeoutMs (then they are cancelled: their setups roll back),
// the runner closes (it waits for every operation, rollbacks included), then the configurator,
// the metrics listener, the socket file and the ready file go.
import { readFileSync } from 'node:fs';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { ReflectionService } from '@grpc/reflection';
import { HealthImplementation } from 'grpc-health-check';
import type { ServingStatus } from 'grpc-health-check';
import type { Registry } from 'prom-client';
import { defaultSpawnMethod } from '@allocnet/spawn';
import { createAllocRunner, isRunnerError } from '@allocnet/alloc-runner';
import type { AllocRunner, NetnsManager } from '@allocnet/alloc-runner';
import { createCniRuntime, createNodePluginExec, findPlugin, isCniError } from '@allocnet/cni';
import type { CniRuntime } from '@allocnet/cni';
import { createCniConfigurator } from '@allocnet/cni-configurator';
import type { CniConfigurator, NetworkCatalog } from '@allocnet/cni-configurator';
import { createIptables } from '@allocnet/iptables-node';
import {
  ALLOC_NETWORK_SERVICE,
  OPERATOR_SERVICE,
  loadAllocnetPackageDefinition,
  loadAllocnetProto,
} from '@allocnet/proto';
import { authInterceptor } from './auth.js';
import { checkAgentConfig, parseHostPort } from './config.js';
import type { AgentConfig } from './config.js';
import { AgentError, messageOf } from './errors.js';
import { createReapGate } from './gate.js';
import { componentLogger, createAgentLogger } from './logging.js';
import type { AgentLogger } from './logging.js';
import { createAgentMetrics, timedPluginExec } from './metrics.js';
import { startMetricsServer } from './metrics-server.js';
import type { MetricsServer } from './metrics-server.js';
import { createServiceHandlers } from './service.js';
import { bindUnixSocket, claimSocketPath } from './socket.js';
import type { BoundSocket } from './socket.js';

/** The agent's version, from its package.json (one level above both src/ and dist/). */
export function agentVersion(): string {
  const text = readFileSync(new URL('../package.json', import.meta.url), 'utf8');
  return (JSON.parse(text) as { version: string }).version;
}

export interface StartAgentOptions {
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
  /** Seams for tests: the configurator (then `runtime` answers GetAgentInfo's VERSION probes). */
  readonly configurator?: CniConfigurator;
  readonly runtime?: CniRuntime;
  readonly netns?: NetnsManager;
  /** Node process metrics in the registry. Default true. */
  readonly processMetrics?: boolean;
}

export interface ReloadReport {
  readonly catalog: NetworkCatalog;
  /** Keys whose new values took effect. */
  readonly applied: readonly string[];
  /** Keys that changed but need a restart to take effect. */
  readonly needRestart: readonly string[];
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

function bindAsync(
  server: grpc.Server,
  address: string,
  credentials: grpc.ServerCredentials,
): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(address, credentials, (error, port) => {
      if (error === null) resolve(port);
      else reject(error);
    });
  });
}

async function readSecretFile(field: string, file: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (error) {
    throw new AgentError(
      `config: ${field} ${JSON.stringify(file)} cannot be read: ${messageOf(error)}`,
      {
        code: 'invalid-config',
        field,
        cause: error,
      },
    );
  }
}

/** The operator token: the file's first line; refused when others may read it or it is short. */
export async function readOperatorToken(file: string): Promise<string> {
  const field = 'tcp.operatorTokenFile';
  let mode: number;
  try {
    mode = (await stat(file)).mode;
  } catch (error) {
    throw new AgentError(
      `config: ${field} ${JSON.stringify(file)} cannot be read: ${messageOf(error)}`,
      {
        code: 'invalid-config',
        field,
        cause: error,
      },
    );
  }
  if ((mode & 0o077) !== 0)
    throw new AgentError(
      `config: ${field} ${JSON.stringify(file)} may be read by other users (mode ${(mode & 0o777).toString(8).padStart(4, '0')}); chmod 600 it`,
      { code: 'invalid-config', field },
    );
  const token = (await readSecretFile(field, file)).toString('utf8').split('\n')[0]?.trim() ?? '';
  if (token.length < 16)
    throw new AgentError(
      `config: ${field} ${JSON.stringify(file)} holds a token of ${token.length} characters; use at least 16 random characters`,
      { code: 'invalid-config', field },
    );
  return token;
}

async function writeReadyFile(file: string, info: ReadyInfo): Promise<void> {
  await mkdir(dirname(file), { recursive: true });
  const temp = `${file}.${process.pid}.tmp`;
  await writeFile(temp, `${JSON.stringify(info)}\n`, { mode: 0o600 });
  await rename(temp, file);
}

/** Keys (dotted) whose values differ between two configurations. */
function changedKeys(a: unknown, b: unknown, at = ''): string[] {
  const isMap = (v: unknown): v is Record<string, unknown> =>
    typeof v === 'object' && v !== null && !Array.isArray(v);
  if (isMap(a) && isMap(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    return keys.flatMap((k) => changedKeys(a[k], b[k], at === '' ? k : `${at}.${k}`));
  }
  return JSON.stringify(a) === JSON.stringify(b) ? [] : [at];
}

/**
 * Starts the agent with `config` (checked again here, as a file's would be). Resolves once it
 * serves: the runner restored and reconciled, the socket (and TCP, metrics) listening, the ready
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
  // Undone in reverse when the start fails.
  const opened: { what: string; close: () => Promise<void> }[] = [];
  const checkAborted = () => {
    if (signal?.aborted === true)
      throw new AgentError('the agent was stopped while it was starting', { code: 'aborted' });
  };

  try {
    // What an operator must fix comes first, before anything is opened.
    const tls =
      config.tcp?.tls === undefined
        ? undefined
        : {
            cert: await readSecretFile('tcp.tls.cert', config.tcp.tls.cert),
            key: await readSecretFile('tcp.tls.key', config.tcp.tls.key),
            clientCa: await readSecretFile('tcp.tls.clientCa', config.tcp.tls.clientCa),
          };
    let operatorToken =
      config.tcp?.operatorTokenFile === undefined
        ? undefined
        : await readOperatorToken(config.tcp.operatorTokenFile);
    // Another agent on this socket: refuse before opening its state store.
    await claimSocketPath(config.socket, logger);
    await mkdir(config.dataDir, { recursive: true, mode: 0o700 });

    let runner: AllocRunner | undefined;
    const metrics = createAgentMetrics({
      stats: () => runner?.stats(),
      version,
      ...(options.processMetrics === undefined ? {} : { processMetrics: options.processMetrics }),
    });
    const runtime =
      options.runtime ??
      createCniRuntime({
        pluginDirs: config.cni.pluginDirs,
        cacheDir: config.cni.cacheDir,
        timeoutMs: config.cni.timeoutMs,
        exec: timedPluginExec(createNodePluginExec(), (plugin, verb, seconds) => {
          metrics.pluginExec(plugin, verb, seconds);
        }),
        logger: componentLogger(logger, 'cni'),
      });
    let configurator: CniConfigurator;
    try {
      configurator =
        options.configurator ??
        (await createCniConfigurator({
          runtime,
          iptables: {
            ipv4: createIptables({ logger: componentLogger(logger, 'iptables') }),
            ipv6: createIptables({ family: 'ipv6', logger: componentLogger(logger, 'iptables') }),
          },
          defaultNetwork: config.defaultNetwork,
          confDir: config.cni.confDir,
          ignoreHostIps: config.ignoreHostIps,
          region: config.region,
          logger: componentLogger(logger, 'configurator'),
        }));
    } catch (error) {
      throw new AgentError(`the CNI configurator could not start: ${messageOf(error)}`, {
        code: 'start-failed',
        cause: error,
      });
    }
    opened.push({ what: 'configurator', close: () => configurator.close() });
    // A plugin missing from the search path fails every setup on its networks (UNAVAILABLE):
    // say so now rather than at the first setup.
    const missing = [...new Set(configurator.catalog().networks.flatMap((n) => n.plugins))]
      .filter((type) => {
        try {
          findPlugin(type, config.cni.pluginDirs);
          return false;
        } catch (error) {
          if (isCniError(error) && error.code === 'plugin-not-found') return true;
          throw error;
        }
      })
      .sort();
    if (missing.length > 0)
      logger.warn('CNI plugins not found; setups on the networks that use them fail UNAVAILABLE', {
        missing,
        pluginDirs: config.cni.pluginDirs,
      });
    try {
      runner = await createAllocRunner({
        configurator,
        dataDir: config.dataDir,
        netnsPrefix: config.netnsPrefix,
        maxConcurrent: config.concurrency,
        reconcile: config.reconcile,
        logger: componentLogger(logger, 'runner'),
        ...(options.netns === undefined ? {} : { netns: options.netns }),
      });
    } catch (error) {
      throw new AgentError(
        `the allocation runner could not open ${JSON.stringify(config.dataDir)}: ${messageOf(error)}`,
        {
          code: 'start-failed',
          cause: error,
        },
      );
    }
    const theRunner = runner;
    opened.push({ what: 'runner', close: () => theRunner.close() });
    checkAborted();

    try {
      const started = await runner.start(signal === undefined ? {} : { signal });
      logger.info('restored allocations from the last run', {
        ...started.restore.counts,
        durationMs: started.restore.durationMs,
      });
    } catch (error) {
      checkAborted();
      // The first reconcile failing (iptables missing, say) does not stop the agent: requests
      // will say what is wrong, and the reconciler tries again at its interval.
      if (!isRunnerError(error) || error.code !== 'reconcile-failed')
        throw new AgentError(`restoring the allocations failed: ${messageOf(error)}`, {
          code: 'start-failed',
          cause: error,
        });
      logger.error('the first reconcile failed; the agent serves anyway', {
        error: messageOf(error),
      });
    }
    checkAborted();

    let stopping = false;
    const readConfig = { current: config };
    const reloadNow = async (): Promise<ReloadReport> => {
      const applied: string[] = [];
      let needRestart: string[] = [];
      let next: AgentConfig | undefined;
      if (options.reloadConfig !== undefined) {
        try {
          next = await options.reloadConfig();
        } catch (error) {
          logger.error('the configuration could not be read again; keeping the one running', {
            error: messageOf(error),
          });
        }
      }
      if (next !== undefined) {
        const changed = changedKeys(readConfig.current, next);
        if (changed.includes('log.level') && logger.level !== undefined) {
          logger.level = next.log.level;
          applied.push('log.level');
        }
        needRestart = changed.filter((k) => k !== 'log.level' && k !== 'tcp.operatorTokenFile');
        readConfig.current = {
          ...readConfig.current,
          log: { ...readConfig.current.log, level: next.log.level },
        };
      }
      const tokenFile =
        next?.tcp === undefined ? config.tcp?.operatorTokenFile : next.tcp.operatorTokenFile;
      if (config.tcp !== undefined) {
        try {
          const before = operatorToken;
          operatorToken = tokenFile === undefined ? undefined : await readOperatorToken(tokenFile);
          if (before !== operatorToken) applied.push('tcp.operatorTokenFile');
        } catch (error) {
          // Fail closed: a token that cannot be read any more is revoked.
          operatorToken = undefined;
          applied.push('tcp.operatorTokenFile');
          logger.error(
            'the operator token could not be read again; bearer tokens are refused until it can',
            {
              error: messageOf(error),
            },
          );
        }
      }
      const catalog = await configurator.reload();
      logger.info('reloaded', {
        networks: catalog.networks.map((n) => n.name),
        invalidFiles: catalog.invalid.length,
        applied,
        needRestart,
      });
      if (needRestart.length > 0)
        logger.warn('these settings changed and take effect only after a restart', {
          keys: needRestart,
        });
      return { catalog, applied, needRestart };
    };

    const handlers = createServiceHandlers({
      runner,
      configurator,
      runtime,
      metrics,
      logger,
      gate: createReapGate(),
      ignoreHostIps: config.ignoreHostIps,
      info: {
        version,
        reconcileMode: config.reconcile.mode,
        dataDir: config.dataDir,
        socketPath: config.socket,
        startedAtMs,
      },
      reload: async () => (await reloadNow()).catalog,
      stopping: () => stopping,
    });

    const health = new HealthImplementation({
      '': 'SERVING',
      [ALLOC_NETWORK_SERVICE]: 'SERVING',
      [OPERATOR_SERVICE]: 'SERVING',
    });
    const setHealth = (status: ServingStatus) => {
      for (const service of ['', ALLOC_NETWORK_SERVICE, OPERATOR_SERVICE])
        health.setStatus(service, status);
    };
    const reflection = new ReflectionService(loadAllocnetPackageDefinition());
    const proto = loadAllocnetProto().allocnet.v1;
    const makeServer = (serverOptions?: grpc.ServerOptions) => {
      const server = new grpc.Server(serverOptions);
      server.addService(proto.AllocNetworkService.service, handlers.alloc);
      server.addService(proto.OperatorService.service, handlers.operator);
      health.addToServer(server);
      reflection.addToServer(server);
      return server;
    };

    const servers: grpc.Server[] = [];
    const unixServer = makeServer();
    servers.push(unixServer);
    opened.push({
      what: 'unix listener',
      close: () => {
        unixServer.forceShutdown();
        return Promise.resolve();
      },
    });
    const socket: BoundSocket = await bindUnixSocket(
      config.socket,
      async (address) => {
        await bindAsync(unixServer, `unix:${address}`, grpc.ServerCredentials.createInsecure());
      },
      logger,
    );
    opened.push({ what: 'socket file', close: () => socket.release() });

    let tcpAddress: string | undefined;
    if (config.tcp !== undefined) {
      const tcpServer = makeServer({
        interceptors: [authInterceptor({ operatorToken: () => operatorToken, logger })],
      });
      servers.push(tcpServer);
      opened.push({
        what: 'tcp listener',
        close: () => {
          tcpServer.forceShutdown();
          return Promise.resolve();
        },
      });
      const credentials =
        tls === undefined
          ? grpc.ServerCredentials.createInsecure()
          : grpc.ServerCredentials.createSsl(
              tls.clientCa,
              [{ cert_chain: tls.cert, private_key: tls.key }],
              true,
            );
      const { host } = parseHostPort(config.tcp.address) ?? { host: '' };
      let port: number;
      try {
        port = await bindAsync(tcpServer, config.tcp.address, credentials);
      } catch (error) {
        throw new AgentError(
          `cannot listen on ${config.tcp.address} (tcp.address): ${messageOf(error)}`,
          {
            code: 'listen-failed',
            field: 'tcp.address',
            cause: error,
          },
        );
      }
      tcpAddress = `${host.includes(':') ? `[${host}]` : host}:${port}`;
    }

    let metricsServer: MetricsServer | undefined;
    if (config.metrics.address !== 'off') {
      const started = await startMetricsServer(config.metrics.address, metrics.registry, logger);
      metricsServer = started;
      opened.push({ what: 'metrics listener', close: () => started.close() });
    }

    if (config.readyFile !== undefined) {
      await writeReadyFile(config.readyFile, {
        pid: process.pid,
        version,
        socket: config.socket,
        tcp: tcpAddress ?? null,
        metrics: metricsServer?.address ?? null,
        startedAtUnixMs: startedAtMs,
      });
    }
    checkAborted();
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
      tcp: tcpAddress,
      tls: tls !== undefined,
      metrics: metricsServer?.address,
      dataDir: config.dataDir,
      netnsPrefix: config.netnsPrefix,
      reconcile: config.reconcile.mode,
      spawn: spawnMethod,
    });

    let resolveClosed!: () => void;
    const closed = new Promise<void>((resolve) => {
      resolveClosed = resolve;
    });
    let stopped: Promise<void> | undefined;
    let forceNow: (() => void) | undefined;

    const shutdownServer = (server: grpc.Server, timeoutMs: number) =>
      new Promise<void>((resolve) => {
        const force = () => {
          clearTimeout(timer);
          server.forceShutdown();
          resolve();
        };
        const timer = setTimeout(() => {
          logger.warn('in-flight calls did not finish in time; cancelling them', {
            inFlight: handlers.inFlight(),
            shutdownTimeoutMs: timeoutMs,
          });
          force();
        }, timeoutMs);
        const previous = forceNow;
        forceNow = () => {
          previous?.();
          force();
        };
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });

    const stop = async (reason: string, force: boolean): Promise<void> => {
      const began = Date.now();
      stopping = true;
      setHealth('NOT_SERVING');
      logger.info('agent stopping', { reason, inFlight: handlers.inFlight(), force });
      const problems: string[] = [];
      const step = async (what: string, fn: () => Promise<void>) => {
        try {
          await fn();
        } catch (error) {
          problems.push(`${what}: ${messageOf(error)}`);
        }
      };
      await Promise.all(
        servers.map((server) => shutdownServer(server, force ? 0 : config.shutdownTimeoutMs)),
      );
      await step('socket file', () => socket.release());
      // Waits for every runner operation, the ones of cancelled calls rolling back included.
      await step('runner', () => theRunner.close());
      await step('configurator', () => configurator.close());
      if (metricsServer !== undefined) await step('metrics listener', () => metricsServer.close());
      if (config.readyFile !== undefined)
        await step('ready file', () => rm(config.readyFile ?? '', { force: true }));
      if (problems.length > 0) logger.error('the agent did not stop cleanly', { problems });
      logger.info('agent stopped', { reason, durationMs: Date.now() - began });
      resolveClosed();
    };

    return {
      version,
      config,
      socket: config.socket,
      tcpAddress,
      metricsAddress: metricsServer?.address,
      startedAtMs,
      metrics: metrics.registry,
      reload: reloadNow,
      stop(reason, stopOptions = {}) {
        if (stopped !== undefined) {
          if (stopOptions.force === true) forceNow?.();
          return stopped;
        }
        stopped = stop(reason, stopOptions.force === true);
        return stopped;
      },
      closed,
    };
  } catch (error) {
    for (const item of opened.reverse()) {
      try {
        await item.close();
      } catch (closeError) {
        logger.warn(`closing the ${item.what} after a failed start failed`, {
          error: messageOf(closeError),
        });
      }
    }
    throw error;
  }
}
