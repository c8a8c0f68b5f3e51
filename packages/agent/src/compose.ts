// The composition root: the one place that picks the implementations and wires them together —
// the CNI runtime (plugin runs timed into the metrics), iptables for both families, the
// configurator, the runner and its state store, the service handlers, the gRPC servers and the
// metrics listener. `composeAgent` opens them in the order a start needs and registers each
// with `opened`, so that the lifecycle (agent.ts) closes them in reverse when a later step fails.
//
// The CNI door's wiring is one step of its own (compose-cni.ts), and so is what runs in the
// background once the agent serves (background.ts: the restore, then the reap's warm-up).
//
// A setup request's path, for a reader: servers.ts (gRPC) → alloc-handlers.ts (decode, metrics,
// log line, through call.ts) → the runner → the configurator → the CNI runtime and iptables.
import { mkdir } from 'node:fs/promises';
import { posix } from 'node:path';
import { createAllocRunner } from '@allocnet/alloc-runner';
import type { AllocRunner, NetnsManager, RunnerConfigurator } from '@allocnet/alloc-runner';
import { createCniRuntime, createNodePluginExec, findPlugin, isCniError } from '@allocnet/cni';
import type { CniRuntime } from '@allocnet/cni';
import { createCniConfigurator } from '@allocnet/cni-configurator';
import type { CniConfigurator } from '@allocnet/cni-configurator';
import { createIptables } from '@allocnet/iptables-node';
import { restoreInBackground } from './background.js';
import type { AgentConfig } from './config.js';
import { AgentError, checkNotAborted, messageOf } from './errors.js';
import { wireCniDoor } from './compose-cni.js';
import { createIdleHandBack, trackingOperations } from './memory.js';
import type { IdleHandBack, IdleHandBackOptions } from './memory.js';
import type { CniDoor } from './compose-cni.js';
import { readHolder, tryLockExclusive, writeHolder } from '@allocnet/libc';
import type { HeldLock } from '@allocnet/libc';
import { componentLogger } from './logging.js';
import type { AgentLogger } from './logging.js';
import { createAgentMetrics, timedPluginExec } from './metrics.js';
import type { AgentMetrics } from './metrics.js';
import { startMetricsServer } from './metrics-server.js';
import type { MetricsServer } from './metrics-server.js';
import type { OpenedParts } from './parts.js';
import { createReloader } from './reload.js';
import type { OperatorToken, ReloadReport } from './reload.js';
import { readOperatorToken, readTlsFiles } from './secrets.js';
import type { TlsFiles } from './secrets.js';
import { startGrpcServers } from './servers.js';
import type { GrpcServers } from './servers.js';
import { createServiceHandlers } from './service.js';
import type { ServiceHandlers } from './service.js';
import { claimSocketPath } from './socket.js';
import { sweepTemporaries } from './temporaries.js';

/**
 * What the agent uses of the configurator: what the runner calls of it, and its networks,
 * reload and close.
 */
export type AgentConfigurator = RunnerConfigurator &
  Pick<CniConfigurator, 'catalog' | 'reload' | 'close'> &
  // A test's configurator may not warm the reap (warmReapPath).
  Partial<Pick<CniConfigurator, 'warmReap'>>;

/** Parts a test gives instead of the real ones. */
export interface AgentSeams {
  /** The configurator (then `runtime` answers GetAgentInfo's VERSION probes). */
  readonly configurator?: AgentConfigurator;
  readonly runtime?: CniRuntime;
  readonly netns?: NetnsManager;
  /** Node process metrics in the registry. Default true. */
  readonly processMetrics?: boolean;
  /** The hand-back of memory after a burst of operations (memory.ts). Default its defaults. */
  readonly idleHandBack?: IdleHandBackOptions;
}

export interface ComposeOptions {
  readonly config: AgentConfig;
  readonly logger: AgentLogger;
  readonly version: string;
  readonly startedAtMs: number;
  /** Aborts the start between steps (`aborted`). */
  readonly signal?: AbortSignal;
  readonly reloadConfig?: () => Promise<AgentConfig>;
  readonly seams: AgentSeams;
  readonly opened: OpenedParts;
  /** True once the agent stops: a call cancelled then was cut by the shutdown. */
  readonly stopping: () => boolean;
}

/** The agent's parts, opened, restored and serving. */
export interface ComposedAgent {
  readonly metrics: AgentMetrics;
  readonly runner: AllocRunner;
  readonly configurator: AgentConfigurator;
  readonly handlers: ServiceHandlers;
  readonly servers: GrpcServers;
  /** allocnet-cni's server: ready once restore and the DEL-queue replay are done. */
  readonly cniServer: CniDoor['server'];
  /** Stops the DEL queue's periodic replay (the one at start is done). */
  readonly stopCniQueue: () => void;
  /** No more hand-backs of memory after a burst (memory.ts): once the runner is closed. */
  readonly stopIdleHandBack: () => void;
  /** Lets another agent open the data dir: the last step of a stop. */
  readonly releaseDataDir: () => void;
  readonly metricsServer: MetricsServer | undefined;
  /** Whether the TCP listener speaks TLS. */
  readonly tls: boolean;
  readonly reload: () => Promise<ReloadReport>;
  /** Allocations being restored in the background when the agent turned ready. */
  readonly restoring: number;
}

/** Warns about plugins the catalog's networks use but the plugin dirs lack. */
function warnMissingPlugins(
  configurator: AgentConfigurator,
  pluginDirs: readonly string[],
  logger: AgentLogger,
): void {
  // A plugin missing from the search path fails every setup on its networks (UNAVAILABLE):
  // say so now rather than at the first setup.
  const missing = [...new Set(configurator.catalog().networks.flatMap((n) => n.plugins))]
    .filter((type) => {
      try {
        findPlugin(type, pluginDirs);
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
      pluginDirs,
    });
}

/** The file in the data dir an agent holds locked for its life. */
export const DATA_DIR_LOCK = 'agent.lock';

/**
 * The exclusive lock on `<dataDir>/agent.lock`, held until the agent stops (or dies: the kernel
 * drops it), with the holder's pid and sockets written in it. Two agents on one data dir would
 * each reconcile the other's allocations as leaks; the second is refused, naming the first.
 */
function lockDataDir(config: AgentConfig): HeldLock {
  const path = posix.join(config.dataDir, DATA_DIR_LOCK);
  const held = tryLockExclusive(path);
  if (held === undefined) {
    const holder = readHolder(path);
    throw new AgentError(
      `the data dir ${JSON.stringify(config.dataDir)} is in use by another agent${holder === '' ? '' : ` (${holder})`}; stop it first, or give this agent a data dir of its own`,
      { code: 'data-dir-in-use' },
    );
  }
  writeHolder(
    held,
    `pid ${process.pid}, socket ${config.socket}, cni socket ${config.cni.socket}, since ${new Date().toISOString()}\n`,
  );
  return held;
}

/**
 * Claims the socket path and the data dir: another agent on either is refused before anything
 * of it is opened (the socket is only probed here; the data dir's lock is taken before its store
 * is opened).
 */
async function claimPaths(
  config: AgentConfig,
  logger: AgentLogger,
  opened: OpenedParts,
): Promise<HeldLock> {
  await claimSocketPath(config.socket, logger);
  await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  const dataDirLock = lockDataDir(config);
  opened.push('data dir lock', () => {
    dataDirLock.release();
    return Promise.resolve();
  });
  return dataDirLock;
}

/** The metrics, reading the runner's counters and records once `runner()` has one. */
function metricsOf(
  runner: () => AllocRunner | undefined,
  version: string,
  seams: AgentSeams,
): AgentMetrics {
  return createAgentMetrics({
    stats: () => runner()?.stats(),
    version,
    ...(seams.processMetrics === undefined ? {} : { processMetrics: seams.processMetrics }),
    origins: () => {
      const counts: Record<string, number> = {};
      for (const r of runner()?.list() ?? []) {
        const origin = r.spec.origin?.runtime ?? 'grpc';
        counts[origin] = (counts[origin] ?? 0) + 1;
      }
      return counts;
    },
  });
}

/** The CNI runtime (plugin runs timed into the metrics) and the configurator over it. */
async function openConfigurator(
  options: ComposeOptions,
  metrics: AgentMetrics,
): Promise<{ runtime: CniRuntime; configurator: AgentConfigurator }> {
  const { config, logger, seams, opened } = options;
  const runtime =
    seams.runtime ??
    createCniRuntime({
      pluginDirs: config.cni.pluginDirs,
      cacheDir: config.cni.cacheDir,
      timeoutMs: config.cni.timeoutMs,
      exec: timedPluginExec(createNodePluginExec(), (plugin, verb, seconds) => {
        metrics.pluginExec(plugin, verb, seconds);
      }),
      logger: componentLogger(logger, 'cni'),
    });
  let configurator: AgentConfigurator;
  try {
    configurator =
      seams.configurator ??
      (await createCniConfigurator({
        runtime,
        iptables: {
          ipv4: createIptables({ logger: componentLogger(logger, 'iptables') }),
          ipv6: createIptables({ family: 'ipv6', logger: componentLogger(logger, 'iptables') }),
        },
        defaultNetwork: config.defaultNetwork,
        confDir: config.cni.confDir,
        ignoreHostIps: config.ignoreHostIps,
        ipv6OnIpv4Interfaces: config.ipv6OnIpv4Interfaces,
        region: config.region,
        logger: componentLogger(logger, 'configurator'),
      }));
  } catch (error) {
    throw new AgentError(`the CNI configurator could not start: ${messageOf(error)}`, {
      code: 'start-failed',
      cause: error,
    });
  }
  opened.push('configurator', () => configurator.close());
  warnMissingPlugins(configurator, config.cni.pluginDirs, logger);
  return { runtime, configurator };
}

/**
 * The runner over the configurator, its store opened in the data dir; its operations marked for
 * the idle hand-back.
 */
async function openRunner(
  options: ComposeOptions,
  configurator: AgentConfigurator,
  idle: IdleHandBack,
): Promise<AllocRunner> {
  const { config, logger, seams, opened } = options;
  let runner: AllocRunner;
  try {
    runner = await createAllocRunner({
      configurator: trackingOperations(configurator, () => idle.begin()),
      dataDir: config.dataDir,
      netnsPrefix: config.netnsPrefix,
      maxConcurrent: config.concurrency,
      reconcile: config.reconcile,
      logger: componentLogger(logger, 'runner'),
      ...(seams.netns === undefined ? {} : { netns: seams.netns }),
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
  opened.push('runner', () => runner.close());
  return runner;
}

/** What the gRPC door is built on. */
interface GrpcDoorParts {
  readonly runner: AllocRunner;
  readonly configurator: AgentConfigurator;
  readonly runtime: CniRuntime;
  readonly metrics: AgentMetrics;
  readonly tls: TlsFiles | undefined;
  readonly token: OperatorToken;
  /** Marks each call (the idle hand-back waits for calls too). */
  readonly activity: () => () => void;
}

/** The reloader, the service handlers and the gRPC servers (unix socket, and TCP if set). */
async function openGrpcDoor(
  options: ComposeOptions,
  parts: GrpcDoorParts,
): Promise<{
  reload: () => Promise<ReloadReport>;
  handlers: ServiceHandlers;
  servers: GrpcServers;
}> {
  const { config, logger, opened } = options;
  const { configurator, tls, token } = parts;
  const reload = createReloader({
    config,
    logger,
    configurator,
    token,
    ...(options.reloadConfig === undefined ? {} : { reloadConfig: options.reloadConfig }),
  });
  const handlers = createServiceHandlers({
    runner: parts.runner,
    configurator,
    runtime: parts.runtime,
    metrics: parts.metrics,
    logger,
    ignoreHostIps: config.ignoreHostIps,
    limits: config.limits,
    info: {
      version: options.version,
      reconcileMode: config.reconcile.mode,
      dataDir: config.dataDir,
      socketPath: config.socket,
      startedAtMs: options.startedAtMs,
    },
    reload: async () => (await reload()).catalog,
    stopping: options.stopping,
    activity: parts.activity,
  });
  const servers = await startGrpcServers({
    handlers,
    logger,
    socketPath: config.socket,
    ...(config.tcp === undefined
      ? {}
      : { tcp: { address: config.tcp.address, tls, operatorToken: () => token.current } }),
    opened,
  });
  return { reload, handlers, servers };
}

/** The Prometheus listener, unless `metrics.address` is `off`. */
async function openMetricsServer(
  options: ComposeOptions,
  metrics: AgentMetrics,
): Promise<MetricsServer | undefined> {
  const { config, logger, opened } = options;
  if (config.metrics.address === 'off') return undefined;
  const started = await startMetricsServer(config.metrics.address, metrics.registry, logger);
  opened.push('metrics listener', () => started.close());
  return started;
}

/**
 * Opens the agent's parts: the TLS files and operator token (an operator's mistakes first),
 * the socket claim, the data dir, the configurator, the runner, the CNI door (listening, not
 * ready), the restore (begun in the background once the gRPC door listens), the gRPC door and
 * the metrics listener, then the CNI door's queue replay.
 * Throws `AgentError` (`invalid-config`, `socket-in-use`, `data-dir-in-use`, `listen-failed`,
 * `start-failed`, `aborted`), leaving in `opened` what to close.
 */
export async function composeAgent(options: ComposeOptions): Promise<ComposedAgent> {
  const { config, logger, opened, signal } = options;
  const tls = await readTlsFiles(config.tcp);
  const token: OperatorToken = {
    current:
      config.tcp?.operatorTokenFile === undefined
        ? undefined
        : await readOperatorToken(config.tcp.operatorTokenFile),
  };
  const dataDirLock = await claimPaths(config, logger, opened);
  // With the lock held, no other agent writes here: what a killed one left can go.
  await sweepTemporaries(config, logger);
  // The metrics read the runner's counters once the runner exists.
  const made: { runner?: AllocRunner } = {};
  const metrics = metricsOf(() => made.runner, options.version, options.seams);
  const { runtime, configurator } = await openConfigurator(options, metrics);
  // A burst of operations leaves garbage that idle time alone does not give back (memory.ts).
  const idle = createIdleHandBack(logger, options.seams.idleHandBack);
  opened.push('idle hand-back', () => {
    idle.stop();
    return Promise.resolve();
  });
  const theRunner = await openRunner(options, configurator, idle);
  made.runner = theRunner;
  checkNotAborted(signal);
  // The CNI server listens before restore, answering 503 until restore and the queue replay
  // are done (compose-cni.ts).
  const cniDoor = await wireCniDoor({
    config,
    logger,
    runner: theRunner,
    configurator,
    metrics,
    opened,
  });
  // The holds and the restore begin once the gRPC door listens: a restart's first answers (the
  // scheduler's list, a status) then come before a thousand allocations' file and plugin work
  // (docs/performance.md, serving). Operations still wait for the holds (the runner's `begin`).
  let listening = () => {};
  const gate = new Promise<void>((resolve) => (listening = resolve));
  const restoring = restoreInBackground(theRunner, configurator, logger, gate, () => {
    idle.rebase();
  });
  checkNotAborted(signal);
  let door;
  try {
    door = await openGrpcDoor(options, {
      runner: theRunner,
      configurator,
      runtime,
      metrics,
      tls,
      token,
      activity: () => idle.begin(),
    });
  } finally {
    listening();
  }
  const { reload, handlers, servers } = door;
  const metricsServer = await openMetricsServer(options, metrics);

  await cniDoor.open(signal);

  return {
    metrics,
    runner: theRunner,
    configurator,
    handlers,
    servers,
    cniServer: cniDoor.server,
    stopCniQueue: cniDoor.stopQueue,
    stopIdleHandBack: () => {
      idle.stop();
    },
    releaseDataDir: () => {
      dataDirLock.release();
    },
    metricsServer,
    tls: tls !== undefined,
    reload,
    restoring,
  };
}
