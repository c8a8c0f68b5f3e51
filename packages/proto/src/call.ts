// The contract's methods called over h2-call.ts, typed by the generated clients: requests encoded
// and responses decoded by the serializers grpc-js's clients get (client-definition.ts), so an
// answer reads exactly as through `createAllocNetworkClient` (`LOADER_OPTIONS`: camelCase, longs
// and enums as strings, defaults filled). `@allocnet/proto/call` loads neither grpc-js nor
// proto-loader.
import type * as grpc from '@grpc/grpc-js';
import { clientServiceDefinition } from './client-definition.js';
import type { UnaryMethod, UnaryRequest, UnaryResponse } from './client.js';
import { ALLOC_NETWORK_SERVICE, OPERATOR_SERVICE } from './contract.mjs';
import { ProtoError } from './errors.js';
import type { AllocNetworkServiceClient } from './gen/allocnet/v1/AllocNetworkService.js';
import type { OperatorServiceClient } from './gen/allocnet/v1/OperatorService.js';
import { CallError, openH2Channel } from './h2-call.js';
import type { CallOptions, ChannelOptions } from './h2-call.js';

/** A service of the contract, typed by its generated client `C` (which is never made). */
export interface Service<C> {
  readonly fullName: string;
  /** Only for the type. */
  readonly client?: C;
}

/** The scheduler's service. */
export const ALLOC_NETWORK: Service<AllocNetworkServiceClient> = Object.freeze({
  fullName: ALLOC_NETWORK_SERVICE,
});
/** The operators' service. */
export const OPERATOR: Service<OperatorServiceClient> = Object.freeze({
  fullName: OPERATOR_SERVICE,
});

/** A generated server-streaming method's request and message, read from its shortest overload. */
type StreamSignature<F> = F extends (
  argument: infer Request,
  options?: grpc.CallOptions,
) => grpc.ClientReadableStream<infer Response>
  ? { request: Request; response: Response }
  : never;

/** The names of a generated client's server-streaming methods. */
export type StreamMethod<C> = {
  [K in keyof C]-?: [StreamSignature<C[K]>] extends [never] ? never : K;
}[keyof C] &
  string;
export type StreamRequest<C, M extends keyof C> = StreamSignature<C[M]>['request'];
export type StreamResponse<C, M extends keyof C> = StreamSignature<C[M]>['response'];

export interface Channel {
  /** Calls a unary method: `await channel.unary(OPERATOR, 'ListLeaks', {}, { deadlineMs })`. */
  unary<C, M extends UnaryMethod<C>>(
    service: Service<C>,
    method: M,
    request: UnaryRequest<C, M>,
    options?: CallOptions,
  ): Promise<UnaryResponse<C, M>>;
  /** Calls a server-streaming method, giving each message to `onMessage`; resolves at its end. */
  serverStream<C, M extends StreamMethod<C>>(
    service: Service<C>,
    method: M,
    request: StreamRequest<C, M>,
    onMessage: (message: StreamResponse<C, M>) => void,
    options?: CallOptions,
  ): Promise<void>;
  close(): void;
}

/** A method of `service` by either spelling (`ListLeaks`, `listLeaks`), of the kind asked for. */
function methodOf(
  service: Service<unknown>,
  name: string,
  streaming: boolean,
): grpc.MethodDefinition<unknown, unknown> {
  const definition = clientServiceDefinition(service.fullName);
  const method = definition[name] ?? Object.values(definition).find((m) => m.originalName === name);
  if (method === undefined || method.requestStream || method.responseStream !== streaming)
    throw new ProtoError(
      'unknown-method',
      `${JSON.stringify(name)} is not a ${streaming ? 'server-streaming' : 'unary'} method of ${service.fullName}`,
    );
  return method;
}

/**
 * Opens a channel to `target` (`agentTarget`'s form). A failed call rejects with a `CallError`
 * (`isServiceError`); a name that is not a method of the kind called, with a `ProtoError`.
 */
export function openChannel(target: string, options: ChannelOptions = {}): Channel {
  const h2 = openH2Channel(target, options);
  const send = (
    method: grpc.MethodDefinition<unknown, unknown>,
    request: unknown,
    onMessage: (message: unknown) => void,
    options: CallOptions | undefined,
  ) =>
    h2.call(
      method.path,
      method.requestSerialize(request),
      (bytes) => {
        onMessage(method.responseDeserialize(bytes));
      },
      options,
    );
  return {
    async unary(service, name, request, options) {
      const method = methodOf(service, name, false);
      const responses: unknown[] = [];
      await send(method, request, (m) => responses.push(m), options);
      // As grpc-js says it of a unary call answered with no message or more than one.
      if (responses.length !== 1)
        throw new CallError(
          'UNIMPLEMENTED',
          responses.length === 0 ? 'No message received' : 'Too many responses received',
        );
      return responses[0];
    },
    async serverStream(service, name, request, onMessage, options) {
      await send(methodOf(service, name, true), request, onMessage, options);
    },
    close() {
      h2.close();
    },
  };
}
