import type { MethodDefinition as LoaderMethod, ServiceDefinition } from '@grpc/proto-loader';
import protobuf from 'protobufjs/light.js';
import { clientServiceDefinition } from './client-definition.js';
import { ALLOC_NETWORK_SERVICE, OPERATOR_SERVICE } from './contract.mjs';
import { contractJson } from './descriptor.mjs';
import { loadAllocnetPackageDefinition } from './index.js';

/** proto-loader's definition of a service, the agent's (load.ts). */
function loaderService(name: string): ServiceDefinition {
  const definition = loadAllocnetPackageDefinition()[name];
  if (definition === undefined || 'format' in definition) throw new Error(`no service ${name}`);
  return definition;
}

const root = protobuf.Root.fromJSON(contractJson());
root.resolveAll();

/**
 * An object with every field of `type` set to a value other than its default: two elements in
 * each list, one entry in each map, the first member of each oneof, messages two levels deep.
 */
function sample(type: protobuf.Type, depth = 0): Record<string, unknown> {
  const value: Record<string, unknown> = {};
  const oneofSeen = new Set<string>();
  for (const field of type.fieldsArray) {
    if (field.partOf !== null) {
      if (oneofSeen.has(field.partOf.name)) continue;
      oneofSeen.add(field.partOf.name);
    }
    const one = (n: number): unknown => {
      const resolved = field.resolvedType;
      if (resolved instanceof protobuf.Type) return depth > 2 ? {} : sample(resolved, depth + 1);
      if (resolved instanceof protobuf.Enum) return Object.keys(resolved.values)[1 + (n % 2)];
      if (field.type === 'string') return `${field.name}-${n}`;
      if (field.type === 'bool') return true;
      if (field.type === 'bytes') return Buffer.from([1, 2, n]);
      if (/64$/.test(field.type)) return String(9_007_199_254_740_993n + BigInt(n));
      return 7 + n;
    };
    if (field.map) value[field.name] = { [`k${depth}`]: one(0) };
    else if (field.repeated) value[field.name] = [one(0), one(1)];
    else value[field.name] = one(0);
  }
  return value;
}

describe("the clients' definitions (protobufjs JSON) and proto-loader's (the agent's)", () => {
  for (const name of [ALLOC_NETWORK_SERVICE, OPERATOR_SERVICE]) {
    const theirs = loaderService(name);
    const ours = clientServiceDefinition(name);

    it(`have the same methods, paths, streams and names in ${name}`, () => {
      const shape = (
        m: Pick<
          LoaderMethod<unknown, unknown>,
          'path' | 'requestStream' | 'responseStream' | 'originalName'
        >,
      ) => ({
        path: m.path,
        requestStream: m.requestStream,
        responseStream: m.responseStream,
        originalName: m.originalName,
      });
      expect(Object.keys(ours)).toEqual(Object.keys(theirs));
      for (const method of Object.keys(theirs))
        expect(shape(ours[method] as LoaderMethod<unknown, unknown>)).toEqual(
          shape(theirs[method] as LoaderMethod<unknown, unknown>),
        );
    });

    it(`encode and decode every message of ${name} alike, filled and empty`, () => {
      for (const [method, loader] of Object.entries(theirs)) {
        const mine = ours[method];
        if (mine === undefined) throw new Error(`no method ${method}`);
        const requestType = root.lookupType((loader.requestType.type as { name: string }).name);
        const responseType = root.lookupType((loader.responseType.type as { name: string }).name);
        const request = sample(requestType);
        const response = sample(responseType);
        const requestBytes = loader.requestSerialize(request);
        const responseBytes = loader.responseSerialize(response);
        expect(mine.requestSerialize(request)).toEqual(requestBytes);
        expect(mine.responseSerialize(response)).toEqual(responseBytes);
        // the samples fill every field: only a message without fields encodes to nothing
        expect(requestBytes.length > 0).toBe(requestType.fieldsArray.length > 0);
        expect(responseBytes.length > 0).toBe(responseType.fieldsArray.length > 0);
        expect(mine.requestDeserialize(requestBytes)).toEqual(
          loader.requestDeserialize(requestBytes),
        );
        expect(mine.responseDeserialize(responseBytes)).toEqual(
          loader.responseDeserialize(responseBytes),
        );
        const empty = Buffer.alloc(0);
        expect(mine.responseDeserialize(empty)).toEqual(loader.responseDeserialize(empty));
        expect(mine.requestDeserialize(empty)).toEqual(loader.requestDeserialize(empty));
      }
    });
  }
});
