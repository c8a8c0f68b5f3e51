// Original file: ../../proto/allocnet/v1/operator_service.proto

import type {
  PluginInfo as _allocnet_v1_PluginInfo,
  PluginInfo__Output as _allocnet_v1_PluginInfo__Output,
} from '../../allocnet/v1/PluginInfo.js';
import type {
  NetworkInfo as _allocnet_v1_NetworkInfo,
  NetworkInfo__Output as _allocnet_v1_NetworkInfo__Output,
} from '../../allocnet/v1/NetworkInfo.js';
import type {
  InvalidConfigFile as _allocnet_v1_InvalidConfigFile,
  InvalidConfigFile__Output as _allocnet_v1_InvalidConfigFile__Output,
} from '../../allocnet/v1/InvalidConfigFile.js';
import type {
  AgentCounts as _allocnet_v1_AgentCounts,
  AgentCounts__Output as _allocnet_v1_AgentCounts__Output,
} from '../../allocnet/v1/AgentCounts.js';
import type {
  StoreHealth as _allocnet_v1_StoreHealth,
  StoreHealth__Output as _allocnet_v1_StoreHealth__Output,
} from '../../allocnet/v1/StoreHealth.js';
import type { Long } from '@grpc/proto-loader';

/**
 * The agent's version, plugins, networks, counters and settings.
 */
export interface GetAgentInfoResponse {
  /**
   * The agent's version.
   */
  version?: string;
  /**
   * The plugins the configured networks use, as found on the plugin search path.
   */
  plugins?: _allocnet_v1_PluginInfo[];
  /**
   * The networks the agent offers.
   */
  networks?: _allocnet_v1_NetworkInfo[];
  /**
   * The configuration files the agent refused.
   */
  invalidFiles?: _allocnet_v1_InvalidConfigFile[];
  /**
   * Counters since the agent started.
   */
  counts?: _allocnet_v1_AgentCounts | null;
  /**
   * What the reconciler does with leaks it finds: `reap` removes them, `report` only logs them.
   */
  reconcileMode?: string;
  /**
   * The directory that holds the agent's state.
   */
  dataDir?: string;
  /**
   * The unix socket the agent listens on.
   */
  socketPath?: string;
  /**
   * When the agent started, in milliseconds since the Unix epoch.
   */
  startedAtUnixMs?: number | string | Long;
  /**
   * Whether the state store can be written now.
   */
  store?: _allocnet_v1_StoreHealth | null;
  /**
   * Allocations the restore after the agent's start has not settled yet (0 once it is done): the
   * agent serves at once and restores in the background.
   */
  restoring?: number;
}

/**
 * The agent's version, plugins, networks, counters and settings.
 */
export interface GetAgentInfoResponse__Output {
  /**
   * The agent's version.
   */
  version: string;
  /**
   * The plugins the configured networks use, as found on the plugin search path.
   */
  plugins: _allocnet_v1_PluginInfo__Output[];
  /**
   * The networks the agent offers.
   */
  networks: _allocnet_v1_NetworkInfo__Output[];
  /**
   * The configuration files the agent refused.
   */
  invalidFiles: _allocnet_v1_InvalidConfigFile__Output[];
  /**
   * Counters since the agent started.
   */
  counts: _allocnet_v1_AgentCounts__Output | null;
  /**
   * What the reconciler does with leaks it finds: `reap` removes them, `report` only logs them.
   */
  reconcileMode: string;
  /**
   * The directory that holds the agent's state.
   */
  dataDir: string;
  /**
   * The unix socket the agent listens on.
   */
  socketPath: string;
  /**
   * When the agent started, in milliseconds since the Unix epoch.
   */
  startedAtUnixMs: string;
  /**
   * Whether the state store can be written now.
   */
  store: _allocnet_v1_StoreHealth__Output | null;
  /**
   * Allocations the restore after the agent's start has not settled yet (0 once it is done): the
   * agent serves at once and restores in the background.
   */
  restoring: number;
}
