// Properties of the runner's spec decoder (what the agent's gRPC and CNI front doors and the
// store's records go through): any value is a spec or an `invalid-argument` RunnerError naming,
// under `spec`, a field of the value; a valid spec reads back the same after a trip through JSON,
// and its canonical form is stable. The record codec (record.ts), which holds a spec, likewise:
// any stored value is a record or a problem naming a field, and a record reads back as written.
import fc from 'fast-check';
import { decode } from '@allocnet/cni';
import { mutateAt, propertyParameters, valueAt } from '@allocnet/cni/testing';
import { isRunnerError } from './errors.js';
import { recordCodec } from './record.js';
import { canonicalSpec, specDifferences } from './canonical.js';
import { checkAllocId, decodeSpec } from './spec.js';
import type { RunnerSpec } from './spec.js';

const SEED = 16_2008;

const name = fc.stringMatching(/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,20}$/);
const argText = fc.string({ minLength: 1, maxLength: 16 }).filter((s) => !/[;=\0]/.test(s));
const port = fc.record(
  {
    label: fc.constantFrom('http', 'dns', 'tcp/80'),
    value: fc.integer({ min: 1, max: 65535 }),
    to: fc.integer({ min: -1, max: 65535 }),
    hostIp: fc.oneof(fc.constant(''), fc.ipV4(), fc.ipV6()),
    protocol: fc.constantFrom('tcp' as const, 'udp' as const),
  },
  { requiredKeys: ['label', 'value'] },
);
/** A clean absolute path that `tidyPath` leaves as it is (no `.` or `..` segment either). */
const netnsPath = fc
  .array(fc.stringMatching(/^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,8}$/), { minLength: 1, maxLength: 4 })
  .map((parts) => `/${parts.join('/')}`);
const originText = (max: number) => fc.stringMatching(new RegExp(`^[A-Za-z0-9_.-]{1,${max}}$`));

const validSpec: fc.Arbitrary<RunnerSpec> = fc.record(
  {
    allocId: name,
    namespace: argText,
    jobId: argText,
    groupName: argText,
    region: argText,
    network: name,
    ports: fc.array(port, { maxLength: 3 }),
    legacyNetworks: fc.array(
      fc.record({
        reservedPorts: fc.array(
          port.map(({ label, value }) => ({ label, value })),
          { maxLength: 2 },
        ),
      }),
      { maxLength: 2 },
    ),
    cniArgs: fc.dictionary(
      argText.filter((k) => !k.startsWith('NOMAD_') && k !== 'IgnoreUnknown'),
      fc.string({ maxLength: 8 }).filter((s) => !/[;=\0]/.test(s)),
      { maxKeys: 3 },
    ),
    ifName: fc.constantFrom('eth0', 'eth1', 'net0'),
    netnsPath,
    interruptedSetup: fc.constantFrom('fail' as const, 'finish' as const),
    origin: fc.record({
      runtime: originText(32),
      containerId: originText(64),
      ifName: originText(15),
    }),
  },
  { requiredKeys: ['allocId', 'namespace', 'jobId', 'groupName'] },
);

const change = fc.oneof(
  fc.constant('delete' as const),
  fc.jsonValue({ maxDepth: 2 }).map((replace) => ({ replace })),
  fc.constantFrom('/a/../b', 'x'.repeat(300), '', 'a b').map((replace) => ({ replace })),
);
/** A valid spec with one field replaced or taken out, or one unknown field added. */
const mutatedSpec = fc.oneof(
  fc.tuple(validSpec, fc.nat(), change).map(([spec, pick, c]) => mutateAt(spec, pick, c)),
  fc
    .tuple(validSpec, fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 1 }))
    .map(([spec, key, value]) => ({ ...spec, [key]: value })),
);

/** Checks a refusal: `invalid-argument`, naming under `spec` a field `value` has (or misses). */
function checkRefusal(error: unknown, value: unknown, context: string): void {
  if (!isRunnerError(error)) throw error;
  expect(error.code).toBe('invalid-argument');
  expect(error.kind).toBe('invalid');
  const path = error.path ?? [];
  expect(path[0]).toBe('spec');
  expect(error.message.startsWith(`${context}: ${error.field} `)).toBe(true);
  const inner = path.slice(1);
  if (inner.length === 0) {
    expect(typeof value === 'object' && value !== null && !Array.isArray(value)).toBe(false);
    return;
  }
  if (!valueAt(value, inner).found) {
    expect(valueAt(value, inner.slice(0, -1)).found).toBe(true);
    expect(error.message).toMatch(/ is missing$/);
  }
}

/**
 * A valid spec in the list form: distinct networks and interfaces, the spec's ports on the first
 * attachment only, another port range on one secondary, at most one default route.
 */
const attachedSpec: fc.Arbitrary<RunnerSpec> = fc
  .tuple(
    // The list form leaves the spec's own network and interface out.
    validSpec.map((spec) => {
      const rest: { -readonly [K in keyof RunnerSpec]?: RunnerSpec[K] } = { ...spec };
      delete rest.network;
      delete rest.ifName;
      return rest as RunnerSpec;
    }),
    fc.uniqueArray(name, { minLength: 1, maxLength: 4 }),
    fc.boolean(),
    fc.nat(3),
    fc.array(fc.ipV4(), { maxLength: 2 }),
  )
  .map(([spec, networks, named, route, ips]) => ({
    ...spec,
    attachments: networks.map((network, k) => ({
      network,
      ...(named ? { ifName: `if${k}` } : {}),
      ...(k === 1 ? { ports: [{ label: 'extra', value: 40000 + k }], ips } : {}),
      ...(k === route ? { defaultRoute: true } : {}),
    })),
    // No port of the first may be the secondary's.
    ports: (spec.ports ?? []).filter((p) => p.value !== 40001),
    legacyNetworks: (spec.legacyNetworks ?? []).map((n) => ({
      reservedPorts: (n.reservedPorts ?? []).filter((p) => p.value !== 40001),
    })),
  }));

describe('decodeSpec properties', () => {
  it('decodes a valid spec with attachments to itself, with one canonical form', () => {
    fc.assert(
      fc.property(attachedSpec, (spec) => {
        const decoded = decodeSpec(spec);
        expect(decoded).toEqual(spec);
        const again = decodeSpec(JSON.parse(JSON.stringify(decoded)));
        expect(specDifferences(decoded, again)).toEqual([]);
        expect(canonicalSpec(decodeSpec(canonicalSpec(decoded)))).toEqual(canonicalSpec(decoded));
      }),
      propertyParameters(SEED, 200),
    );
  });

  it('reads any change of a spec with attachments as a spec or an error naming a field of it', () => {
    fc.assert(
      fc.property(attachedSpec, fc.nat(), change, (spec, pick, c) => {
        const value = mutateAt(spec, pick, c);
        try {
          decodeSpec(value);
        } catch (error) {
          checkRefusal(error, value, 'invalid allocation spec');
        }
      }),
      propertyParameters(SEED, 400),
    );
  });

  it('reads any value as a spec or an invalid-argument error naming a field of it', () => {
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue(), mutatedSpec), (value) => {
        try {
          decodeSpec(value);
        } catch (error) {
          checkRefusal(error, value, 'invalid allocation spec');
        }
      }),
      propertyParameters(SEED, 500),
    );
  });

  it('decodes a valid spec to itself, after a trip through JSON too, with one canonical form', () => {
    fc.assert(
      fc.property(validSpec, (spec) => {
        const decoded = decodeSpec(spec);
        expect(decoded).toEqual(spec);
        const again = decodeSpec(JSON.parse(JSON.stringify(decoded)));
        expect(again).toEqual(decoded);
        expect(specDifferences(decoded, again)).toEqual([]);
        expect(canonicalSpec(decodeSpec(canonicalSpec(decoded)))).toEqual(canonicalSpec(decoded));
      }),
      propertyParameters(SEED, 300),
    );
  });

  it('reads any value as an allocation id or an error naming the field it was given', () => {
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue(), name, fc.string()), (value) => {
        try {
          expect(checkAllocId(value, 'alloc_id')).toBe(value);
        } catch (error) {
          if (!isRunnerError(error)) throw error;
          expect(error.kind).toBe('invalid');
          expect(error.path).toEqual(['alloc_id']);
        }
      }),
      propertyParameters(SEED, 300),
    );
  });
});

const validRecord = fc
  .tuple(
    validSpec,
    fc.constantFrom(
      'setting-up' as const,
      'ready' as const,
      'tearing-down' as const,
      'failed' as const,
    ),
    fc.boolean(),
    fc.nat(),
    fc.option(fc.string({ maxLength: 20 }), { nil: undefined }),
  )
  .map(([spec, phase, netnsCreated, updatedAtMs, error]) => ({
    schema: 1,
    allocId: spec.allocId,
    spec,
    phase,
    netnsPath: spec.netnsPath ?? `/run/netns/an-${spec.allocId}`,
    netnsCreated,
    ...(phase === 'ready'
      ? {
          attachment: {
            allocId: spec.allocId,
            netns: '/run/netns/x',
            ifName: 'eth0',
            network: { name: 'nomad', config: '{}' },
          },
          status: { allocId: spec.allocId, address: '172.26.64.2', addressIpv6: '' },
        }
      : {}),
    ...(error === undefined ? {} : { error }),
    ...(phase === 'ready' && netnsCreated
      ? {
          extra: [
            {
              spec: {
                allocId: spec.allocId,
                namespace: 'n',
                jobId: 'j',
                groupName: 'g',
                ifName: 'net1',
              },
              phase: 'ready' as const,
              attached: error !== undefined,
              attachment: {
                allocId: spec.allocId,
                netns: '/run/netns/x',
                ifName: 'net1',
                network: { name: 'storage', config: '{}' },
              },
              status: { allocId: spec.allocId, address: '10.9.0.2', addressIpv6: '' },
            },
          ],
        }
      : {}),
    updatedAtMs,
  }));

/** What the store does with each record it reads (store.ts): the codec, then the spec's decoder. */
function readRecord(value: unknown): { ok: true; spec: RunnerSpec } | { ok: false } {
  const decoded = decode(recordCodec, value);
  if (!decoded.ok) {
    expect(decoded.problem.problem).not.toBe('');
    const { path } = decoded.problem;
    if (path.length > 0 && !valueAt(value, path).found)
      expect(valueAt(value, path.slice(0, -1)).found).toBe(true);
    return { ok: false };
  }
  try {
    return { ok: true, spec: decodeSpec(decoded.value.spec) };
  } catch (error) {
    checkRefusal(error, decoded.value.spec, 'invalid allocation spec');
    return { ok: false };
  }
}

describe('record codec properties', () => {
  it('reads any stored value as a record or a problem naming a field of it', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.jsonValue(),
          fc.tuple(validRecord, fc.nat(), change).map(([r, pick, c]) => mutateAt(r, pick, c)),
        ),
        (value) => {
          readRecord(value);
        },
      ),
      propertyParameters(SEED, 500),
    );
  });

  it('reads back every record it writes, after a trip through JSON or a structured clone', () => {
    fc.assert(
      fc.property(validRecord, fc.boolean(), (record, json) => {
        const stored: unknown = json ? JSON.parse(JSON.stringify(record)) : structuredClone(record);
        expect(decode(recordCodec, stored)).toEqual({ ok: true, value: record });
        expect(readRecord(stored)).toEqual({ ok: true, spec: record.spec });
      }),
      propertyParameters(SEED, 300),
    );
  });
});

describe('canonicalSpec examples the properties found', () => {
  it('keeps a CNI arg named "__proto__" (JSON.parse makes it an own field)', () => {
    const spec = decodeSpec(
      JSON.parse(
        '{"allocId":"a1","namespace":"n","jobId":"j","groupName":"g","cniArgs":{"__proto__":"x"}}',
      ),
    );
    expect(Object.keys(canonicalSpec(spec).cniArgs ?? {})).toEqual(['__proto__']);
    expect(specDifferences(spec, decodeSpec({ ...spec, cniArgs: {} }))).toEqual(['cniArgs']);
  });
});
