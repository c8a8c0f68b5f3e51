// @ts-check
// The contract as protobufjs JSON (`Root.toJSON()`), for clients: a client needs the messages'
// encoders, not the .proto parser, proto-loader and the descriptor protos that server reflection
// needs, and parsing the files is most of a short command's start (docs/cli.md). The build
// (scripts/descriptor.mjs) writes it to dist/descriptor.json; run from source (unit tests) it is
// parsed from the .proto files, the same way.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { LOADER_OPTIONS, PROTO_DIR, PROTO_FILES } from './contract.mjs';

/** The built JSON's file name, beside this module in dist/. */
export const DESCRIPTOR_FILE = 'descriptor.json';

/**
 * Parses the contract as proto-loader's `loadSync` does (imports resolved in `PROTO_DIR`, field
 * names by `LOADER_OPTIONS.keepCase`) and answers the root as JSON.
 * @returns {import('protobufjs').INamespace}
 */
export function parseContractJson() {
  /** @type {typeof import('protobufjs')} */
  const protobuf = createRequire(import.meta.url)('protobufjs');
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) =>
    path.isAbsolute(target) ? target : path.join(PROTO_DIR, target);
  root.loadSync([...PROTO_FILES], { keepCase: LOADER_OPTIONS.keepCase });
  root.resolveAll();
  return root.toJSON();
}

/**
 * The contract's JSON: the build's `dist/descriptor.json`, or parsed when run from `src/`.
 * @returns {import('protobufjs').INamespace}
 */
export function contractJson() {
  if (import.meta.url.endsWith('/src/descriptor.mjs')) return parseContractJson();
  return /** @type {import('protobufjs').INamespace} */ (
    JSON.parse(readFileSync(new URL(`./${DESCRIPTOR_FILE}`, import.meta.url), 'utf8'))
  );
}
