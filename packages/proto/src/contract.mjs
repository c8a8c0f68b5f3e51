// @ts-check
// What the generator (scripts/generate.mjs, plain node, runs before anything is compiled) and the
// runtime loader (src/load.ts) must agree on: where the .proto files are, which they are, and how
// proto-loader turns messages into objects. It is JavaScript so both can import this one module;
// tsc type-checks it (checkJs) and the build emits it with its declarations.

import { fileURLToPath } from 'node:url';

/**
 * The directory the `.proto` files are loaded from (imports are relative to it). Built, it is
 * `dist/proto/`, which the build copies from the repository's `proto/` so that `dist/` works on its
 * own; run from source (`src/`, as in unit tests and the generator) it is the repository's
 * `proto/` itself.
 */
export const PROTO_DIR = fileURLToPath(
  new URL(
    import.meta.url.endsWith('/src/contract.mjs') ? '../../../proto' : './proto',
    import.meta.url,
  ),
);

/**
 * The contract's files, relative to `PROTO_DIR` and spelled as the files import one another (a
 * file loaded under two names would be defined twice); docs/api.md follows this order.
 * @type {readonly string[]}
 */
export const PROTO_FILES = Object.freeze([
  'allocnet/v1/alloc_network_service.proto',
  'allocnet/v1/operator_service.proto',
  'allocnet/v1/types.proto',
]);

/**
 * How proto-loader maps messages to objects, for the generated types and the runtime alike:
 * camelCase field names, 64-bit integers as decimal strings, enums as their value names, omitted
 * fields filled with their defaults, and a virtual field naming the member a oneof holds.
 * @type {Readonly<{ keepCase: false, longs: StringConstructor, enums: StringConstructor, defaults: true, oneofs: true }>}
 */
export const LOADER_OPTIONS = Object.freeze({
  keepCase: false,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});

/** The full name of the scheduler's service, as on the wire and in server reflection. */
export const ALLOC_NETWORK_SERVICE = 'allocnet.v1.AllocNetworkService';
/** The full name of the operators' service. */
export const OPERATOR_SERVICE = 'allocnet.v1.OperatorService';
