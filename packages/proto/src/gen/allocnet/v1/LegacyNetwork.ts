// Original file: ../../proto/allocnet/v1/alloc_network_service.proto

import type {
  LegacyPort as _allocnet_v1_LegacyPort,
  LegacyPort__Output as _allocnet_v1_LegacyPort__Output,
} from '../../allocnet/v1/LegacyPort.js';

/**
 * The ports of one network in the older job format.
 */
export interface LegacyNetwork {
  /**
   * Ports with a fixed host port.
   */
  reservedPorts?: _allocnet_v1_LegacyPort[];
  /**
   * Ports with a host port the scheduler picked.
   */
  dynamicPorts?: _allocnet_v1_LegacyPort[];
}

/**
 * The ports of one network in the older job format.
 */
export interface LegacyNetwork__Output {
  /**
   * Ports with a fixed host port.
   */
  reservedPorts: _allocnet_v1_LegacyPort__Output[];
  /**
   * Ports with a host port the scheduler picked.
   */
  dynamicPorts: _allocnet_v1_LegacyPort__Output[];
}
