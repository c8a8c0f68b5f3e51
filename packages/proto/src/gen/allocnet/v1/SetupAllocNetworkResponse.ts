// Original file: ../../proto/allocnet/v1/alloc_network_service.proto

import type {
  AllocNetworkStatus as _allocnet_v1_AllocNetworkStatus,
  AllocNetworkStatus__Output as _allocnet_v1_AllocNetworkStatus__Output,
} from '../../allocnet/v1/AllocNetworkStatus.js';

/**
 * The outcome of a setup.
 */
export interface SetupAllocNetworkResponse {
  /**
   * The allocation's network after the setup.
   */
  status?: _allocnet_v1_AllocNetworkStatus | null;
  /**
   * True when an identical setup already existed and no CNI ADD ran.
   */
  alreadySetUp?: boolean;
}

/**
 * The outcome of a setup.
 */
export interface SetupAllocNetworkResponse__Output {
  /**
   * The allocation's network after the setup.
   */
  status: _allocnet_v1_AllocNetworkStatus__Output | null;
  /**
   * True when an identical setup already existed and no CNI ADD ran.
   */
  alreadySetUp: boolean;
}
