// An answer read through a view (view.ts) is the full answer cut down to the view's fields, for
// any answer; names the contract lacks are refused when the view is made.
import fc from 'fast-check';
import { ALLOC_NETWORK, OPERATOR, answerView, openChannel } from './call-index.js';
import { clientServiceDefinition } from './client-definition.js';
import type { AllocNetworkStatus__Output, ListAllocNetworksResponse__Output } from './index.js';
import type { AllocNetworkServiceClient } from './gen/allocnet/v1/AllocNetworkService.js';
import { createTestServer } from './testing/server.js';
import { ProtoError } from './errors.js';

/** The fields `alloc list`'s table reads (packages/cli's alloc-status.ts keeps its own). */
const ROW_FIELDS = ['allocId', 'phase', 'network', 'address', 'addressIpv6', 'portMappings', 'origin', 'netnsPath', 'attachments'] as const; // prettier-ignore
type Row = Pick<AllocNetworkStatus__Output, Exclude<(typeof ROW_FIELDS)[number], 'origin' | 'attachments'>> & {
  origin: { runtime: string } | null;
  attachments: Record<string, never>[];
}; // prettier-ignore

const rowsView = () =>
  answerView<AllocNetworkServiceClient, 'ListAllocNetworks', { allocations: Row[] }>(ALLOC_NETWORK, 'ListAllocNetworks', {
    'allocnet.v1.AllocNetworkStatus': ROW_FIELDS,
    'allocnet.v1.AttachmentStatus': [],
    'allocnet.v1.CniOrigin': ['runtime'],
  }); // prettier-ignore

/** The full answer cut down as the view should read it. */
function cutDown(full: ListAllocNetworksResponse__Output): { allocations: Row[] } {
  return {
    allocations: full.allocations.map((s) => ({
      allocId: s.allocId,
      phase: s.phase,
      network: s.network,
      address: s.address,
      addressIpv6: s.addressIpv6,
      portMappings: s.portMappings,
      origin: s.origin === null ? null : { runtime: s.origin.runtime },
      netnsPath: s.netnsPath,
      attachments: s.attachments.map(() => ({})),
    })),
  };
}

const text = fc.string({ maxLength: 12 });
const texts = fc.array(text, { maxLength: 3 });
const port = fc.record({
  hostPort: fc.nat(65_535),
  containerPort: fc.nat(65_535),
  protocol: fc.constantFrom('tcp', 'udp'),
  hostIp: text,
});
const phase = fc.constantFrom('PHASE_UNSPECIFIED', 'PHASE_SETTING_UP', 'PHASE_READY', 'PHASE_TEARING_DOWN', 'PHASE_FAILED', 'PHASE_RESTORING'); // prettier-ignore
const dns = fc.option(fc.record({ servers: texts, searches: texts, options: texts }), { nil: null }); // prettier-ignore
const attachment = fc.record({
  network: text,
  interfaceName: text,
  phase,
  addresses: texts,
  mac: text,
  gateways: texts,
  dns,
  portMappings: fc.array(port, { maxLength: 2 }),
  attached: fc.boolean(),
});
const status = fc.record({
  allocId: text,
  network: text,
  phase,
  interfaceName: text,
  address: text,
  addressIpv6: text,
  dns,
  netnsPath: text,
  portMappings: fc.array(port, { maxLength: 3 }),
  attempts: fc.nat(),
  retryCount: fc.nat(),
  updatedAtUnixMs: fc.bigInt(0n, 2n ** 63n - 1n).map(String),
  error: text,
  netnsCreatedByAgent: fc.boolean(),
  origin: fc.option(fc.record({ runtime: text, containerId: text, ifname: text }), { nil: null }), // prettier-ignore
  attachments: fc.array(attachment, { maxLength: 3 }),
});

/** The full contract's definition of a method of the scheduler's service. */
function fullMethod(name: string) {
  const method = clientServiceDefinition('allocnet.v1.AllocNetworkService')[name];
  if (method === undefined) throw new Error(`no method ${name}`);
  return method;
}

describe('answerView', () => {
  const method = fullMethod('ListAllocNetworks');

  it('reads any answer as the full answer cut down to its fields', () => {
    const view = rowsView();
    fc.assert(
      fc.property(fc.array(status, { maxLength: 8 }), (allocations) => {
        const bytes = method.responseSerialize({ allocations });
        const full = method.responseDeserialize(bytes) as ListAllocNetworksResponse__Output;
        expect(view.decode(bytes)).toEqual(cutDown(full));
      }),
    );
  });

  it('encodes a request as the full contract does, and calls the method by its path', () => {
    const get = answerView<AllocNetworkServiceClient, 'GetAllocNetwork', unknown>(ALLOC_NETWORK, 'GetAllocNetwork', {}); // prettier-ignore
    const full = fullMethod('GetAllocNetwork');
    expect(get.path).toBe(full.path);
    fc.assert(
      fc.property(fc.string(), (allocId) => {
        expect(Buffer.from(get.encodeRequest({ allocId }))).toEqual(full.requestSerialize({ allocId })); // prettier-ignore
      }),
    );
    expect(rowsView().encodeRequest({})).toHaveLength(0);
    // The generated clients' camelCase spelling names the same method.
    expect(answerView(ALLOC_NETWORK, 'getAllocNetwork', {}).path).toBe(full.path);
  });

  it('names the message or field the contract lacks, and a method that is not unary', () => {
    const refusal = (make: () => unknown) => {
      try {
        make();
      } catch (error) {
        expect(error).toBeInstanceOf(ProtoError);
        return `${(error as ProtoError).code}: ${(error as Error).message}`;
      }
      throw new Error('the view was made');
    };
    expect(refusal(() => answerView(ALLOC_NETWORK, 'ListAllocNetworks', { 'allocnet.v1.AllocNetworkStatus': ['allocId', 'ports'] }))).toBe(
      'unknown-field: allocnet.v1.AllocNetworkStatus has no field "ports"',
    ); // prettier-ignore
    expect(refusal(() => answerView(ALLOC_NETWORK, 'ListAllocNetworks', { 'allocnet.v1.Status': [] }))).toBe(
      'unknown-field: "allocnet.v1.Status" is not a message of the contract',
    ); // prettier-ignore
    expect(refusal(() => answerView(ALLOC_NETWORK, 'ListAllocNetworks', { 'allocnet.v1.Phase': [] }))).toBe(
      'unknown-field: "allocnet.v1.Phase" is not a message of the contract',
    ); // prettier-ignore
    expect(refusal(() => answerView(OPERATOR, 'ReapLeaks' as 'ListLeaks', {}))).toBe(
      'unknown-method: "ReapLeaks" is not a unary method of allocnet.v1.OperatorService',
    );
  });

  it('is what a channel answers a call made through it, the full answer unchanged beside it', async () => {
    const host = await createTestServer();
    const allocations = fc.sample(status, { numRuns: 5, seed: 30 });
    const socket = await host.serve({
      scheduler: {
        ListAllocNetworks: (_call, callback) => {
          callback(null, { allocations });
        },
      },
    });
    const channel = openChannel(`unix://${socket}`);
    try {
      const full = await channel.unary(ALLOC_NETWORK, 'ListAllocNetworks', {});
      const viewed = await channel.unaryView(rowsView(), {});
      expect(full.allocations).toHaveLength(5);
      expect(full.allocations[0]?.updatedAtUnixMs).toBe(allocations[0]?.updatedAtUnixMs);
      expect(viewed).toEqual(cutDown(full));
    } finally {
      channel.close();
      await host.close();
    }
  });
});
