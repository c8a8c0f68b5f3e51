// Properties of the result decoder (a plugin's stdout, a cached result): for any JSON value it
// returns a result or throws an `invalid-result` `CniError` naming a field of the input, never
// anything else; every result it returns encodes at every version this runtime writes and reads
// back the same.
import fc from 'fast-check';
import { formatPath } from '@allocnet/base';
import { CniError, isCniError } from './errors.js';
import { encodeResult, parseResult } from './result.js';
import type { CniInterface, CniResult } from './result.js';
import { mutateAt, propertyParameters, valueAt } from './testing/properties.js';
import { RESULT_VERSIONS, atLeast } from './version.js';

const SEED = 16_2001;

const cidr = fc.oneof(
  fc.tuple(fc.ipV4(), fc.integer({ min: 0, max: 32 })).map(([ip, n]) => `${ip}/${n}`),
  fc.tuple(fc.ipV6(), fc.integer({ min: 0, max: 128 })).map(([ip, n]) => `${ip}/${n}`),
);
const address = fc.oneof(fc.ipV4(), fc.ipV6());
const word = fc.string({ maxLength: 12 });
const small = fc.integer({ min: 0, max: 70_000 });

const iface = fc.record(
  {
    name: word,
    mac: word,
    sandbox: word,
    mtu: small,
    socketPath: word,
    pciID: word,
  },
  { requiredKeys: ['name'] },
);

/** A result as a plugin at 1.x would print it (every field this runtime knows, in any mix). */
const validResult: fc.Arbitrary<CniResult> = fc
  .tuple(
    fc.constantFrom(...RESULT_VERSIONS),
    fc.array(iface, { maxLength: 4 }),
    fc.array(
      fc.record(
        { address: cidr, gateway: address, interface: fc.nat({ max: 3 }) },
        { requiredKeys: ['address'] },
      ),
      { maxLength: 3 },
    ),
    fc.array(
      fc.record(
        {
          dst: cidr,
          gw: address,
          mtu: small,
          advmss: small,
          priority: small,
          table: small,
          scope: small,
        },
        { requiredKeys: ['dst'] },
      ),
      { maxLength: 3 },
    ),
    fc.record(
      {
        nameservers: fc.array(address, { maxLength: 2 }),
        domain: word,
        search: fc.array(word, { maxLength: 2 }),
        options: fc.array(word, { maxLength: 2 }),
      },
      { requiredKeys: [] },
    ),
  )
  .map(([cniVersion, interfaces, ips, routes, dns]) => ({
    cniVersion,
    interfaces,
    // An index past the interfaces is refused; keep the valid ones valid.
    ips: ips.map((ip) =>
      ip.interface !== undefined && ip.interface >= interfaces.length
        ? { address: ip.address, ...(ip.gateway === undefined ? {} : { gateway: ip.gateway }) }
        : ip,
    ),
    routes,
    dns,
  }));

/** A valid result, encoded, then with one field replaced by any JSON value or taken out. */
const mutatedResult = fc
  .tuple(
    validResult,
    fc.nat(),
    fc.oneof(
      fc.constant('delete' as const),
      fc.jsonValue().map((replace) => ({ replace })),
    ),
  )
  .map(([result, pick, change]) => mutateAt(encodeResult(result, result.cniVersion), pick, change));

/** `ips[0].address` back to `['ips', 0, 'address']` (result fields have no dots or brackets). */
function pathOf(field: string): (string | number)[] {
  return [...field.matchAll(/([^.[\]]+)|\[(\d+)\]/g)].map((m) =>
    m[2] === undefined ? (m[1] as string) : Number(m[2]),
  );
}

/** What survives encoding at `version`: below 1.0.0 an interface keeps its name, mac and sandbox. */
function atVersion(result: CniResult, version: string): CniResult {
  const keep = (i: CniInterface): CniInterface => ({
    name: i.name,
    ...(i.mac === undefined ? {} : { mac: i.mac }),
    ...(i.sandbox === undefined ? {} : { sandbox: i.sandbox }),
  });
  return {
    ...result,
    cniVersion: version,
    interfaces: atLeast(version, '1.0.0') ? result.interfaces : result.interfaces.map(keep),
  };
}

/** Decodes `value`: the result, or the `invalid-result` error checked to name a field `value` has. */
function decodeOrExplain(value: unknown): CniResult | undefined {
  try {
    return parseResult(value, '1.0.0');
  } catch (error) {
    if (!isCniError(error) || error.code !== 'invalid-result') throw error;
    expect(error.kind).toBe('internal');
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      // The result itself is wrong: there is no field to name.
      expect(error.field).toBe('');
      expect(error.message).toMatch(/^is not a JSON object, got /);
      return undefined;
    }
    const path = pathOf(error.field ?? '');
    expect(error.path).toEqual(path);
    expect(path.length).toBeGreaterThan(0);
    expect(formatPath(path)).toBe(error.field);
    expect(error.message.startsWith(`${error.field} `)).toBe(true);
    // The field is in the input, or its parent is and the message says it is missing.
    const here = valueAt(value, path);
    if (!here.found) {
      expect(valueAt(value, path.slice(0, -1)).found).toBe(true);
      expect(error.message).toMatch(/ is missing$/);
    }
    return undefined;
  }
}

describe('parseResult properties', () => {
  it('reads any JSON value as a result or an invalid-result error naming a field of it', () => {
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue(), mutatedResult), (value) => {
        decodeOrExplain(value);
      }),
      propertyParameters(SEED, 400),
    );
  });

  it('gives back every valid result it encodes, at every version it writes', () => {
    fc.assert(
      fc.property(validResult, fc.constantFrom(...RESULT_VERSIONS), (result, version) => {
        const read = parseResult(encodeResult(result, version), '1.0.0');
        expect(read).toEqual(atVersion(result, version));
      }),
      propertyParameters(SEED, 300),
    );
  });

  it('encodes whatever it accepted and reads that back the same', () => {
    fc.assert(
      fc.property(mutatedResult, fc.constantFrom(...RESULT_VERSIONS), (value, version) => {
        const result = decodeOrExplain(value);
        if (result === undefined) return;
        // As prevResult and the cache write it.
        const text = JSON.stringify(encodeResult(result, version));
        expect(parseResult(JSON.parse(text), '1.0.0')).toEqual(atVersion(result, version));
      }),
      propertyParameters(SEED, 300),
    );
  });
});

describe('parseResult examples the properties found', () => {
  const deep = JSON.parse(`${'['.repeat(10_000)}${']'.repeat(10_000)}`) as unknown;

  it.each([
    ['an interface', { interfaces: [{ name: 'eth0', x: deep }] }],
    ['a route', { routes: [{ dst: '0.0.0.0/0', x: deep }] }],
    ['dns', { dns: { x: deep } }],
  ])('drops a field the spec does not have, nested 10,000 deep, in %s', (_, value) => {
    const result = parseResult(value, '1.0.0');
    expect(() => JSON.stringify(encodeResult(result, '1.0.0'))).not.toThrow();
  });

  it.each([5, 'x', true, [], [{ ips: [] }]])(
    'refuses %j as a whole, with no field and a short message',
    (value) => {
      let thrown: unknown;
      try {
        parseResult(value, '1.0.0');
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(CniError);
      expect(thrown).toMatchObject({
        code: 'invalid-result',
        kind: 'internal',
        field: '',
        message: `is not a JSON object, got ${JSON.stringify(value)}`,
      });
    },
  );
});
