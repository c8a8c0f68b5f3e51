// @ts-check
// Part of the build (after tsc and the copy of the .proto files into dist/proto): writes
// dist/descriptor.json, the contract as protobufjs JSON that clients load instead of parsing the
// .proto files (src/descriptor.mjs).

import { writeFileSync } from 'node:fs';
import { DESCRIPTOR_FILE, parseContractJson } from '../dist/descriptor.mjs';

writeFileSync(
  new URL(`../dist/${DESCRIPTOR_FILE}`, import.meta.url),
  JSON.stringify(parseContractJson()),
);
