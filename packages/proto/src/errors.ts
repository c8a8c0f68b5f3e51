/** What went wrong. */
export type ProtoErrorCode =
  | 'invalid-target' // an agent address that is neither a socket path nor host:port
  | 'unknown-method' // `unary` given a name that is not a unary method of the client
  | 'unknown-field'; // an answer's view (view.ts) naming a message or field the contract lacks

const BRAND = Symbol.for('@allocnet/proto.ProtoError');

/**
 * The one error type of this package (gRPC failures stay grpc-js `ServiceError`s). Its message
 * quotes the value it refuses: `agent address "localhost" is not a socket path or host:port`.
 */
export class ProtoError extends Error {
  readonly code: ProtoErrorCode;
  readonly [BRAND] = true;

  constructor(code: ProtoErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ProtoError';
    this.code = code;
  }
}

/** True for a `ProtoError`, also one from another copy of this package. */
export function isProtoError(value: unknown): value is ProtoError {
  return typeof value === 'object' && value !== null && BRAND in value;
}
