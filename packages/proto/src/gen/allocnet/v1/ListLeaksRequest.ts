// Original file: ../../proto/allocnet/v1/operator_service.proto

/**
 * Lists leaks; no parameters.
 */
export interface ListLeaksRequest {}

/**
 * Lists leaks; no parameters.
 */
export interface ListLeaksRequest__Output {}
