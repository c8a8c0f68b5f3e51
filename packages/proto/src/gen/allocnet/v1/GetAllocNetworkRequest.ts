// Original file: ../../proto/allocnet/v1/alloc_network_service.proto

/**
 * Which allocation to return.
 */
export interface GetAllocNetworkRequest {
  /**
   * The allocation's id.
   */
  allocId?: string;
}

/**
 * Which allocation to return.
 */
export interface GetAllocNetworkRequest__Output {
  /**
   * The allocation's id.
   */
  allocId: string;
}
