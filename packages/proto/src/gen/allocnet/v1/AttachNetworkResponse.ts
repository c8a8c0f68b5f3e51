// Original file: ../../proto/allocnet/v1/alloc_network_service.proto

import type {
  AllocNetworkStatus as _allocnet_v1_AllocNetworkStatus,
  AllocNetworkStatus__Output as _allocnet_v1_AllocNetworkStatus__Output,
} from '../../allocnet/v1/AllocNetworkStatus.js';

/**
 * The outcome of an attach.
 */
export interface AttachNetworkResponse {
  /**
   * The allocation's network after the attach, `attachments` listing the new one.
   */
  status?: _allocnet_v1_AllocNetworkStatus | null;
  /**
   * True when an equal attachment was already there and no CNI ADD ran.
   */
  alreadyAttached?: boolean;
}

/**
 * The outcome of an attach.
 */
export interface AttachNetworkResponse__Output {
  /**
   * The allocation's network after the attach, `attachments` listing the new one.
   */
  status: _allocnet_v1_AllocNetworkStatus__Output | null;
  /**
   * True when an equal attachment was already there and no CNI ADD ran.
   */
  alreadyAttached: boolean;
}
