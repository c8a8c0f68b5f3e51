import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ServiceDefinition } from '@grpc/proto-loader';
import {
  ALLOC_NETWORK_SERVICE,
  LOADER_OPTIONS,
  OPERATOR_SERVICE,
  PROTO_DIR,
  PROTO_FILES,
  loadAllocnetPackageDefinition,
  loadAllocnetProto,
} from './index.js';

const here = path.dirname(fileURLToPath(import.meta.url));

/** A service of the package definition, by full name. */
function service(name: string): ServiceDefinition {
  const definition = loadAllocnetPackageDefinition()[name];
  if (definition === undefined || 'format' in definition) throw new Error(`no service ${name}`);
  return definition;
}

/** Each method of a service as in its .proto: name, request and response type, streaming. */
function methods(definition: ServiceDefinition): string[] {
  return Object.entries(definition).map(([name, m]) => {
    const request = (m.requestType.type as { name: string }).name;
    const response = (m.responseType.type as { name: string }).name;
    return (
      `${name}(${m.requestStream ? 'stream ' : ''}${request}) ` +
      `returns (${m.responseStream ? 'stream ' : ''}${response})`
    );
  });
}

describe('the contract', () => {
  it('is loaded from the repository proto/ when run from source', () => {
    expect(PROTO_DIR).toBe(path.resolve(here, '../../../proto'));
  });

  it('lists every .proto file under PROTO_DIR', () => {
    const found = readdirSync(path.join(PROTO_DIR, 'allocnet/v1'))
      .filter((f) => f.endsWith('.proto'))
      .map((f) => `allocnet/v1/${f}`);
    expect([...PROTO_FILES].sort()).toEqual(found.sort());
  });

  it('is loaded with the options the types were generated with', () => {
    expect(LOADER_OPTIONS).toEqual({
      keepCase: false,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
    });
  });

  it("has the scheduler's service with exactly its methods", () => {
    expect(methods(service(ALLOC_NETWORK_SERVICE))).toEqual([
      'SetupAllocNetwork(SetupAllocNetworkRequest) returns (SetupAllocNetworkResponse)',
      'TeardownAllocNetwork(TeardownAllocNetworkRequest) returns (TeardownAllocNetworkResponse)',
      'GetAllocNetwork(GetAllocNetworkRequest) returns (GetAllocNetworkResponse)',
      'ListAllocNetworks(ListAllocNetworksRequest) returns (ListAllocNetworksResponse)',
      'CheckAllocNetwork(CheckAllocNetworkRequest) returns (CheckAllocNetworkResponse)',
      'AttachNetwork(AttachNetworkRequest) returns (AttachNetworkResponse)',
      'DetachNetwork(DetachNetworkRequest) returns (DetachNetworkResponse)',
    ]);
  });

  it("has the operators' service with exactly its methods", () => {
    expect(methods(service(OPERATOR_SERVICE))).toEqual([
      'ForceCleanup(ForceCleanupRequest) returns (ForceCleanupResponse)',
      'ListLeaks(ListLeaksRequest) returns (ListLeaksResponse)',
      'ReapLeaks(ReapLeaksRequest) returns (stream ReapLeaksProgress)',
      'ReloadConfig(ReloadConfigRequest) returns (ReloadConfigResponse)',
      'GetAgentInfo(GetAgentInfoRequest) returns (GetAgentInfoResponse)',
    ]);
  });

  it('has exactly the two services, by their full names', () => {
    const definition = loadAllocnetPackageDefinition();
    const services = Object.entries(definition).filter(([, d]) => !('format' in d));
    expect(services.map(([name]) => name).sort()).toEqual([
      ALLOC_NETWORK_SERVICE,
      OPERATOR_SERVICE,
    ]);
  });

  it('gives the typed grpc objects the same service definitions', () => {
    const { AllocNetworkService, OperatorService } = loadAllocnetProto().allocnet.v1;
    expect(AllocNetworkService.service).toBe(service(ALLOC_NETWORK_SERVICE));
    expect(OperatorService.service).toBe(service(OPERATOR_SERVICE));
  });

  it('parses once and hands out the same package definition', () => {
    expect(loadAllocnetPackageDefinition()).toBe(loadAllocnetPackageDefinition());
  });

  it('exports every generated message and enum type from the index, in both forms', () => {
    const index = readFileSync(path.join(here, 'index.ts'), 'utf8');
    const exported = new Set(
      [...index.matchAll(/export (?:type )?\{([^}]*)\}/g)].flatMap((m) =>
        (m[1] ?? '').split(',').map((name) => name.trim()),
      ),
    );
    const generated = readdirSync(path.join(here, 'gen/allocnet/v1'))
      .map((f) => f.replace(/\.ts$/, ''))
      .filter((name) => !name.endsWith('Service'));
    const missing = generated
      .flatMap((name) => [name, `${name}__Output`])
      .filter((name) => !exported.has(name));
    expect(missing).toEqual([]);
  });
});
