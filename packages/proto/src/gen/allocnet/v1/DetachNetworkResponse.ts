// Original file: ../../proto/allocnet/v1/alloc_network_service.proto

import type {
  AllocNetworkStatus as _allocnet_v1_AllocNetworkStatus,
  AllocNetworkStatus__Output as _allocnet_v1_AllocNetworkStatus__Output,
} from '../../allocnet/v1/AllocNetworkStatus.js';
import type {
  HostState as _allocnet_v1_HostState,
  HostState__Output as _allocnet_v1_HostState__Output,
} from '../../allocnet/v1/HostState.js';

/**
 * The outcome of a detach.
 */
export interface DetachNetworkResponse {
  /**
   * The allocation's network after the detach.
   */
  status?: _allocnet_v1_AllocNetworkStatus | null;
  /**
   * True when CNI DEL ran.
   */
  delRan?: boolean;
  /**
   * DEL's error when it failed; the cleanup ran anyway. Empty when DEL succeeded or did not run.
   */
  delError?: string;
  /**
   * What the cleanup removed after DEL in that network: rules, chains, reservations and cache
   * files still tagged with the allocation. Empty when DEL left nothing.
   */
  removed?: _allocnet_v1_HostState | null;
}

/**
 * The outcome of a detach.
 */
export interface DetachNetworkResponse__Output {
  /**
   * The allocation's network after the detach.
   */
  status: _allocnet_v1_AllocNetworkStatus__Output | null;
  /**
   * True when CNI DEL ran.
   */
  delRan: boolean;
  /**
   * DEL's error when it failed; the cleanup ran anyway. Empty when DEL succeeded or did not run.
   */
  delError: string;
  /**
   * What the cleanup removed after DEL in that network: rules, chains, reservations and cache
   * files still tagged with the allocation. Empty when DEL left nothing.
   */
  removed: _allocnet_v1_HostState__Output | null;
}
