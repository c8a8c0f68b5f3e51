// Original file: ../../proto/allocnet/v1/alloc_network_service.proto

import type {
  AllocNetworkStatus as _allocnet_v1_AllocNetworkStatus,
  AllocNetworkStatus__Output as _allocnet_v1_AllocNetworkStatus__Output,
} from '../../allocnet/v1/AllocNetworkStatus.js';

/**
 * The outcome of a check.
 */
export interface CheckAllocNetworkResponse {
  /**
   * True when CHECK passed, or did not run and nothing else is wrong.
   */
  healthy?: boolean;
  /**
   * False when the network's plugins or config version do not support CHECK.
   */
  checkRan?: boolean;
  /**
   * What is wrong when `healthy` is false; empty otherwise.
   */
  problem?: string;
  /**
   * The allocation's network.
   */
  status?: _allocnet_v1_AllocNetworkStatus | null;
}

/**
 * The outcome of a check.
 */
export interface CheckAllocNetworkResponse__Output {
  /**
   * True when CHECK passed, or did not run and nothing else is wrong.
   */
  healthy: boolean;
  /**
   * False when the network's plugins or config version do not support CHECK.
   */
  checkRan: boolean;
  /**
   * What is wrong when `healthy` is false; empty otherwise.
   */
  problem: string;
  /**
   * The allocation's network.
   */
  status: _allocnet_v1_AllocNetworkStatus__Output | null;
}
