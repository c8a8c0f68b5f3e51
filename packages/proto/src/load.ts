import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { PackageDefinition } from '@grpc/proto-loader';
import { LOADER_OPTIONS, PROTO_DIR, PROTO_FILES } from './contract.mjs';
import type { ProtoGrpcType as AllocNetworkServiceGrpcType } from './gen/alloc_network_service.js';
import type { ProtoGrpcType as OperatorServiceGrpcType } from './gen/operator_service.js';

export { ALLOC_NETWORK_SERVICE, OPERATOR_SERVICE } from './contract.mjs';

/**
 * The loaded contract: `allocnet.v1` with both services' client constructors (each with its
 * `service` definition, for `server.addService`) and every message and enum type. The generator
 * writes one such type per .proto file; this is their union.
 */
export type ProtoGrpcType = AllocNetworkServiceGrpcType & OperatorServiceGrpcType;

let definition: PackageDefinition | undefined;

/**
 * The contract as proto-loader's package definition (the .proto files in `PROTO_DIR`, loaded with
 * `LOADER_OPTIONS`), e.g. for server reflection. Parsing takes a few milliseconds, and the CLI
 * makes a client per node of a fleet, so the first call parses and later calls return the same
 * object: treat it as read-only.
 */
export function loadAllocnetPackageDefinition(): PackageDefinition {
  definition ??= protoLoader.loadSync([...PROTO_FILES], {
    ...LOADER_OPTIONS,
    includeDirs: [PROTO_DIR],
  });
  return definition;
}

/** The contract as grpc-js objects, typed with the generated types. */
export function loadAllocnetProto(): ProtoGrpcType {
  // grpc-js types the result as a loose GrpcObject; the generated types describe exactly this
  // definition, loaded with the options they were generated with.
  return grpc.loadPackageDefinition(loadAllocnetPackageDefinition()) as unknown as ProtoGrpcType;
}
