// Original file: ../../proto/allocnet/v1/alloc_network_service.proto

import type {
  AllocNetworkStatus as _allocnet_v1_AllocNetworkStatus,
  AllocNetworkStatus__Output as _allocnet_v1_AllocNetworkStatus__Output,
} from '../../allocnet/v1/AllocNetworkStatus.js';

/**
 * One allocation's network.
 */
export interface GetAllocNetworkResponse {
  /**
   * The allocation's network.
   */
  status?: _allocnet_v1_AllocNetworkStatus | null;
}

/**
 * One allocation's network.
 */
export interface GetAllocNetworkResponse__Output {
  /**
   * The allocation's network.
   */
  status: _allocnet_v1_AllocNetworkStatus__Output | null;
}
