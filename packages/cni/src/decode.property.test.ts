// Properties of `decode`, which every io-ts decoder at an edge goes through (conflists, results,
// the cache, the agent's requests and config, the runner's records): whatever value it is given —
// a bigint, a function, a symbol, a cycle (a YAML alias that contains itself) — it answers a value
// or a problem naming the field, and never throws while writing that problem.
import fc from 'fast-check';
import * as t from 'io-ts';
import { decode } from './decode.js';
import { propertyParameters, valueAt } from './testing/properties.js';

const SEED = 16_2004;

const codec = t.type({
  name: t.string,
  ports: t.array(t.type({ value: t.number, tags: t.record(t.string, t.boolean) })),
  flag: t.union([t.boolean, t.null]),
});

/** Values no JSON text makes, which other decoders (YAML, msgpack) can. */
const odd = fc.oneof(
  fc.bigInt(),
  fc.constant(() => 1),
  fc.constant(Symbol('s')),
  fc.constant(new Date(0)),
  fc.constant(new Map([['a', 1]])),
  fc.constant(Buffer.from('abc')),
  fc.constant(undefined),
);

/** An object shaped like `codec`'s input with one field set to `value`, possibly a cycle. */
const shaped = fc
  .tuple(
    fc.constantFrom('name', 'ports', 'value', 'tags', 'flag', 'cycle'),
    fc.oneof(odd, fc.anything()),
  )
  .map(([where, value]) => {
    const input: Record<string, unknown> = {
      name: 'a',
      ports: [{ value: 1, tags: {} }],
      flag: null,
    };
    const port = (input.ports as Record<string, unknown>[])[0] as Record<string, unknown>;
    if (where === 'value' || where === 'tags') port[where] = value;
    else if (where === 'cycle') port.value = [input];
    else input[where] = value;
    return input;
  });

describe('decode properties', () => {
  it('answers any value with the value or a problem, never an exception', () => {
    fc.assert(
      fc.property(
        fc.oneof(odd, fc.anything({ withBigInt: true, withMap: true, withSet: true }), shaped),
        (value) => {
          const decoded = decode(codec, value);
          if (decoded.ok) return;
          expect(decoded.problem.problem).not.toBe('');
          // The path leads into the value, or to a field missing from an object it has.
          const { path } = decoded.problem;
          if (path.length > 0 && !valueAt(value, path).found)
            expect(valueAt(value, path.slice(0, -1)).found).toBe(true);
        },
      ),
      propertyParameters(SEED, 500),
    );
  });
});

describe('decode examples the properties found', () => {
  const cycle: unknown[] = [];
  cycle.push(cycle);
  it.each<[string, unknown, string]>([
    ['a bigint', 10n, 'should be string, got 10n'],
    ['a function', () => 1, 'should be string, got <function>'],
    ['a symbol', Symbol('s'), 'should be string, got <symbol>'],
    [
      'a list nested 10,000 deep',
      JSON.parse(`${'['.repeat(10_000)}${']'.repeat(10_000)}`),
      'should be string, got <a list too deep or cyclic to write>',
    ],
    ['a cycle', cycle, 'should be string, got <a list too deep or cyclic to write>'],
  ])('names %s in the problem', (_, value, problem) => {
    expect(decode(t.type({ name: t.string }), { name: value })).toEqual({
      ok: false,
      problem: { path: ['name'], field: 'name', problem },
    });
  });
});
