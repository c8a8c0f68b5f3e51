// The two services' handlers behind one facade: AllocNetworkService in alloc-handlers.ts,
// OperatorService here, both run through call.ts (signal at the deadline, status, metrics, one
// log line per call). The leak counters ListLeaks and ReapLeaks add to GetAgentInfo's counts
// live here, beside the runner's.
import { findPlugin, parseNetworkConfig } from '@allocnet/cni';
import type { CniRuntime } from '@allocnet/cni';
import type { NetworkCatalog } from '@allocnet/cni-configurator';
import type {
  AllocNetworkServiceHandlers,
  OperatorServiceHandlers,
  PluginInfo,
  ReapLeaksProgress,
} from '@allocnet/proto';
import { createAllocHandlers } from './alloc-handlers.js';
import type { AllocHandlersDeps } from './alloc-handlers.js';
import { createCallHandler, idForLog, requestOf } from './call.js';
import {
  catalogMessages,
  hostStateMessage,
  leakMessage,
  stateCounts,
  strayNamespaceMessage,
} from './convert.js';
import { messageOf } from './errors.js';
import type { AgentLogger } from './logging.js';
import { decodeEmptyRequest, decodeForceCleanupRequest, decodeReapRequest } from './requests.js';

export interface ServiceDeps extends AllocHandlersDeps {
  /** Asked for the plugins' VERSION answers (GetAgentInfo). */
  readonly runtime: Pick<CniRuntime, 'versions' | 'pluginDirs'>;
  readonly logger: AgentLogger;
  /** Reported by GetAgentInfo. */
  readonly info: {
    readonly version: string;
    readonly reconcileMode: string;
    readonly dataDir: string;
    readonly socketPath: string;
    readonly startedAtMs: number;
  };
  /** What ReloadConfig (and SIGHUP) does: re-read the CNI configs and what can change live. */
  readonly reload: () => Promise<NetworkCatalog>;
  /** True once the agent is stopping: a call cancelled then was cut by the shutdown. */
  readonly stopping: () => boolean;
  /** Default performance.now. */
  readonly now?: () => number;
}

export interface ServiceHandlers {
  readonly alloc: AllocNetworkServiceHandlers;
  readonly operator: OperatorServiceHandlers;
  /** RPCs running now. */
  inFlight(): number;
}

export function createServiceHandlers(deps: ServiceDeps): ServiceHandlers {
  const { runner, configurator, metrics, logger, gate } = deps;
  const calls = createCallHandler({
    metrics,
    logger,
    stopping: deps.stopping,
    ...(deps.now === undefined ? {} : { now: deps.now }),
  });
  const { serve, unary } = calls;
  const alloc = createAllocHandlers(deps, calls);

  async function pluginInfos(signal: AbortSignal): Promise<PluginInfo[]> {
    const types = [...new Set(configurator.catalog().networks.flatMap((n) => n.plugins))].sort();
    return Promise.all(
      types.map(async (type): Promise<PluginInfo> => {
        let path: string;
        try {
          path = findPlugin(type, deps.runtime.pluginDirs);
        } catch (error) {
          return { type, path: '', supportedVersions: [], error: messageOf(error) };
        }
        try {
          // A one-plugin list: its VERSION answer alone (answers are cached per binary).
          const probe = parseNetworkConfig(
            { cniVersion: '1.0.0', name: 'allocnet-version-probe', type },
            'version probe',
          );
          const versions = await deps.runtime.versions(probe, { signal });
          return {
            type,
            path,
            supportedVersions: [...(versions.plugins[0]?.supportedVersions ?? [])],
            error: '',
          };
        } catch (error) {
          return { type, path, supportedVersions: [], error: messageOf(error) };
        }
      }),
    );
  }

  const operator: OperatorServiceHandlers = {
    ForceCleanup: unary('force-cleanup', 'info', async (request, { signal, fields }) => {
      const id = idForLog(request.allocId);
      if (id !== undefined) fields.allocId = id;
      const args = decodeForceCleanupRequest(request);
      if (args.network !== undefined) fields.network = args.network;
      fields.dryRun = args.dryRun;
      if (!args.dryRun && runner.get(args.allocId) !== undefined)
        logger.warn('forced cleanup of an allocation the agent knows; its network stops working', {
          allocId: args.allocId,
        });
      const report = await configurator.forceCleanup(args.allocId, {
        signal,
        dryRun: args.dryRun,
        ...(args.network === undefined ? {} : { network: args.network }),
      });
      fields.removed = stateCounts(report.removed);
      return { dryRun: report.dryRun, removed: hostStateMessage(report.removed) };
    }),

    ListLeaks: unary('list-leaks', 'info', async (request, { signal, fields }) => {
      decodeEmptyRequest(request);
      const { leaks, orphans, namespaces } = await runner.findLeaks({ signal });
      fields.leaks = leaks.length;
      fields.orphans = stateCounts(orphans);
      fields.namespaces = namespaces.length;
      return {
        leaks: leaks.map(leakMessage),
        orphans: hostStateMessage(orphans),
        namespaces: namespaces.map(strayNamespaceMessage),
      };
    }),

    ReapLeaks: (call) => {
      void serve('reap-leaks', call, 'info', async ({ signal, fields }) => {
        const args = decodeReapRequest(requestOf(call.request));
        fields.dryRun = args.dryRun;
        fields.batchSize = args.batchSize;
        const write = (message: ReapLeaksProgress) => {
          if (!call.cancelled) call.write(message);
        };
        if (args.dryRun) {
          const { leaks, orphans, namespaces } = await runner.findLeaks({ signal });
          leaks.forEach((leak, i) => {
            write({ step: { done: i + 1, total: leaks.length, allocId: leak.allocId } });
          });
          fields.leaks = leaks.length;
          fields.namespaces = namespaces.length;
          write({
            summary: {
              reaped: leaks.map(leakMessage),
              orphans: hostStateMessage(orphans),
              failed: [],
              namespaces: namespaces.map(strayNamespaceMessage),
            },
          });
          return;
        }
        const report = await gate.exclusive(() =>
          runner.reapLeaks({
            signal,
            batchSize: args.batchSize,
            onProgress: (p) => {
              write({ step: { done: p.done, total: p.total, allocId: p.allocId ?? '' } });
            },
          }),
        );
        fields.reaped = report.reaped.length;
        fields.failed = report.failed.length + report.namespaceFailures.length;
        fields.orphans = stateCounts(report.orphans);
        fields.namespaces = report.namespaces.length;
        write({
          summary: {
            reaped: report.reaped.map(leakMessage),
            orphans: hostStateMessage(report.orphans),
            failed: [
              ...report.failed.map((f) => ({ allocId: f.allocId, error: f.error, netnsName: '' })),
              ...report.namespaceFailures.map((f) => ({
                allocId: f.namespace.allocId,
                error: f.error,
                netnsName: f.namespace.name,
              })),
            ],
            namespaces: report.namespaces.map(strayNamespaceMessage),
          },
        });
      }).then((result) => {
        if (result.ok) call.end();
        else call.emit('error', result.error);
      });
    },

    ReloadConfig: unary('reload', 'info', async (request, { fields }) => {
      decodeEmptyRequest(request);
      const catalog = await deps.reload();
      fields.networks = catalog.networks.length;
      fields.invalidFiles = catalog.invalid.length;
      return catalogMessages(catalog);
    }),

    GetAgentInfo: unary('agent-info', 'debug', async (request, { signal }) => {
      decodeEmptyRequest(request);
      const stats = runner.stats();
      const catalog = catalogMessages(configurator.catalog());
      return {
        version: deps.info.version,
        plugins: await pluginInfos(signal),
        networks: catalog.networks,
        invalidFiles: catalog.invalidFiles,
        counts: {
          liveAllocations: stats.live,
          setups: stats.setups,
          teardowns: stats.teardowns,
          failures: stats.setupFailures + stats.teardownFailures,
          leaksFound: stats.leaksFound,
          leaksReaped: stats.leaksReaped,
        },
        reconcileMode: deps.info.reconcileMode,
        dataDir: deps.info.dataDir,
        socketPath: deps.info.socketPath,
        startedAtUnixMs: deps.info.startedAtMs,
        store: {
          writable: stats.store.writable,
          problem: stats.store.problem ?? '',
          fullSinceUnixMs: stats.store.sinceMs ?? 0,
          writeFailures: stats.store.writeFailures,
          unremovedRecords: stats.unremovedRecords,
        },
        restoring: stats.restoring,
      };
    }),
  };

  return { alloc, operator, inFlight: calls.inFlight };
}
