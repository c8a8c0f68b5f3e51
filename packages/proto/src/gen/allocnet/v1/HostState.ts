// Original file: ../../proto/allocnet/v1/types.proto

import type {
  IptablesRule as _allocnet_v1_IptablesRule,
  IptablesRule__Output as _allocnet_v1_IptablesRule__Output,
} from '../../allocnet/v1/IptablesRule.js';
import type {
  IptablesChain as _allocnet_v1_IptablesChain,
  IptablesChain__Output as _allocnet_v1_IptablesChain__Output,
} from '../../allocnet/v1/IptablesChain.js';
import type {
  Reservation as _allocnet_v1_Reservation,
  Reservation__Output as _allocnet_v1_Reservation__Output,
} from '../../allocnet/v1/Reservation.js';

/**
 * Host state that belongs to allocations: what a cleanup removes, or what an audit found.
 */
export interface HostState {
  /**
   * iptables rules.
   */
  rules?: _allocnet_v1_IptablesRule[];
  /**
   * iptables chains (each removed after its rules).
   */
  chains?: _allocnet_v1_IptablesChain[];
  /**
   * IPAM address reservations (host-local).
   */
  reservations?: _allocnet_v1_Reservation[];
  /**
   * Paths of CNI cache files: results, ADD markers and, among orphans, the temporaries of writes
   * whose writer is gone.
   */
  cacheFiles?: string[];
}

/**
 * Host state that belongs to allocations: what a cleanup removes, or what an audit found.
 */
export interface HostState__Output {
  /**
   * iptables rules.
   */
  rules: _allocnet_v1_IptablesRule__Output[];
  /**
   * iptables chains (each removed after its rules).
   */
  chains: _allocnet_v1_IptablesChain__Output[];
  /**
   * IPAM address reservations (host-local).
   */
  reservations: _allocnet_v1_Reservation__Output[];
  /**
   * Paths of CNI cache files: results, ADD markers and, among orphans, the temporaries of writes
   * whose writer is gone.
   */
  cacheFiles: string[];
}
