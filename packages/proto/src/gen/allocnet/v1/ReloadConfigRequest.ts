// Original file: ../../proto/allocnet/v1/operator_service.proto

/**
 * Reloads the network configuration; no parameters.
 */
export interface ReloadConfigRequest {}

/**
 * Reloads the network configuration; no parameters.
 */
export interface ReloadConfigRequest__Output {}
