// `@allocnet/proto/client`: what a client program needs (addresses, clients, calls, statuses)
// without the package's index, which also loads proto-loader for servers and reflection. The
// CLI starts from here (docs/cli.md).
export { ProtoError, agentTarget, isProtoError } from './target.js';
export { createAllocNetworkClient, createOperatorClient, isServiceError, unary } from './client.js';
export type { UnaryMethod, UnaryOptions, UnaryRequest, UnaryResponse } from './client.js';
export { kindOfStatus } from './status.js';
export type { AllocNetworkServiceClient } from './gen/allocnet/v1/AllocNetworkService.js';
export type { OperatorServiceClient } from './gen/allocnet/v1/OperatorService.js';
