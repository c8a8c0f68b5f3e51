// Small io-ts codecs whose failures read as `<field> <problem>` through `decode` (decode.ts),
// which names the path: CNI configs, the agent's config keys and requests, the runner's spec.
import * as t from 'io-ts';
import { show } from '@allocnet/base';

/** What a check found wrong with a value (a class, so a string value is never taken for one). */
export class Problem {
  constructor(readonly message: string) {}
}

export function problem(message: string): Problem {
  return new Problem(message);
}

/** A codec from a check that returns the (possibly normalized) value or a `problem(…)`. */
export function failWith<A>(name: string, check: (u: unknown) => A | Problem): t.Type<A, unknown> {
  return new t.Type<A, unknown, unknown>(
    name,
    (u): u is A => !(check(u) instanceof Problem),
    (u, c) => {
      if (u === undefined) return t.failure(u, c, 'is missing');
      const result = check(u);
      return result instanceof Problem ? t.failure(u, c, result.message) : t.success(result);
    },
    t.identity,
  );
}

export const Text = failWith('Text', (u) =>
  typeof u === 'string' ? u : problem(`should be a string, got ${show(u)}`),
);

export const Bool = failWith('Bool', (u) =>
  typeof u === 'boolean' ? u : problem(`should be true or false, got ${show(u)}`),
);

export function whole(name: string, min: number, max: number, unit = '') {
  return failWith(name, (u) =>
    typeof u === 'number' && Number.isInteger(u) && u >= min && u <= max
      ? u
      : problem(`should be a whole number${unit} from ${min} to ${max}, got ${show(u)}`),
  );
}

export function oneOf<K extends string>(name: string, values: readonly K[]) {
  return failWith<K>(name, (u) =>
    typeof u === 'string' && (values as readonly string[]).includes(u)
      ? (u as K)
      : problem(`should be one of ${values.map((v) => `"${v}"`).join(', ')}, got ${show(u)}`),
  );
}

export interface ListOptions {
  readonly max: number;
  /** What the entries are called in the message: `has 1025 ports; at most 1024`. Default `entries`. */
  readonly what?: string;
  /** Default false: an empty list is refused. */
  readonly allowEmpty?: boolean;
}

/** A list of at most `max` entries, each decoded by `item` (its index in the path). */
export function list<A>(name: string, item: t.Type<A, unknown>, options: ListOptions) {
  const { max, what = 'entries', allowEmpty = false } = options;
  return new t.Type<A[], unknown, unknown>(
    name,
    (u): u is A[] => Array.isArray(u) && u.every(item.is),
    (u, c) => {
      if (!Array.isArray(u)) return t.failure(u, c, `should be a list, got ${show(u)}`);
      if (u.length === 0 && !allowEmpty) return t.failure(u, c, 'is an empty list');
      if (u.length > max) return t.failure(u, c, `has ${u.length} ${what}; at most ${max}`);
      const out: A[] = [];
      for (const [i, v] of u.entries()) {
        const r = item.validate(v, [...c, { key: String(i), type: item, actual: v }]);
        if (r._tag === 'Left') return r;
        out.push(r.right);
      }
      return t.success(out);
    },
    t.identity,
  );
}

// The context entry for an unknown key needs a type; any will do (decode reads only its name).
const unknownKey = t.unknown;

export type Section<P extends Record<string, t.Mixed>> = {
  readonly [K in keyof P]?: t.TypeOf<P[K]>;
};

/**
 * An object whose keys are all optional and all known: an unknown key is refused, naming it (a
 * misspelt key would otherwise be ignored in silence).
 */
export function section<P extends Record<string, t.Mixed>>(
  name: string,
  props: P,
): t.Type<Section<P>, unknown> {
  const known = Object.keys(props);
  return new t.Type<Section<P>, unknown, unknown>(
    name,
    (u): u is Section<P> => typeof u === 'object' && u !== null && !Array.isArray(u),
    (u, c) => {
      if (typeof u !== 'object' || u === null || Array.isArray(u))
        return t.failure(u, c, `should be a map of keys, got ${show(u)}`);
      const out: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(u as Record<string, unknown>)) {
        // Own keys only: `toString` or `__proto__` in a config file is an unknown key, not the
        // prototype's method.
        const codec = Object.prototype.hasOwnProperty.call(props, key) ? props[key] : undefined;
        const at = [...c, { key, type: codec ?? unknownKey, actual: value }];
        if (codec === undefined)
          return t.failure(value, at, `is not a known key (known: ${known.join(', ')})`);
        // An explicit null in YAML (`tcp:` with nothing under it) means "not set".
        if (value === null || value === undefined) continue;
        const r = codec.validate(value, at);
        if (r._tag === 'Left') return r;
        out[key] = r.right;
      }
      return t.success(out);
    },
    t.identity,
  );
}

/** A codec for strings that satisfy `test`, failing with `message` (after the field name). */
export function checkedString(
  name: string,
  test: (s: string) => boolean,
  message: (s: string) => string,
): t.Type<string, string> {
  return new t.Type<string, string, unknown>(
    name,
    (u): u is string => typeof u === 'string' && test(u),
    (u, c) => {
      if (u === undefined) return t.failure(u, c, 'is missing');
      if (typeof u !== 'string') return t.failure(u, c, `should be a string, got ${show(u)}`);
      return test(u) ? t.success(u) : t.failure(u, c, message(u));
    },
    t.identity,
  );
}
