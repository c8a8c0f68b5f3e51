// A projection of a unary method's answer: decoded by a copy of the contract in which the named
// messages keep only the fields a reader uses. A protobuf reader skips the fields it does not
// know, so the others cost a skip on the wire: no objects, no int64 turned into a string. The
// answer on the wire and the agent are unchanged. `allocnet alloc list`'s table reads 9 of a
// status's 16 fields and nothing of its attachments but their number (docs/cli.md).
import protobuf from 'protobufjs/light.js';
import type { Service } from './service.js';
import type { UnaryMethod, UnaryRequest } from './client.js';
import { LOADER_OPTIONS } from './contract.mjs';
import { contractJson } from './descriptor.mjs';
import { ProtoError } from './errors.js';

/**
 * The fields each message keeps, by the message's full name (`allocnet.v1.AllocNetworkStatus`)
 * and its fields' camelCase names; a message not named keeps every field, one named with none
 * keeps none (a repeated field of it still counts its entries).
 */
export type Keep = Readonly<Record<string, readonly string[]>>;

/** A unary method's answer read through `keep`, as `T` (the reader's type of the projection). */
export interface AnswerView<C, M extends UnaryMethod<C>, T> {
  readonly service: Service<C>;
  readonly method: M;
  /** The call's path: `/allocnet.v1.AllocNetworkService/ListAllocNetworks`. */
  readonly path: string;
  /** The request's bytes, encoded as the full contract's client encodes it. */
  encodeRequest(request: UnaryRequest<C, M>): Uint8Array;
  /** The answer's bytes as `T`. */
  decode(bytes: Uint8Array): T;
}

type JsonNamespace = protobuf.INamespace & { fields?: Record<string, protobuf.IField> };

/** The definition at `fullName` (`allocnet.v1.X`) in the contract's JSON, or undefined. */
function definitionAt(json: protobuf.INamespace, fullName: string): JsonNamespace | undefined {
  let at: JsonNamespace | undefined = json;
  for (const part of fullName.split('.')) at = at?.nested?.[part];
  return at;
}

/**
 * The unary method `method` of `service` in the contract's JSON, by either spelling
 * (`ListAllocNetworks`, `listAllocNetworks`, as the generated clients have both): its proto name
 * and its request and response types.
 */
function unaryMethodOf(
  json: protobuf.INamespace,
  service: string,
  method: string,
): { readonly name: string; readonly types: protobuf.IMethod } {
  // A message or a namespace at that name has no methods.
  const definition = definitionAt(json, service) as Partial<protobuf.IService> | undefined;
  const methods = Object.entries(definition?.methods ?? {});
  const found = methods.find(
    ([name]) => name === method || `${name.charAt(0).toLowerCase()}${name.slice(1)}` === method,
  );
  if (found === undefined || found[1].requestStream === true || found[1].responseStream === true)
    throw new ProtoError(
      'unknown-method',
      `${JSON.stringify(method)} is not a unary method of ${service}`,
    );
  return { name: found[0], types: found[1] };
}

/**
 * A root of only `roots` and the messages and enums their fields reach, in the package
 * `namespace` (the contract's types are all in one package and name each other without it): so
 * resolving it all, as proto-loader's does, costs a few types rather than the whole contract.
 */
function reachableRoot(json: protobuf.INamespace, namespace: string, roots: readonly string[]) {
  const all = definitionAt(json, namespace)?.nested ?? {};
  const kept: Record<string, protobuf.AnyNestedObject> = {};
  const visit = (name: string) => {
    const definition = all[name] as JsonNamespace | undefined;
    if (definition === undefined || Object.hasOwn(kept, name)) return;
    kept[name] = definition;
    for (const field of Object.values(definition.fields ?? {})) visit(field.type);
  };
  roots.forEach(visit);
  let nested: Record<string, protobuf.AnyNestedObject> = kept;
  for (const part of namespace.split('.').reverse()) nested = { [part]: { nested } };
  const root = protobuf.Root.fromJSON({ nested });
  root.resolveAll();
  return root;
}

/** The contract's JSON with each message of `keep` cut down to its kept fields. */
function projectedJson(json: protobuf.INamespace, keep: Keep): protobuf.INamespace {
  for (const [message, names] of Object.entries(keep)) {
    const definition = definitionAt(json, message);
    const fields = definition?.fields;
    if (definition === undefined || fields === undefined)
      throw new ProtoError('unknown-field', `${JSON.stringify(message)} is not a message of the contract`); // prettier-ignore
    const unknown = names.find((name) => !Object.hasOwn(fields, name));
    if (unknown !== undefined)
      throw new ProtoError('unknown-field', `${message} has no field ${JSON.stringify(unknown)}`);
    definition.fields = Object.fromEntries(names.map((name) => [name, fields[name] as protobuf.IField])); // prettier-ignore
  }
  return json;
}

/**
 * A view of `method`'s answer that keeps only `keep`'s fields, read as `T`. `T` is the reader's
 * word: the fields `keep` names, filled as the full answer's are (`LOADER_OPTIONS`: defaults,
 * enums and int64 as strings, `null` for an unset message); view.test.ts holds a projection equal
 * to the full answer cut down. A name that is not in the contract is a `ProtoError` here.
 */
export function answerView<C, M extends UnaryMethod<C>, T>(
  service: Service<C>,
  method: M,
  keep: Keep,
): AnswerView<C, M, T> {
  const json = projectedJson(contractJson(), keep);
  const { name, types: methodTypes } = unaryMethodOf(json, service.fullName, method);
  const { requestType, responseType } = methodTypes;
  // The types are made on first use, then kept.
  let types: { request: protobuf.Type; response: protobuf.Type } | undefined;
  const typesOf = () => {
    if (types === undefined) {
      const namespace = service.fullName.slice(0, service.fullName.lastIndexOf('.'));
      const root = reachableRoot(json, namespace, [requestType, responseType]);
      types = {
        request: root.lookupType(`${namespace}.${requestType}`),
        response: root.lookupType(`${namespace}.${responseType}`),
      };
    }
    return types;
  };
  return {
    service,
    method,
    path: `/${service.fullName}/${name}`,
    encodeRequest(request) {
      const type = typesOf().request;
      return type.encode(type.fromObject(request as Record<string, unknown>)).finish();
    },
    decode(bytes) {
      const type = typesOf().response;
      return type.toObject(type.decode(bytes), LOADER_OPTIONS) as T;
    },
  };
}
