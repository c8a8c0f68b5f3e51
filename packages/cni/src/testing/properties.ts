// Helpers for the property tests of the decoders at an edge (docs/testing.md, "Property tests").
// Plain functions over values, so that this module needs no test library: each test builds its
// arbitraries with fast-check and uses these to mutate a valid input and to check an error's path.
import type { FieldPath } from '@allocnet/base';

/**
 * fast-check's parameters for one property: the fixed `seed` and `numRuns` of the test, unless
 * `FC_SEED` or `FC_NUM_RUNS` give others (to explore further than CI does).
 */
export function propertyParameters(
  seed: number,
  numRuns: number,
): { readonly seed: number; readonly numRuns: number } {
  const fromEnv = (name: string): number | undefined => {
    const text = process.env[name];
    if (text === undefined || text === '') return undefined;
    const n = Number(text);
    if (!Number.isSafeInteger(n))
      throw new RangeError(`${name} ${JSON.stringify(text)} is not a whole number`);
    return n;
  };
  return { seed: fromEnv('FC_SEED') ?? seed, numRuns: fromEnv('FC_NUM_RUNS') ?? numRuns };
}

function isContainer(value: unknown): value is Record<string, unknown> | unknown[] {
  return typeof value === 'object' && value !== null;
}

/** Every path into a JSON value (its own fields and list entries, at any depth), outermost first. */
export function pathsOf(value: unknown): FieldPath[] {
  const out: FieldPath[] = [];
  const walk = (node: unknown, at: FieldPath) => {
    if (!isContainer(node)) return;
    const keys: (string | number)[] = Array.isArray(node)
      ? node.map((_, i) => i)
      : Object.keys(node);
    for (const key of keys) {
      const path = [...at, key];
      out.push(path);
      walk((node as Record<string | number, unknown>)[key], path);
    }
  };
  walk(value, []);
  return out;
}

/** What lies at `path` in `value`: `found` only when every step is an own field or entry. */
export function valueAt(value: unknown, path: FieldPath): { found: boolean; value: unknown } {
  let node = value;
  for (const segment of path) {
    if (!isContainer(node) || !Object.prototype.hasOwnProperty.call(node, segment))
      return { found: false, value: undefined };
    node = (node as Record<string | number, unknown>)[segment];
  }
  return { found: true, value: node };
}

/** One change to a valid input: a field replaced by another value, or taken out. */
export type Mutation = { readonly replace: unknown } | 'delete';

/**
 * A copy of the JSON value `value` with one change at the `pick`-th of its paths (modulo their
 * number); a value without paths is replaced whole (or, for 'delete', kept).
 */
export function mutateAt(value: unknown, pick: number, change: Mutation): unknown {
  const copy: unknown = structuredClone(value);
  const paths = pathsOf(copy);
  if (paths.length === 0) return change === 'delete' ? copy : change.replace;
  const path = paths[Math.abs(pick) % paths.length] as FieldPath;
  const parent = valueAt(copy, path.slice(0, -1)).value as Record<string | number, unknown>;
  const key = path[path.length - 1] as string | number;
  // defineProperty: a JSON object may have an own "__proto__" field, which `=` would not set.
  if (change !== 'delete')
    Object.defineProperty(parent, key, {
      value: change.replace,
      writable: true,
      enumerable: true,
      configurable: true,
    });
  else if (Array.isArray(parent)) parent.splice(Number(key), 1);
  else Reflect.deleteProperty(parent, key);
  return copy;
}
