// Original file: ../../proto/allocnet/v1/alloc_network_service.proto

/**
 * Lists every allocation network; no parameters.
 */
export interface ListAllocNetworksRequest {}

/**
 * Lists every allocation network; no parameters.
 */
export interface ListAllocNetworksRequest__Output {}
