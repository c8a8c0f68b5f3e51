// Original file: ../../proto/allocnet/v1/operator_service.proto

import type {
  NetworkInfo as _allocnet_v1_NetworkInfo,
  NetworkInfo__Output as _allocnet_v1_NetworkInfo__Output,
} from '../../allocnet/v1/NetworkInfo.js';
import type {
  InvalidConfigFile as _allocnet_v1_InvalidConfigFile,
  InvalidConfigFile__Output as _allocnet_v1_InvalidConfigFile__Output,
} from '../../allocnet/v1/InvalidConfigFile.js';

/**
 * The configuration after a reload.
 */
export interface ReloadConfigResponse {
  /**
   * The networks the agent offers now.
   */
  networks?: _allocnet_v1_NetworkInfo[];
  /**
   * The configuration files the agent refused.
   */
  invalidFiles?: _allocnet_v1_InvalidConfigFile[];
}

/**
 * The configuration after a reload.
 */
export interface ReloadConfigResponse__Output {
  /**
   * The networks the agent offers now.
   */
  networks: _allocnet_v1_NetworkInfo__Output[];
  /**
   * The configuration files the agent refused.
   */
  invalidFiles: _allocnet_v1_InvalidConfigFile__Output[];
}
