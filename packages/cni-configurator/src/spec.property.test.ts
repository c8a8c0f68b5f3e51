// Properties of the allocation spec decoder (the configurator's edge; the runner and the agent
// decode through it): any value is a valid spec or an `invalid-argument` ConfiguratorError naming
// a field of the value (or the missing field of an object it has); a valid spec decodes to itself,
// also after a trip through JSON (how the runner's records and the CNI server carry it).
import fc from 'fast-check';
import { mutateAt, propertyParameters, valueAt } from '@allocnet/cni/testing';
import { isConfiguratorError } from './errors.js';
import { MAX_CNI_ARGS, RESERVED_ARG_KEYS, checkAllocId, decodeSpec } from './spec.js';
import type { AllocNetworkSpec } from './types.js';

const SEED = 16_2007;

const allocId = fc.stringMatching(/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$/);
/** What CNI_ARGS can carry: no ";", "=" or NUL. */
const argText = (minLength: number) =>
  fc.string({ minLength, maxLength: 20 }).filter((s) => !/[;=\0]/.test(s));
const label = fc.string({ minLength: 1, maxLength: 20 }).filter((s) => !/\p{Cc}/u.test(s));
const hostIp = fc.oneof(fc.constant(''), fc.ipV4(), fc.ipV6());
const port = fc.record(
  {
    label,
    value: fc.integer({ min: 1, max: 65535 }),
    to: fc.integer({ min: -1, max: 65535 }),
    hostIp,
    protocol: fc.constantFrom('tcp' as const, 'udp' as const),
  },
  { requiredKeys: ['label', 'value'] },
);
const legacyPort = fc.record(
  { label, value: fc.integer({ min: 1, max: 65535 }), to: fc.integer({ min: -1, max: 65535 }) },
  { requiredKeys: ['label', 'value'] },
);

const validSpec: fc.Arbitrary<AllocNetworkSpec> = fc.record(
  {
    allocId,
    namespace: argText(1),
    jobId: argText(1),
    groupName: argText(1),
    region: argText(0),
    network: fc.oneof(fc.constant(''), fc.stringMatching(/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,15}$/)),
    ports: fc.array(port, { maxLength: 4 }),
    legacyNetworks: fc.array(
      fc.record(
        {
          reservedPorts: fc.array(legacyPort, { maxLength: 2 }),
          dynamicPorts: fc.array(legacyPort, { maxLength: 2 }),
        },
        { requiredKeys: [] },
      ),
      { maxLength: 2 },
    ),
    cniArgs: fc.dictionary(
      argText(1).filter((k) => !RESERVED_ARG_KEYS.includes(k)),
      argText(0),
      { maxKeys: 4 },
    ),
    ifName: fc.stringMatching(/^[A-Za-z0-9_.-]{1,15}$/).filter((s) => s !== '.' && s !== '..'),
    ips: fc.array(
      fc.oneof(
        fc.ipV4(),
        fc.ipV6(),
        fc.tuple(fc.ipV4(), fc.integer({ min: 0, max: 32 })).map(([a, p]) => `${a}/${p}`),
        fc.tuple(fc.ipV6(), fc.integer({ min: 0, max: 128 })).map(([a, p]) => `${a}/${p}`),
      ),
      { maxLength: 3 },
    ),
    mac: fc
      .tuple(
        fc.integer({ min: 0, max: 127 }),
        fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 5, maxLength: 5 }),
      )
      .map(([first, rest]) =>
        [first * 2, ...rest].map((b) => b.toString(16).padStart(2, '0')).join(':'),
      ),
    defaultRoute: fc.boolean(),
  },
  { requiredKeys: ['allocId', 'namespace', 'jobId', 'groupName'] },
);

const change = fc.oneof(
  fc.constant('delete' as const),
  fc.jsonValue({ maxDepth: 2 }).map((replace) => ({ replace })),
  // Values near a limit: long text, a big list, a control character, a port out of range.
  fc
    .constantFrom(
      'x'.repeat(300),
      ';',
      '\u0007',
      65536,
      0,
      -2,
      1.5,
      Array(MAX_CNI_ARGS + 1).fill(1),
    )
    .map((replace) => ({ replace })),
);
const mutatedSpec = fc
  .tuple(validSpec, fc.nat(), change)
  .map(([spec, pick, c]) => mutateAt(spec, pick, c));

describe('decodeSpec properties', () => {
  it('reads any value as a spec or an invalid-argument error naming a field of it', () => {
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue(), mutatedSpec), (value) => {
        try {
          decodeSpec(value);
        } catch (error) {
          if (!isConfiguratorError(error)) throw error;
          expect(error.code).toBe('invalid-argument');
          expect(error.kind).toBe('invalid');
          const path = error.path ?? [];
          expect(error.message.startsWith(`${error.field} `)).toBe(true);
          if (path.length === 0) {
            expect(typeof value === 'object' && value !== null && !Array.isArray(value)).toBe(
              false,
            );
            return;
          }
          if (!valueAt(value, path).found) {
            expect(valueAt(value, path.slice(0, -1)).found).toBe(true);
            expect(error.message).toMatch(/ is missing$/);
          }
        }
      }),
      propertyParameters(SEED, 500),
    );
  });

  it('decodes a valid spec to itself, also after a trip through JSON', () => {
    fc.assert(
      fc.property(validSpec, (spec) => {
        const decoded = decodeSpec(spec);
        expect(decoded).toEqual(spec);
        expect(decodeSpec(JSON.parse(JSON.stringify(decoded)))).toEqual(decoded);
      }),
      propertyParameters(SEED, 300),
    );
  });

  it('reads any value as an allocation id or an error naming the field it was given', () => {
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue(), allocId, fc.string()), (value) => {
        try {
          expect(checkAllocId(value, 'alloc_id')).toBe(value);
        } catch (error) {
          if (!isConfiguratorError(error)) throw error;
          expect(error.kind).toBe('invalid');
          expect(error.path).toEqual(['alloc_id']);
        }
      }),
      propertyParameters(SEED, 300),
    );
  });
});

describe('decodeSpec examples the properties found', () => {
  const valid = { allocId: 'a1', namespace: 'default', jobId: 'web', groupName: 'g' };

  it.each([
    ['ports[0].value is missing', { ...valid, ports: [{ label: 'http' }] }],
    [
      'legacyNetworks[0].dynamicPorts[0].value is missing',
      { ...valid, legacyNetworks: [{ dynamicPorts: [{ label: 'd' }] }] },
    ],
  ])('says %s (not "should be a port number …, got undefined")', (message, value) => {
    expect(() => decodeSpec(value)).toThrow(new Error(message));
  });
});
