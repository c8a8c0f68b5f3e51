// Original file: ../../proto/allocnet/v1/alloc_network_service.proto

/**
 * Which allocation to check.
 */
export interface CheckAllocNetworkRequest {
  /**
   * The allocation's id.
   */
  allocId?: string;
}

/**
 * Which allocation to check.
 */
export interface CheckAllocNetworkRequest__Output {
  /**
   * The allocation's id.
   */
  allocId: string;
}
