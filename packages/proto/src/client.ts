import * as grpc from '@grpc/grpc-js';
import { clientServiceDefinition } from './client-definition.js';
import { ALLOC_NETWORK_SERVICE, OPERATOR_SERVICE } from './contract.mjs';
import { isServiceError as isFailedCall } from './codes.js';
import { ProtoError } from './errors.js';
import type { AllocNetworkServiceClient } from './gen/allocnet/v1/AllocNetworkService.js';
import type { OperatorServiceClient } from './gen/allocnet/v1/OperatorService.js';

/**
 * A client class of the service `fullName`, as grpc-js's `loadPackageDefinition` makes it (named
 * by the service's last name), from the definitions of client-definition.ts: a client never loads
 * proto-loader. The generated client types describe these classes (client-definition.test.ts).
 */
function clientConstructor(fullName: string): grpc.ServiceClientConstructor {
  return grpc.makeClientConstructor(
    clientServiceDefinition(fullName),
    fullName.slice(fullName.lastIndexOf('.') + 1),
  );
}

/**
 * A client of the scheduler's service. `target` is a grpc target (`unix:///run/allocnet/agent.sock`,
 * `host:port`); pass what a user typed through `agentTarget` first.
 */
export function createAllocNetworkClient(
  target: string,
  credentials: grpc.ChannelCredentials,
  options?: grpc.ClientOptions,
): AllocNetworkServiceClient {
  return new (clientConstructor(ALLOC_NETWORK_SERVICE))(
    target,
    credentials,
    options,
  ) as unknown as AllocNetworkServiceClient;
}

/** A client of the operators' service; `target` as for `createAllocNetworkClient`. */
export function createOperatorClient(
  target: string,
  credentials: grpc.ChannelCredentials,
  options?: grpc.ClientOptions,
): OperatorServiceClient {
  return new (clientConstructor(OPERATOR_SERVICE))(
    target,
    credentials,
    options,
  ) as unknown as OperatorServiceClient;
}

/** The request and response of a generated unary method, read from its callback-only overload. */
type UnarySignature<F> = F extends (
  argument: infer Request,
  callback: grpc.requestCallback<infer Response>,
) => grpc.ClientUnaryCall
  ? { request: Request; response: Response }
  : never;

/** The names of a generated client's methods whose signature (`Signatures[K]`) was read. */
export type MethodNames<C, Signatures extends { [K in keyof C]: unknown }> = {
  [K in keyof C]-?: [Signatures[K]] extends [never] ? never : K;
}[keyof C] &
  string;

/** The names of a generated client's unary methods (both spellings: `GetAgentInfo`, `getAgentInfo`). */
export type UnaryMethod<C> = MethodNames<C, { [K in keyof C]: UnarySignature<C[K]> }>;
/** What a unary method takes. */
export type UnaryRequest<C, M extends keyof C> = UnarySignature<C[M]>['request'];
/** What a unary method answers (proto-loader's `__Output` form: defaults filled). */
export type UnaryResponse<C, M extends keyof C> = UnarySignature<C[M]>['response'];

export interface UnaryOptions {
  /** How long the call may take from now; then it fails with `DEADLINE_EXCEEDED`. None by default. */
  readonly deadlineMs?: number;
  /** Request metadata (headers). */
  readonly metadata?: grpc.Metadata;
  /** Cancels the call: the promise then rejects with grpc's `CANCELLED` ServiceError. */
  readonly signal?: AbortSignal;
}

/** A generated unary method, called in its full form. */
type RawUnary<Response> = (
  argument: unknown,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  callback: grpc.requestCallback<Response>,
) => grpc.ClientUnaryCall;

/**
 * Calls a unary method of a generated client and resolves with its response:
 * `await unary(client, 'GetAllocNetwork', { allocId }, { deadlineMs: 5000 })`. A failed call
 * rejects with grpc-js's `ServiceError` as is (`code`, `details`, `metadata`), also when `signal`
 * cancels it (`CANCELLED`) or the deadline passes (`DEADLINE_EXCEEDED`).
 */
export function unary<C extends grpc.Client, M extends UnaryMethod<C>>(
  client: C,
  method: M,
  request: UnaryRequest<C, M>,
  options: UnaryOptions = {},
): Promise<UnaryResponse<C, M>> {
  const fn: unknown = client[method];
  if (typeof fn !== 'function') {
    return Promise.reject(
      new ProtoError('unknown-method', `${JSON.stringify(method)} is not a method of the client`),
    );
  }
  const { deadlineMs, metadata, signal } = options;
  const callOptions: grpc.CallOptions =
    deadlineMs === undefined ? {} : { deadline: Date.now() + deadlineMs };
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      call.cancel();
    };
    const call = (fn as RawUnary<UnaryResponse<C, M>>).call(
      client,
      request,
      metadata ?? new grpc.Metadata(),
      callOptions,
      (error, response) => {
        signal?.removeEventListener('abort', onAbort);
        if (error !== null) reject(error);
        // grpc-js passes the decoded response whenever there is no error
        else resolve(response);
      },
    );
    if (signal?.aborted === true) call.cancel();
    else signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * True for grpc-js's `ServiceError`: an `Error` with a numeric status `code`, `details` and
 * `metadata` (codes.ts' test, typed with grpc-js's `Metadata`).
 */
export const isServiceError = isFailedCall as (value: unknown) => value is grpc.ServiceError;
