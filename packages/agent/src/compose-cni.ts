// The CNI door's wiring, one step of the composition root (compose.ts): @allocnet/cni-server's
// handler (allocnet-cni's calls as runner calls, under the agent's limits), its server on
// `cni.socket` (bound by socket.ts, as the gRPC socket is), and the replay of the DELs
// allocnet-cni queued while the agent was down. The server listens before restore, answering 503
// (allocnet-cni's ADD waits, its DEL queues); `open` replays the queue, starts its periodic
// replay and turns the server ready, once restore is under way and the gRPC servers serve.
import type { AllocRunner } from '@allocnet/alloc-runner';
import type { CniConfigurator } from '@allocnet/cni-configurator';
import {
  createCniHandler,
  repeatCniQueueReplay,
  replayCniQueue,
  startCniServer,
} from '@allocnet/cni-server';
import type { CniQueueOptions, CniServer } from '@allocnet/cni-server';
import type { AgentConfig } from './config.js';
import { CNI_QUEUE_REPLAY_INTERVAL_MS } from './defaults.js';
import { checkNotAborted } from './errors.js';
import { componentLogger } from './logging.js';
import type { AgentLogger } from './logging.js';
import type { AgentMetrics } from './metrics.js';
import type { OpenedParts } from './parts.js';
import { bindUnixSocket } from './socket.js';

export interface CniDoorOptions {
  readonly config: AgentConfig;
  readonly logger: AgentLogger;
  readonly runner: AllocRunner;
  readonly configurator: Pick<CniConfigurator, 'catalog' | 'reload'>;
  readonly metrics: AgentMetrics;
  readonly opened: OpenedParts;
}

/** The CNI door, listening and not yet ready. */
export interface CniDoor {
  /** allocnet-cni's server: ready once `open` is done. */
  readonly server: CniServer;
  /** Replays the DEL queue, starts its periodic replay and turns the server ready. */
  readonly open: (signal: AbortSignal | undefined) => Promise<void>;
  /** Stops the DEL queue's periodic replay (the one in `open` is done). */
  readonly stopQueue: () => void;
}

/** Starts the CNI door's server (not ready) and registers what to close in `opened`. */
export async function wireCniDoor(options: CniDoorOptions): Promise<CniDoor> {
  const { config, logger, runner, configurator, metrics, opened } = options;
  const serverLogger = componentLogger(logger, 'cni-server');
  const handler = createCniHandler({
    runner,
    catalog: () => configurator.catalog(),
    reload: () => configurator.reload(),
    ignoreHostIps: config.ignoreHostIps,
    limits: config.limits,
    logger: serverLogger,
  });
  const server = await startCniServer({
    socketPath: config.cni.socket,
    bind: (path, listen) => bindUnixSocket(path, listen, serverLogger),
    handler,
    logger: serverLogger,
    opened,
    onCall: (command, code, seconds) => {
      metrics.cniCall(command, code, seconds);
    },
  });

  let repeat: { stop(): void } | undefined;
  async function open(signal: AbortSignal | undefined): Promise<void> {
    // DELs allocnet-cni queued while the agent was down, before the CNI server turns ready; then
    // again at an interval, for a DEL queued while this start was under way.
    const queue: CniQueueOptions = {
      dir: config.cni.queueDir,
      handler,
      logger: componentLogger(logger, 'cni-queue'),
      onReplay: (outcome) => {
        metrics.cniQueueReplay(outcome);
      },
    };
    const replayed = await replayCniQueue(queue, signal);
    metrics.cniQueuePending(replayed.failed);
    if (replayed.replayed + replayed.failed + replayed.dropped > 0)
      logger.info('replayed the DELs allocnet-cni queued while the agent was down', {
        ...replayed,
      });
    checkNotAborted(signal);
    const repeating = repeatCniQueueReplay({
      ...queue,
      intervalMs: CNI_QUEUE_REPLAY_INTERVAL_MS,
      onReport: (report) => {
        metrics.cniQueuePending(report.failed);
      },
    });
    repeat = repeating;
    opened.push('cni queue replay', () => {
      repeating.stop();
      return Promise.resolve();
    });
    server.setReady(true);
  }

  return {
    server,
    open,
    stopQueue: () => {
      repeat?.stop();
    },
  };
}
