// The contract's methods called over h2-call.ts, typed by the generated clients: requests encoded
// and responses decoded by the serializers grpc-js's clients get (client-definition.ts), so an
// answer reads exactly as through `createAllocNetworkClient` (`LOADER_OPTIONS`: camelCase, longs
// and enums as strings, defaults filled). `@allocnet/proto/call` loads neither grpc-js nor
// proto-loader.
import type * as grpc from '@grpc/grpc-js';
import { clientServiceDefinition } from './client-definition.js';
import type { MethodNames, UnaryMethod, UnaryRequest, UnaryResponse } from './client.js';
import { ProtoError } from './errors.js';
import { CallError, openH2Channel } from './h2-call.js';
import type { CallOptions, ChannelOptions } from './h2-call.js';
import type { Service } from './service.js';
import type { AnswerView } from './view.js';

/** A generated server-streaming method's request and message, read from its shortest overload. */
type StreamSignature<F> = F extends (
  argument: infer Request,
  options?: grpc.CallOptions,
) => grpc.ClientReadableStream<infer Response>
  ? { request: Request; response: Response }
  : never;

/** The names of a generated client's server-streaming methods. */
export type StreamMethod<C> = MethodNames<C, { [K in keyof C]: StreamSignature<C[K]> }>;
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
  /** Calls a unary method and reads its answer through `view` (view.ts): only its fields. */
  unaryView<C, M extends UnaryMethod<C>, T>(
    view: AnswerView<C, M, T>,
    request: UnaryRequest<C, M>,
    options?: CallOptions,
  ): Promise<T>;
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
    path: string,
    request: Uint8Array,
    onMessage: (message: unknown) => void,
    options: CallOptions | undefined,
    decode: (bytes: Buffer) => unknown,
  ) =>
    h2.call(
      path,
      request,
      (bytes) => {
        onMessage(decode(bytes));
      },
      options,
    );
  const unary = async (
    path: string,
    request: Uint8Array,
    options: CallOptions | undefined,
    decode: (bytes: Buffer) => unknown,
  ) => {
    const responses: unknown[] = [];
    await send(path, request, (m) => responses.push(m), options, decode);
    // As grpc-js says it of a unary call answered with no message or more than one.
    if (responses.length !== 1)
      throw new CallError(
        'UNIMPLEMENTED',
        responses.length === 0 ? 'No message received' : 'Too many responses received',
      );
    return responses[0];
  };
  return {
    async unary(service, name, request, options) {
      const method = methodOf(service, name, false);
      return unary(method.path, method.requestSerialize(request), options, method.responseDeserialize); // prettier-ignore
    },
    async unaryView<C, M extends UnaryMethod<C>, T>(
      view: AnswerView<C, M, T>,
      request: UnaryRequest<C, M>,
      options?: CallOptions,
    ) {
      // The view's own types: the whole contract is not made for it.
      const bytes = view.encodeRequest(request);
      return (await unary(view.path, bytes, options, (answer) => view.decode(answer))) as T;
    },
    async serverStream(service, name, request, onMessage, options) {
      const method = methodOf(service, name, true);
      await send(method.path, method.requestSerialize(request), onMessage, options, method.responseDeserialize); // prettier-ignore
    },
    close() {
      h2.close();
    },
  };
}
