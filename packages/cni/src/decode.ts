import type * as t from 'io-ts';
import { isLeft } from 'fp-ts/lib/Either.js';
import { formatPath, show } from '@allocnet/base';
import type { FieldPath } from '@allocnet/base';

/**
 * The path of the value that failed, as `['plugins', 1, 'type']`: object keys as names, array
 * indices as numbers, the members of unions and intersections skipped.
 */
function pathOf(error: t.ValidationError): FieldPath {
  const path: (string | number)[] = [];
  error.context.forEach((entry, i) => {
    if (i === 0) return;
    const parent = error.context[i - 1]?.type as { _tag?: string } | undefined;
    const tag = parent?._tag;
    if (tag === 'IntersectionType' || tag === 'UnionType' || tag === 'RefinementType') return;
    const objectKey = tag === 'InterfaceType' || tag === 'PartialType' || tag === 'DictionaryType';
    const index =
      tag === 'ArrayType' || tag === 'TupleType' || (!objectKey && /^\d+$/.test(entry.key));
    path.push(index ? Number(entry.key) : entry.key);
  });
  return path;
}

/** One decode failure: the field's path and what is wrong with it. */
export interface DecodeProblem {
  readonly path: FieldPath;
  /** The path as text (`plugins[1].type`); '' for the value itself. */
  readonly field: string;
  readonly problem: string;
}

/**
 * Decodes `value` with `codec`, or returns the first problem, naming the field. Codecs here give
 * their own message through `t.failure(…, message)`; others get "expected <type>, got <value>".
 */
export function decode<A, O>(
  codec: t.Type<A, O>,
  value: unknown,
): { ok: true; value: A } | { ok: false; problem: DecodeProblem } {
  const result = codec.decode(value);
  if (!isLeft(result)) return { ok: true, value: result.right };
  // io-ts reports one error per union member; the deepest path is the most specific one.
  const errors = [...result.left].sort((a, b) => b.context.length - a.context.length);
  const first = errors[0];
  if (first === undefined)
    return { ok: false, problem: { path: [], field: '', problem: 'is not valid' } };
  const path = pathOf(first);
  const expected = first.context[first.context.length - 1]?.type.name ?? 'a valid value';
  const problem =
    first.message ??
    (first.value === undefined ? 'is missing' : `should be ${expected}, got ${show(first.value)}`);
  return { ok: false, problem: { path, field: formatPath(path), problem } };
}
