// Properties of the network configuration decoder (conf dir files, the agent's embedded network):
// any text or JSON value is a network or an `invalid-config` CniError naming a field the input
// has (or the missing field of an object it has); a network read back from its own `bytes` is the
// same network.
import fc from 'fast-check';
import { isCniError } from './errors.js';
import { parseNetworkConfig, parseNetworkConfigText } from './config.js';
import type { NetworkConfig } from './config.js';
import { mutateAt, propertyParameters, valueAt } from './testing/properties.js';

const SEED = 16_2003;

const name = fc.stringMatching(/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,15}$/);
const version = fc.constantFrom('0.3.1', '0.4.0', '1.0.0', '1.1.0', '10.20.30');
const boolLike = fc.oneof(fc.boolean(), fc.constantFrom('true', 'false', 'TRUE', 'False'));
const pluginType = fc.string({ minLength: 1, maxLength: 12 }).filter((s) => !/[/\0]/.test(s));
/** Fields a plugin keeps untouched (its own configuration). */
const extra = fc.dictionary(
  fc
    .string({ maxLength: 8 })
    .filter((k) => !['type', 'capabilities', 'name', 'cniVersion'].includes(k)),
  fc.jsonValue({ maxDepth: 2 }),
  { maxKeys: 3 },
);
const plugin = fc
  .tuple(
    fc.record(
      {
        type: pluginType,
        capabilities: fc.dictionary(fc.string({ maxLength: 8 }), fc.boolean(), { maxKeys: 3 }),
        name: fc.string({ maxLength: 8 }),
        cniVersion: fc.string({ maxLength: 8 }),
      },
      { requiredKeys: ['type'] },
    ),
    extra,
  )
  .map(([known, rest]) => ({ ...rest, ...known }));

const conflist = fc.record(
  {
    name,
    cniVersion: version,
    cniVersions: fc.array(version, { maxLength: 3 }),
    disableCheck: boolLike,
    disableGC: boolLike,
    plugins: fc.array(plugin, { minLength: 1, maxLength: 4 }),
  },
  { requiredKeys: ['name', 'cniVersion', 'plugins'] },
);
const singleConf = fc
  .tuple(plugin, name, version)
  .map(([p, n, v]) => ({ ...p, name: n, cniVersion: v }));
// As JSON text carries it: a -0 in a plugin's own fields is written back as 0.
const valid = fc.oneof(conflist, singleConf).map((v) => JSON.parse(JSON.stringify(v)) as typeof v);

const change = fc.oneof(
  fc.constant('delete' as const),
  fc.jsonValue({ maxDepth: 2 }).map((replace) => ({ replace })),
);
const mutated = fc.tuple(valid, fc.nat(), change).map(([v, pick, c]) => mutateAt(v, pick, c));

/** Parses `value`; an error must be `invalid-config` naming a field of `value`. */
function parseOrExplain(value: unknown): NetworkConfig | undefined {
  try {
    return parseNetworkConfig(value, '/etc/cni/net.d/x.conflist');
  } catch (error) {
    if (!isCniError(error)) throw error;
    expect(error.code).toBe('invalid-config');
    expect(error.kind).toBe('invalid');
    expect(error.file).toBe('/etc/cni/net.d/x.conflist');
    expect(error.message.startsWith('"/etc/cni/net.d/x.conflist": ')).toBe(true);
    const path = error.path ?? [];
    if (path.length === 0) {
      // Only a value that is not an object is refused as a whole.
      expect(typeof value === 'object' && value !== null && !Array.isArray(value)).toBe(false);
      return undefined;
    }
    expect(error.message).toContain(` ${error.field} `);
    if (!valueAt(value, path).found) {
      expect(valueAt(value, path.slice(0, -1)).found).toBe(true);
      expect(error.msg).toMatch(/ is missing( \(and there is no cniVersions\))?$/);
    }
    return undefined;
  }
}

describe('parseNetworkConfig properties', () => {
  it('reads any JSON value as a network or an invalid-config error naming a field of it', () => {
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue(), mutated), (value) => {
        parseOrExplain(value);
      }),
      propertyParameters(SEED, 500),
    );
  });

  it('reads any text as a network or an invalid-config error', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ unit: 'binary', maxLength: 100 }),
          mutated.map((v) => JSON.stringify(v)),
        ),
        (text) => {
          try {
            parseNetworkConfigText(text);
          } catch (error) {
            if (!isCniError(error)) throw error;
            expect(error.code).toBe('invalid-config');
            expect(error.message.startsWith('network configuration: ')).toBe(true);
          }
        },
      ),
      propertyParameters(SEED, 500),
    );
  });

  it('reads a valid network as given, and the same network back from its bytes', () => {
    fc.assert(
      fc.property(valid, (value) => {
        const network = parseNetworkConfig(value);
        const plugins = 'plugins' in value ? value.plugins : [value];
        expect(network.name).toBe(value.name);
        expect(network.plugins.map((p) => p.raw)).toEqual(plugins);
        expect(network.plugins.map((p) => p.capabilities)).toEqual(
          plugins.map((p) =>
            Object.entries(p.capabilities ?? {})
              .filter(([, on]) => on)
              .map(([k]) => k),
          ),
        );
        const again = parseNetworkConfig(JSON.parse(network.bytes));
        expect(again).toEqual(network);
      }),
      propertyParameters(SEED, 300),
    );
  });
});

describe('parseNetworkConfig examples the properties found', () => {
  const deep = JSON.parse(`${'['.repeat(10_000)}${']'.repeat(10_000)}`) as unknown;

  it.each([
    [
      'a plugin of a list',
      { cniVersion: '1.0.0', name: 'n', plugins: [{ type: 'bridge' }, { type: 'x', deep }] },
      ['plugins', 1, 'deep'],
      'plugins[1].deep',
    ],
    [
      'a list',
      { cniVersion: '1.0.0', name: 'n', plugins: [{ type: 'x' }], deep },
      ['deep'],
      'deep',
    ],
    ['a single plugin', { cniVersion: '1.0.0', name: 'n', type: 'x', deep }, ['deep'], 'deep'],
  ])('refuses a field nested 10,000 deep in %s, naming it', (_, value, path, field) => {
    let error: unknown;
    try {
      parseNetworkConfig(value, 'x.conflist');
    } catch (caught) {
      error = caught;
    }
    expect(isCniError(error)).toBe(true);
    expect(error).toMatchObject({ code: 'invalid-config', path });
    expect((error as Error).message).toBe(
      `"x.conflist": ${field} is nested too deep to be written as JSON`,
    );
  });
});
