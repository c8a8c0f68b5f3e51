// Original file: ../../proto/allocnet/v1/alloc_network_service.proto

/**
 * Which allocation to tear down.
 */
export interface TeardownAllocNetworkRequest {
  /**
   * The allocation's id.
   */
  allocId?: string;
}

/**
 * Which allocation to tear down.
 */
export interface TeardownAllocNetworkRequest__Output {
  /**
   * The allocation's id.
   */
  allocId: string;
}
