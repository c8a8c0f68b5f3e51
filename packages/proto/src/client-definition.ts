// The services' grpc-js definitions for clients, from the contract's JSON (descriptor.mjs) through
// protobufjs's light build: what proto-loader's package definition holds for each method (path,
// streams, serializers with `LOADER_OPTIONS`), without the .proto parser. The agent's server and
// reflection keep proto-loader's (load.ts); client-definition.test.ts holds the two equal.
import type * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs/light.js';
import { LOADER_OPTIONS } from './contract.mjs';
import { contractJson } from './descriptor.mjs';

let root: protobuf.Root | undefined;
const definitions = new Map<string, grpc.ServiceDefinition>();

function contractRoot(): protobuf.Root {
  if (root === undefined) {
    root = protobuf.Root.fromJSON(contractJson());
    root.resolveAll();
  }
  return root;
}

/** proto-loader's serializer: a Buffer passes as is, anything else is encoded from its object. */
function serializer(type: protobuf.Type): grpc.serialize<unknown> {
  return (value) =>
    Buffer.isBuffer(value)
      ? value
      : (type.encode(type.fromObject(value as Record<string, unknown>)).finish() as Buffer);
}

/** proto-loader's deserializer: decoded, then an object by `LOADER_OPTIONS`. */
function deserializer(type: protobuf.Type): grpc.deserialize<unknown> {
  return (bytes) => type.toObject(type.decode(bytes), LOADER_OPTIONS);
}

/**
 * The definition of the service `fullName` (`allocnet.v1.OperatorService`), made on first use
 * and kept: each method under its proto name, with its camelCase `originalName` as proto-loader
 * gives it (the generated clients have both spellings).
 */
export function clientServiceDefinition(fullName: string): grpc.ServiceDefinition {
  const known = definitions.get(fullName);
  if (known !== undefined) return known;
  const service = contractRoot().lookupService(fullName);
  const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const method of service.methodsArray) {
    // resolveAll() resolved every method's types; a missing one is a broken contract
    const request = method.resolvedRequestType;
    const response = method.resolvedResponseType;
    if (request === null || response === null)
      throw new Error(`method ${fullName}.${method.name} has unresolved types`);
    definition[method.name] = {
      path: `/${fullName}/${method.name}`,
      requestStream: method.requestStream === true,
      responseStream: method.responseStream === true,
      requestSerialize: serializer(request),
      requestDeserialize: deserializer(request),
      responseSerialize: serializer(response),
      responseDeserialize: deserializer(response),
      originalName: `${method.name.charAt(0).toLowerCase()}${method.name.slice(1)}`,
    };
  }
  definitions.set(fullName, definition);
  return definition;
}
