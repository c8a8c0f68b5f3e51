// Properties of the gRPC front door's decoding, from the bytes on the wire to the runner's spec:
// whatever bytes or message a client sends, each method's decoder answers a value or an error of
// kind `invalid` (INVALID_ARGUMENT) naming a field of the request — never another error, never a
// throw from the deserializer; a valid SetupAllocNetworkRequest survives the wire and becomes
// exactly the spec it describes.
import fc from 'fast-check';
import * as grpc from '@grpc/grpc-js';
import { kindOf } from '@allocnet/base';
import { mutateAt, propertyParameters, valueAt } from '@allocnet/cni/testing';
import type { NetworkCatalog } from '@allocnet/cni-configurator';
import { loadAllocnetProto } from '@allocnet/proto';
import type { SetupAllocNetworkRequest, SetupAllocNetworkRequest__Output } from '@allocnet/proto';
import { requestOf, tolerantService } from './call.js';
import {
  decodeCheckRequest,
  decodeEmptyRequest,
  decodeForceCleanupRequest,
  decodeGetRequest,
  decodeReapRequest,
  decodeSetupRequest,
  decodeTeardownRequest,
} from './requests.js';
import { grpcFailure } from './status.js';

const SEED = 16_2009;

const catalog: NetworkCatalog = {
  networks: [
    { name: 'nomad', source: 'default', plugins: ['bridge'] },
    { name: 'ptp-net', source: '/etc/cni/net.d/20-ptp.conflist', plugins: ['ptp'] },
  ],
  invalid: [],
};
const context = {
  catalog: () => catalog,
  reload: () => Promise.resolve(catalog),
  ignoreHostIps: false,
};

/** Each method's decoder, as its handler calls it (alloc-handlers.ts, service.ts). */
const DECODERS: Readonly<Record<string, (request: never) => unknown>> = {
  SetupAllocNetwork: (r: SetupAllocNetworkRequest__Output) => decodeSetupRequest(r, context),
  TeardownAllocNetwork: decodeTeardownRequest,
  GetAllocNetwork: decodeGetRequest,
  ListAllocNetworks: decodeEmptyRequest,
  CheckAllocNetwork: decodeCheckRequest,
  ForceCleanup: decodeForceCleanupRequest,
  ListLeaks: decodeEmptyRequest,
  ReapLeaks: decodeReapRequest,
  ReloadConfig: decodeEmptyRequest,
  GetAgentInfo: decodeEmptyRequest,
};

const proto = loadAllocnetProto().allocnet.v1;
const methods: Record<string, grpc.MethodDefinition<unknown, unknown>> = {
  ...(tolerantService(proto.AllocNetworkService.service) as Record<
    string,
    grpc.MethodDefinition<unknown, unknown>
  >),
  ...(tolerantService(proto.OperatorService.service) as Record<
    string,
    grpc.MethodDefinition<unknown, unknown>
  >),
};

/** What the front door answers for `request`: the decoded value, or the failure it maps to. */
async function answer(
  method: string,
  request: unknown,
): Promise<{ ok: true } | { ok: false; error: unknown }> {
  const decoder = DECODERS[method] as (request: unknown) => unknown;
  try {
    await decoder(requestOf(request));
    return { ok: true };
  } catch (error) {
    // Only bad input, named: every such error is INVALID_ARGUMENT with the field.
    expect(kindOf(error)).toBe('invalid');
    const failure = grpcFailure(error, undefined);
    expect(failure.code).toBe(grpc.status.INVALID_ARGUMENT);
    // `<field> <problem>`, the field in the .proto's spelling (status.ts).
    expect(failure.details).toMatch(/^\S+ \S/);
    return { ok: false, error };
  }
}

/**
 * The request's field an error's path names: a spec's path (`['spec', 'legacyNetworks', 0]` →
 * `['networks', 0]`), or a path already in the .proto's spelling (`alloc_id`, from `checkAllocId`).
 */
function requestPath(path: readonly (string | number)[]): (string | number)[] {
  const inner = path[0] === 'spec' ? path.slice(1) : [...path];
  return inner.map((segment, i) =>
    i === 0 && segment === 'legacyNetworks'
      ? 'networks'
      : i === 0 && typeof segment === 'string'
        ? segment.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase())
        : segment,
  );
}

// ---- valid requests ---------------------------------------------------------------------------

const argText = (minLength: number) =>
  fc.string({ minLength, maxLength: 16 }).filter((s) => !/[;=\0]/.test(s));
const label = fc.constantFrom('http', 'dns', 'p/1');
const port = fc.record({
  label,
  value: fc.integer({ min: 1, max: 65535 }),
  to: fc.integer({ min: -1, max: 65535 }),
  hostIp: fc.oneof(fc.constant(''), fc.ipV4(), fc.ipV6()),
});
const legacyPort = fc.record({
  label,
  value: fc.integer({ min: 1, max: 65535 }),
  to: fc.integer({ min: -1, max: 65535 }),
});

/** A request as a scheduler sends it: every field set or left at its default, host ports unique. */
const validSetup: fc.Arbitrary<SetupAllocNetworkRequest__Output> = fc.record({
  allocId: fc.stringMatching(/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$/),
  region: argText(0),
  namespace: argText(1),
  jobId: argText(1),
  groupName: argText(1),
  network: fc.constantFrom('', 'nomad', 'ptp-net'),
  ports: fc.uniqueArray(port, { selector: (p) => p.value, maxLength: 4 }),
  networks: fc.array(
    fc.record({
      reservedPorts: fc.uniqueArray(legacyPort, { selector: (p) => p.value, maxLength: 2 }),
      dynamicPorts: fc.constant([]),
    }),
    { maxLength: 1 },
  ),
  cniArgs: fc.dictionary(
    argText(1).filter((k) => !k.startsWith('NOMAD_') && k !== 'IgnoreUnknown'),
    argText(0),
    { maxKeys: 3 },
  ),
  netnsPath: fc.constantFrom('', '/run/netns/x', '/proc/1/ns/net'),
  attachments: fc.constant([]),
});

/** The spec a valid request describes: the proto defaults (empty, 0) left out. */
function specOf(r: SetupAllocNetworkRequest__Output): Record<string, unknown> {
  const port = (p: { label: string; value: number; to: number; hostIp?: string }) => ({
    label: p.label,
    value: p.value,
    ...(p.to === 0 ? {} : { to: p.to }),
    ...(p.hostIp === undefined || p.hostIp === '' ? {} : { hostIp: p.hostIp }),
  });
  return {
    allocId: r.allocId,
    namespace: r.namespace,
    jobId: r.jobId,
    groupName: r.groupName,
    ...(r.region === '' ? {} : { region: r.region }),
    ...(r.network === '' ? {} : { network: r.network }),
    ...(r.ports.length === 0 ? {} : { ports: r.ports.map(port) }),
    ...(r.networks.length === 0
      ? {}
      : {
          legacyNetworks: r.networks.map((n) =>
            n.reservedPorts.length === 0 ? {} : { reservedPorts: n.reservedPorts.map(port) },
          ),
        }),
    ...(Object.keys(r.cniArgs).length === 0 ? {} : { cniArgs: r.cniArgs }),
    ...(r.netnsPath === '' ? {} : { netnsPath: r.netnsPath }),
  };
}

const validOther: Record<string, fc.Arbitrary<Record<string, unknown>>> = {
  TeardownAllocNetwork: fc.record({ allocId: fc.stringMatching(/^[a-z0-9]{1,8}$/) }),
  ForceCleanup: fc.record({
    allocId: fc.constant('a1'),
    network: fc.constantFrom('', 'nomad'),
    dryRun: fc.boolean(),
  }),
  ReapLeaks: fc.record({ batchSize: fc.nat({ max: 20_000 }), dryRun: fc.boolean() }),
  ListLeaks: fc.constant({}),
};

const change = fc.oneof(
  fc.constant('delete' as const),
  fc.jsonValue({ maxDepth: 2 }).map((replace) => ({ replace })),
  fc
    .constantFrom('', 'x'.repeat(300), 'a;b', -1, 0, 1.5, 70_000, '/a/../b', '\u0000')
    .map((replace) => ({ replace })),
);

describe('gRPC request properties', () => {
  it('answers any bytes, for every method, with a request or INVALID_ARGUMENT', async () => {
    const names = Object.keys(DECODERS);
    // Bytes: random, or a valid message with some bytes changed.
    const bytes = fc.oneof(
      fc.uint8Array({ maxLength: 200 }),
      fc
        .tuple(
          validSetup,
          fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), {
            minLength: 1,
            maxLength: 4,
          }),
        )
        .map(([request, flips]) => {
          const buf = Buffer.from(
            methods.SetupAllocNetwork?.requestSerialize(
              request as SetupAllocNetworkRequest,
            ) as Buffer,
          );
          for (const [at, value] of flips) if (buf.length > 0) buf[at % buf.length] = value;
          return new Uint8Array(buf);
        }),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...names), bytes, async (method, raw) => {
        const definition = methods[method] as grpc.MethodDefinition<unknown, unknown>;
        const request = definition.requestDeserialize(Buffer.from(raw));
        await answer(method, request);
      }),
      propertyParameters(SEED, 600),
    );
  }, 60_000);

  it('answers any message object with a request or INVALID_ARGUMENT naming a field it has', async () => {
    const candidates = fc.oneof(
      fc.tuple(fc.constant('SetupAllocNetwork'), fc.jsonValue()),
      fc
        .tuple(validSetup, fc.nat(), change)
        .map(([r, pick, c]) => ['SetupAllocNetwork', mutateAt(r, pick, c)] as const),
      ...Object.entries(validOther).map(([method, valid]) =>
        fc
          .tuple(valid, fc.nat(), change)
          .map(([r, pick, c]) => [method, mutateAt(r, pick, c)] as const),
      ),
    );
    await fc.assert(
      fc.asyncProperty(candidates, async ([method, request]) => {
        const result = await answer(method, request);
        if (result.ok) return;
        const path = requestPath((result.error as { path: readonly (string | number)[] }).path);
        if (path.length === 0 || (path.length === 1 && path[0] === 'request')) {
          // The request as a whole: only when it is not an object.
          expect(typeof request === 'object' && request !== null && !Array.isArray(request)).toBe(
            false,
          );
          return;
        }
        if (!valueAt(request, path).found) {
          expect(valueAt(request, path.slice(0, -1)).found).toBe(true);
          expect((result.error as Error).message).toMatch(/ (is missing|got nothing)$/);
        }
      }),
      propertyParameters(SEED, 600),
    );
  }, 60_000);

  it('turns a valid setup request, through the wire, into exactly the spec it describes', async () => {
    const setup = methods.SetupAllocNetwork as grpc.MethodDefinition<unknown, unknown>;
    await fc.assert(
      fc.asyncProperty(validSetup, async (request) => {
        const wire = setup.requestSerialize(request);
        const received = requestOf(
          setup.requestDeserialize(wire),
        ) as SetupAllocNetworkRequest__Output;
        expect(received).toEqual(request);
        expect(await decodeSetupRequest(received, context)).toEqual(specOf(request));
      }),
      propertyParameters(SEED, 300),
    );
  }, 60_000);
});
