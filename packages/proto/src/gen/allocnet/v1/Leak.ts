// Original file: ../../proto/allocnet/v1/operator_service.proto

import type {
  HostState as _allocnet_v1_HostState,
  HostState__Output as _allocnet_v1_HostState__Output,
} from '../../allocnet/v1/HostState.js';

/**
 * Host state left by one allocation the agent no longer knows.
 */
export interface Leak {
  /**
   * The allocation's id, read from the state's tags.
   */
  allocId?: string;
  /**
   * The CNI networks the state belongs to.
   */
  networks?: string[];
  /**
   * The allocation's leftover state.
   */
  state?: _allocnet_v1_HostState | null;
}

/**
 * Host state left by one allocation the agent no longer knows.
 */
export interface Leak__Output {
  /**
   * The allocation's id, read from the state's tags.
   */
  allocId: string;
  /**
   * The CNI networks the state belongs to.
   */
  networks: string[];
  /**
   * The allocation's leftover state.
   */
  state: _allocnet_v1_HostState__Output | null;
}
