// Original file: ../../proto/allocnet/v1/operator_service.proto

/**
 * Asks for the agent's information; no parameters.
 */
export interface GetAgentInfoRequest {}

/**
 * Asks for the agent's information; no parameters.
 */
export interface GetAgentInfoRequest__Output {}
