import * as grpc from '@grpc/grpc-js';
import { ProtoError } from './errors.js';
import { loadAllocnetProto } from './load.js';
import type { AllocNetworkServiceClient } from './gen/allocnet/v1/AllocNetworkService.js';
import type { OperatorServiceClient } from './gen/allocnet/v1/OperatorService.js';

/**
 * A client of the scheduler's service. `target` is a grpc target (`unix:///run/allocnet/agent.sock`,
 * `host:port`); pass what a user typed through `agentTarget` first.
 */
export function createAllocNetworkClient(
  target: string,
  credentials: grpc.ChannelCredentials,
  options?: grpc.ClientOptions,
): AllocNetworkServiceClient {
  const { AllocNetworkService } = loadAllocnetProto().allocnet.v1;
  return new AllocNetworkService(target, credentials, options);
}

/** A client of the operators' service; `target` as for `createAllocNetworkClient`. */
export function createOperatorClient(
  target: string,
  credentials: grpc.ChannelCredentials,
  options?: grpc.ClientOptions,
): OperatorServiceClient {
  const { OperatorService } = loadAllocnetProto().allocnet.v1;
  return new OperatorService(target, credentials, options);
}

const HOST_PORT = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?):([0-9]{1,5})$/;

/**
 * The grpc target for an agent address as users write it:
 * - a socket path: `/run/allocnet/agent.sock` → `unix:///run/allocnet/agent.sock`,
 *   `./agent.sock` → `unix:./agent.sock` (relative to the working directory);
 * - a unix target, kept: `unix:///abs`, `unix:/abs`, `unix:relative`;
 * - `host:port` or `[v6]:port`, kept (grpc resolves the name).
 * Anything else throws a `ProtoError` (`invalid-target`).
 */
export function agentTarget(address: string): string {
  const refuse = (why: string): never => {
    throw new ProtoError(
      'invalid-target',
      `agent address ${JSON.stringify(address)} ${why}; use a socket path (/… or ./…), unix:<path> or host:port`,
    );
  };
  if (address === '') return refuse('is empty');
  if (/\s/.test(address)) return refuse('contains whitespace');
  if (address.startsWith('/')) return `unix://${address}`;
  if (address.startsWith('./') || address.startsWith('../')) return `unix:${address}`;
  if (address.startsWith('unix:')) {
    const rest = address.slice('unix:'.length);
    // after `unix://` comes an absolute path: in `unix://x`, `x` would be an authority
    const slashes = rest.startsWith('//');
    const socketPath = slashes ? rest.slice(2) : rest;
    if (socketPath === '' || socketPath === '/' || (slashes && !socketPath.startsWith('/')))
      return refuse('has no socket path after "unix:"');
    return address;
  }
  const port = HOST_PORT.exec(address)?.[1];
  if (port === undefined) return refuse('is not a socket path or host:port');
  if (Number(port) < 1 || Number(port) > 65535) return refuse(`has port ${port}, not 1-65535`);
  return address;
}

/** The request and response of a generated unary method, read from its callback-only overload. */
type UnarySignature<F> = F extends (
  argument: infer Request,
  callback: grpc.requestCallback<infer Response>,
) => grpc.ClientUnaryCall
  ? { request: Request; response: Response }
  : never;

/** The names of a generated client's unary methods (both spellings: `GetAgentInfo`, `getAgentInfo`). */
export type UnaryMethod<C> = {
  [K in keyof C]-?: [UnarySignature<C[K]>] extends [never] ? never : K;
}[keyof C] &
  string;
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

/** True for grpc-js's `ServiceError`: an `Error` with a numeric status `code`, `details` and `metadata`. */
export function isServiceError(value: unknown): value is grpc.ServiceError {
  return (
    value instanceof Error &&
    typeof (value as Partial<grpc.ServiceError>).code === 'number' &&
    typeof (value as Partial<grpc.ServiceError>).details === 'string' &&
    // not `instanceof grpc.Metadata`: the error may come from another copy of grpc-js
    typeof (value as Partial<grpc.ServiceError>).metadata === 'object'
  );
}
