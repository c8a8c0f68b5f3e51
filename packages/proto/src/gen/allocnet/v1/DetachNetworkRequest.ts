// Original file: ../../proto/allocnet/v1/alloc_network_service.proto

/**
 * Which attachment to detach from which allocation.
 */
export interface DetachNetworkRequest {
  /**
   * The allocation's id.
   */
  allocId?: string;
  /**
   * The interface of the attachment to detach (`net1`); never the primary's.
   */
  interfaceName?: string;
}

/**
 * Which attachment to detach from which allocation.
 */
export interface DetachNetworkRequest__Output {
  /**
   * The allocation's id.
   */
  allocId: string;
  /**
   * The interface of the attachment to detach (`net1`); never the primary's.
   */
  interfaceName: string;
}
