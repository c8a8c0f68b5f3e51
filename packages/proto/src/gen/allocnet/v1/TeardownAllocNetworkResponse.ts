// Original file: ../../proto/allocnet/v1/alloc_network_service.proto

import type {
  HostState as _allocnet_v1_HostState,
  HostState__Output as _allocnet_v1_HostState__Output,
} from '../../allocnet/v1/HostState.js';

/**
 * The outcome of a teardown.
 */
export interface TeardownAllocNetworkResponse {
  /**
   * True when the agent knew the allocation.
   */
  wasKnown?: boolean;
  /**
   * True when CNI DEL ran.
   */
  delRan?: boolean;
  /**
   * DEL's error when it failed; the cleanup ran anyway. Empty when DEL succeeded or did not run.
   */
  delError?: string;
  /**
   * What the forced cleanup removed after DEL: rules, chains, reservations and cache files that
   * were still tagged with the allocation. Empty when DEL left nothing.
   */
  removed?: _allocnet_v1_HostState | null;
}

/**
 * The outcome of a teardown.
 */
export interface TeardownAllocNetworkResponse__Output {
  /**
   * True when the agent knew the allocation.
   */
  wasKnown: boolean;
  /**
   * True when CNI DEL ran.
   */
  delRan: boolean;
  /**
   * DEL's error when it failed; the cleanup ran anyway. Empty when DEL succeeded or did not run.
   */
  delError: string;
  /**
   * What the forced cleanup removed after DEL: rules, chains, reservations and cache files that
   * were still tagged with the allocation. Empty when DEL left nothing.
   */
  removed: _allocnet_v1_HostState__Output | null;
}
