// GetAgentInfo: the agent's version and settings, the runner's counters (leaks found and reaped
// among them), the networks, and each plugin they use with its VERSION answer.
import type { AllocRunner } from '@allocnet/alloc-runner';
import { findPlugin, parseNetworkConfig } from '@allocnet/cni';
import type { CniRuntime } from '@allocnet/cni';
import type { CniConfigurator } from '@allocnet/cni-configurator';
import type { OperatorServiceHandlers, PluginInfo } from '@allocnet/proto';
import type { CallHandler } from './call.js';
import { catalogMessages } from './convert.js';
import { messageOf } from './errors.js';
import { decodeEmptyRequest } from './requests.js';

/** What GetAgentInfo reports of the agent itself. */
export interface AgentInfo {
  readonly version: string;
  readonly reconcileMode: string;
  readonly dataDir: string;
  readonly socketPath: string;
  readonly startedAtMs: number;
}

export interface AgentInfoDeps {
  readonly runner: Pick<AllocRunner, 'stats'>;
  readonly configurator: Pick<CniConfigurator, 'catalog'>;
  /** Asked for the plugins' VERSION answers. */
  readonly runtime: Pick<CniRuntime, 'versions' | 'pluginDirs'>;
  readonly info: AgentInfo;
}

/** Each plugin the networks use: where it is and the versions it supports, or its error. */
async function pluginInfos(deps: AgentInfoDeps, signal: AbortSignal): Promise<PluginInfo[]> {
  const types = [...new Set(deps.configurator.catalog().networks.flatMap((n) => n.plugins))].sort();
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

export function agentInfoCall(
  deps: AgentInfoDeps,
  { unary }: CallHandler,
): OperatorServiceHandlers['GetAgentInfo'] {
  return unary('agent-info', 'debug', async (request, { signal }) => {
    decodeEmptyRequest(request);
    const stats = deps.runner.stats();
    const catalog = catalogMessages(deps.configurator.catalog());
    return {
      version: deps.info.version,
      plugins: await pluginInfos(deps, signal),
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
  });
}
