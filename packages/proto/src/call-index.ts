// `@allocnet/proto/call`: the contract's methods called over node:http2 (call.ts, h2-call.ts), for
// a program that makes a few calls and exits, without grpc-js or proto-loader. The CLI calls the
// agent from here (docs/cli.md).
export { openChannel } from './call.js';
export type { Channel, StreamMethod, StreamRequest, StreamResponse } from './call.js';
export { ALLOC_NETWORK, OPERATOR } from './service.js';
export type { Service } from './service.js';
export { STATUS, isServiceError, statusName } from './codes.js';
export type { ServiceErrorLike, StatusName } from './codes.js';
export { CallError, grpcTimeout } from './h2-call.js';
export type { CallOptions, ChannelOptions } from './h2-call.js';
export { kindOfStatus } from './status.js';
export { answerView } from './view.js';
export type { AnswerView, Keep } from './view.js';
export type { UnaryMethod, UnaryRequest, UnaryResponse } from './client.js';
