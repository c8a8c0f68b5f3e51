// Original file: ../../proto/allocnet/v1/alloc_network_service.proto

import type {
  AllocNetworkStatus as _allocnet_v1_AllocNetworkStatus,
  AllocNetworkStatus__Output as _allocnet_v1_AllocNetworkStatus__Output,
} from '../../allocnet/v1/AllocNetworkStatus.js';

/**
 * Every allocation network the agent knows.
 */
export interface ListAllocNetworksResponse {
  /**
   * The allocations' networks, ordered by allocation id.
   */
  allocations?: _allocnet_v1_AllocNetworkStatus[];
}

/**
 * Every allocation network the agent knows.
 */
export interface ListAllocNetworksResponse__Output {
  /**
   * The allocations' networks, ordered by allocation id.
   */
  allocations: _allocnet_v1_AllocNetworkStatus__Output[];
}
