// Original file: ../../proto/allocnet/v1/alloc_network_service.proto

import type {
  NetworkAttachment as _allocnet_v1_NetworkAttachment,
  NetworkAttachment__Output as _allocnet_v1_NetworkAttachment__Output,
} from '../../allocnet/v1/NetworkAttachment.js';

/**
 * Which network to attach to which allocation.
 */
export interface AttachNetworkRequest {
  /**
   * The allocation's id; it must be set up.
   */
  allocId?: string;
  /**
   * The network to attach, as an entry of a setup's `attachments` is given.
   */
  attachment?: _allocnet_v1_NetworkAttachment | null;
}

/**
 * Which network to attach to which allocation.
 */
export interface AttachNetworkRequest__Output {
  /**
   * The allocation's id; it must be set up.
   */
  allocId: string;
  /**
   * The network to attach, as an entry of a setup's `attachments` is given.
   */
  attachment: _allocnet_v1_NetworkAttachment__Output | null;
}
