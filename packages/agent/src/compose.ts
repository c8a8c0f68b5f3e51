// The composition root: the one place that picks the implementations and wires them together —
// the CNI runtime (plugin runs timed into the metrics), iptables for both families, the
// configurator, the runner and its state store, the service handlers, the gRPC servers and the
// metrics listener. `composeAgent` opens them in the order a start needs and registers each
// with `opened`, so that the lifecycle (agent.ts) closes them in reverse when a later step fails.
//
// A setup request's path, for a reader: servers.ts (gRPC) → alloc-handlers.ts (decode, gate,
// metrics, log line) → the runner → the configurator → the CNI runtime and iptables.
import { mkdir } from 'node:fs/promises';
import { posix } from 'node:path';
import { createAllocRunner, isRunnerError } from '@allocnet/alloc-runner';
import type { AllocRunner, NetnsManager } from '@allocnet/alloc-runner';
import { createCniRuntime, createNodePluginExec, findPlugin, isCniError } from '@allocnet/cni';
import type { CniRuntime } from '@allocnet/cni';
import { createCniConfigurator } from '@allocnet/cni-configurator';
import type { CniConfigurator } from '@allocnet/cni-configurator';
import { createIptables } from '@allocnet/iptables-node';
import { releaseFreeMemory } from '@allocnet/spawn';
import type { AgentConfig } from './config.js';
import { CNI_QUEUE_REPLAY_INTERVAL_MS } from './defaults.js';
import { AgentError, messageOf } from './errors.js';
import { createCniHandler } from './cni-handler.js';
import { replayCniQueue } from './cni-queue.js';
import { startCniServer } from './cni-server.js';
import type { CniServer } from './cni-server.js';
import { readHolder, tryLockExclusive, writeHolder } from './flock.js';
import type { HeldLock } from './flock.js';
import { createReapGate } from './gate.js';
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
import { startGrpcServers } from './servers.js';
import type { GrpcServers } from './servers.js';
import { createServiceHandlers } from './service.js';
import type { ServiceHandlers } from './service.js';
import { claimSocketPath } from './socket.js';

/** Parts a test gives instead of the real ones. */
export interface AgentSeams {
  /** The configurator (then `runtime` answers GetAgentInfo's VERSION probes). */
  readonly configurator?: CniConfigurator;
  readonly runtime?: CniRuntime;
  readonly netns?: NetnsManager;
  /** Node process metrics in the registry. Default true. */
  readonly processMetrics?: boolean;
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
  readonly configurator: CniConfigurator;
  readonly handlers: ServiceHandlers;
  readonly servers: GrpcServers;
  /** allocnet-cni's server: ready once restore and the DEL-queue replay are done. */
  readonly cniServer: CniServer;
  /** Stops the DEL queue's periodic replay (the one at start is done). */
  readonly stopCniQueue: () => void;
  /** Lets another agent open the data dir: the last step of a stop. */
  readonly releaseDataDir: () => void;
  readonly metricsServer: MetricsServer | undefined;
  /** Whether the TCP listener speaks TLS. */
  readonly tls: boolean;
  readonly reload: () => Promise<ReloadReport>;
  /** Allocations being restored in the background when the agent turned ready. */
  readonly restoring: number;
}

/** Throws `aborted` once the start's signal has aborted. */
export function checkNotAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted === true)
    throw new AgentError('the agent was stopped while it was starting', { code: 'aborted' });
}

/** Warns about plugins the catalog's networks use but the plugin dirs lack. */
function warnMissingPlugins(
  configurator: CniConfigurator,
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
 * Restores what the last run left, then reconciles once, in the background (the runner's
 * `startInBackground`): the agent serves meanwhile, an operation on an allocation still being
 * restored waits for that one. Returns how many allocations are being restored.
 */
function restoreInBackground(runner: AllocRunner, logger: AgentLogger): number {
  const { restoring, done } = runner.startInBackground();
  done.then(
    (started) => {
      // The restore read thousands of plugin and iptables outputs: hand the heap glibc keeps
      // after freeing them back (some 50 MB with 1,000 allocations, measured).
      releaseFreeMemory();
      logger.info('restored allocations from the last run', {
        ...started.restore.counts,
        durationMs: started.restore.durationMs,
        rssMiB: Math.round(process.memoryUsage.rss() / 2 ** 20),
      });
    },
    (error: unknown) => {
      if (isRunnerError(error) && error.code === 'reconcile-failed') {
        // The first reconcile failing (iptables missing, say) does not stop the agent: requests
        // will say what is wrong, and the reconciler tries again at its interval.
        logger.error('the first reconcile failed; the agent serves anyway', {
          error: messageOf(error),
        });
      } else if (
        isRunnerError(error) &&
        (error.code === 'shutting-down' || error.code === 'aborted')
      ) {
        logger.info(
          'the agent stopped before the restore was done; the next start restores the rest',
        );
      } else {
        logger.error('restoring the allocations failed', { error: messageOf(error) });
      }
    },
  );
  return restoring;
}

/**
 * Opens the agent's parts: the TLS files and operator token (an operator's mistakes first),
 * the socket claim, the data dir, the configurator, the runner, restore, the handlers, the
 * gRPC servers and the metrics listener. Throws `AgentError` (`invalid-config`,
 * `socket-in-use`, `listen-failed`, `start-failed`, `aborted`), leaving in `opened` what to close.
 */
export async function composeAgent(options: ComposeOptions): Promise<ComposedAgent> {
  const { config, logger, seams, opened, signal } = options;
  const tls = await readTlsFiles(config.tcp);
  const token: OperatorToken = {
    current:
      config.tcp?.operatorTokenFile === undefined
        ? undefined
        : await readOperatorToken(config.tcp.operatorTokenFile),
  };
  // Another agent on this socket, or on this data dir: refuse before opening anything of it (the
  // socket is only probed here; the data dir's lock is taken before its store is opened).
  await claimSocketPath(config.socket, logger);
  await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  const dataDirLock = lockDataDir(config);
  opened.push('data dir lock', () => {
    dataDirLock.release();
    return Promise.resolve();
  });

  // The metrics read the runner's counters once the runner exists.
  let runner: AllocRunner | undefined;
  const metrics = createAgentMetrics({
    stats: () => runner?.stats(),
    version: options.version,
    ...(seams.processMetrics === undefined ? {} : { processMetrics: seams.processMetrics }),
    origins: () => {
      const counts: Record<string, number> = {};
      for (const r of runner?.list() ?? []) {
        const origin = r.spec.origin?.runtime ?? 'grpc';
        counts[origin] = (counts[origin] ?? 0) + 1;
      }
      return counts;
    },
  });
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
  let configurator: CniConfigurator;
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

  try {
    runner = await createAllocRunner({
      configurator,
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
  const theRunner = runner;
  opened.push('runner', () => theRunner.close());
  checkNotAborted(signal);
  // The CNI server listens before restore, answering 503 (allocnet-cni's ADD waits, its DEL
  // queues) until restore and the queue replay are done.
  // One reap gate for both doors: setups over gRPC and ADDs over CNI hold its shared side.
  const gate = createReapGate();
  const cniHandler = createCniHandler({
    runner: theRunner,
    catalog: () => configurator.catalog(),
    reload: () => configurator.reload(),
    ignoreHostIps: config.ignoreHostIps,
    limits: config.limits,
    logger: componentLogger(logger, 'cni-server'),
    gate,
  });
  const cniServer = await startCniServer({
    socketPath: config.cni.socket,
    handler: cniHandler,
    logger: componentLogger(logger, 'cni-server'),
    opened,
    onCall: (command, code, seconds) => {
      metrics.cniCall(command, code, seconds);
    },
  });
  const restoring = restoreInBackground(theRunner, logger);
  checkNotAborted(signal);

  const reload = createReloader({
    config,
    logger,
    configurator,
    token,
    ...(options.reloadConfig === undefined ? {} : { reloadConfig: options.reloadConfig }),
  });
  const handlers = createServiceHandlers({
    runner: theRunner,
    configurator,
    runtime,
    metrics,
    logger,
    gate,
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

  let metricsServer: MetricsServer | undefined;
  if (config.metrics.address !== 'off') {
    const started = await startMetricsServer(config.metrics.address, metrics.registry, logger);
    metricsServer = started;
    opened.push('metrics listener', () => started.close());
  }

  // DELs allocnet-cni queued while the agent was down, before the CNI server turns ready; then
  // again at an interval, for a DEL queued while this start was under way.
  const queue = {
    dir: config.cni.queueDir,
    handler: cniHandler,
    logger: componentLogger(logger, 'cni-queue'),
    onReplay: (outcome: 'replayed' | 'failed' | 'dropped') => {
      metrics.cniQueueReplay(outcome);
    },
  };
  const replayed = await replayCniQueue(queue, signal);
  metrics.cniQueuePending(replayed.failed);
  if (replayed.replayed + replayed.failed + replayed.dropped > 0)
    logger.info('replayed the DELs allocnet-cni queued while the agent was down', { ...replayed });
  checkNotAborted(signal);
  let replaying = false;
  const replayTimer = setInterval(() => {
    if (replaying) return;
    replaying = true;
    replayCniQueue(queue)
      .then((report) => {
        metrics.cniQueuePending(report.failed);
      })
      .catch((error: unknown) => {
        logger.warn('replaying the CNI DEL queue failed', { error: messageOf(error) });
      })
      .finally(() => {
        replaying = false;
      });
  }, CNI_QUEUE_REPLAY_INTERVAL_MS);
  replayTimer.unref();
  opened.push('cni queue replay', () => {
    clearInterval(replayTimer);
    return Promise.resolve();
  });
  cniServer.setReady(true);

  return {
    metrics,
    runner: theRunner,
    configurator,
    handlers,
    servers,
    cniServer,
    stopCniQueue: () => {
      clearInterval(replayTimer);
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
