// The error contract every allocnet package follows. Each package keeps one error class with its
// own detailed `code` (`setup-failed`, `plugin-not-found`, …) and, for the layers above, a
// `kind`: what a caller can do about it, decided once by the layer that knows. A layer that wraps
// another's error decides its own kind from the wrapped error's `kind` (one property read, never
// its text), and the front doors map kinds to their own vocabulary in one table each: the agent
// to gRPC statuses, the CLI to exit statuses. Bad input carries a structured `path` to the field
// (`['ports', 2, 'hostIp']`) and its problem, so each front door names the field in its own
// spelling without rewriting a message.

/**
 * - `invalid`: the caller's input is wrong (`path` names the field); nothing changed;
 * - `not-found`: what the caller names does not exist (an allocation, a network, a chain);
 * - `conflict`: it exists in a state that refuses this (set up with another spec, recorded failed);
 * - `unavailable`: something this needs is missing or cannot run now (a plugin binary, iptables,
 *   a runner shutting down); the same call may work later;
 * - `aborted`: the caller's signal (deadline, cancel, shutdown) stopped it;
 * - `broken`: a CHECK found the allocation's network not as it was set up;
 * - `exhausted`: a resource of the node ran out (the data dir's filesystem is full); nothing
 *   changed, and the same call works once it is freed;
 * - `internal`: it ran and failed (a plugin's error, a host command, the store).
 */
export type ErrorKind =
  | 'invalid'
  | 'not-found'
  | 'conflict'
  | 'unavailable'
  | 'aborted'
  | 'broken'
  | 'exhausted'
  | 'internal';

export const ERROR_KINDS: readonly ErrorKind[] = [
  'invalid',
  'not-found',
  'conflict',
  'unavailable',
  'aborted',
  'broken',
  'exhausted',
  'internal',
];

/** Where a bad value is: field names and array indexes, outermost first. */
export type FieldPath = readonly (string | number)[];

/**
 * A problem's text, with the fields it mentions kept as paths so that each front door can spell
 * them its own way: `['claims host port 80, which ', { field: ['ports', 0, 'value'] }, ' claims']`.
 */
export type ProblemPart = string | { readonly field: FieldPath };
export type Problem = readonly ProblemPart[];

/**
 * The problem with every field it mentions moved by `move` (a nested spec's fields put under where
 * that spec is in the caller's input: `ports[0]` → `attachments[1].ports[0]`).
 */
export function moveProblemFields(
  problem: Problem,
  move: (field: FieldPath) => FieldPath,
): Problem {
  return problem.map((part) => (typeof part === 'string' ? part : { field: move(part.field) }));
}

/** Spells one field name (`reservedPorts` → `reserved_ports`); the identity by default. */
export type FieldSpelling = (path: FieldPath) => string;

/**
 * A path as the libraries spell it: `ports[2].hostIp`, `cniArgs.a;b` (a map key like a field),
 * `spec` for the empty path's owner left to the caller. The empty path is ''.
 */
export function formatPath(path: FieldPath): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else out += out === '' ? segment : `.${segment}`;
  }
  return out;
}

/** A problem as text, its fields spelled by `spell` (default `formatPath`). */
export function renderProblem(problem: Problem, spell: FieldSpelling = formatPath): string {
  return problem.map((part) => (typeof part === 'string' ? part : spell(part.field))).join('');
}

/** What the contract adds to an error class (the classes of the packages that take input implement it). */
export interface ContractError extends Error {
  readonly kind: ErrorKind;
  /** For `invalid`: the bad field. */
  readonly path: FieldPath | undefined;
  /** For `invalid`: what is wrong with it (the message is `<field> <problem>` in context). */
  readonly problem: Problem | undefined;
  /** The whole message with the fields it names kept as paths, when it names any. */
  readonly parts: Problem | undefined;
}

function isKind(value: unknown): value is ErrorKind {
  return typeof value === 'string' && (ERROR_KINDS as readonly string[]).includes(value);
}

/**
 * The kind of an error of any allocnet package (also from another copy of one), read from the
 * error itself, never from its causes or text; `undefined` for anything else (a plain `Error`,
 * a string).
 */
export function kindOf(error: unknown): ErrorKind | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const kind = (error as { kind?: unknown }).kind;
  return isKind(kind) ? kind : undefined;
}

/** The field path and problem of an `invalid` error of any allocnet package. */
export function invalidInputOf(
  error: unknown,
): { readonly path: FieldPath; readonly problem: Problem } | undefined {
  if (kindOf(error) !== 'invalid') return undefined;
  const { path, problem } = error as { path?: unknown; problem?: unknown };
  if (!Array.isArray(path) || !Array.isArray(problem)) return undefined;
  return { path: path as FieldPath, problem: problem as Problem };
}

/**
 * The kind a wrapping error takes from the error it wraps: `unavailable`, `aborted`, `broken` and
 * `exhausted` say something about the whole operation and carry through; anything else (a
 * plugin's failure, a bad value deep inside) makes the wrapper `otherwise`.
 */
export function carriedKind(cause: unknown, otherwise: ErrorKind = 'internal'): ErrorKind {
  const kind = kindOf(cause);
  return kind === 'unavailable' || kind === 'aborted' || kind === 'broken' || kind === 'exhausted'
    ? kind
    : otherwise;
}

/**
 * An error's message with the fields it names spelled by `spell` (the agent's spelling is the
 * .proto's); the message itself when it has no parts.
 */
export function messageIn(error: unknown, spell: FieldSpelling): string {
  const parts =
    typeof error === 'object' && error !== null ? (error as { parts?: unknown }).parts : undefined;
  return Array.isArray(parts) ? renderProblem(parts as Problem, spell) : messageOf(error);
}

/** The message of anything thrown, for logs, records and statuses. */
export function messageOf(error: unknown): string {
  // Not `instanceof Error`: errors from another realm (node:fs under jest's vm) are objects too.
  if (typeof error === 'object' && error !== null && typeof (error as Error).message === 'string')
    return (error as Error).message;
  if (typeof error === 'string') return error;
  // JSON.stringify gives undefined for undefined, functions and symbols.
  const json = JSON.stringify(error) as string | undefined;
  return json ?? String(error);
}

/**
 * A value as a problem quotes it: its JSON, cut at 80 characters. Never throws, whatever a
 * decoder was given (YAML and msgpack make values JSON text cannot): a bigint is `10n`, a function
 * or a symbol is named by its type, and a value JSON.stringify gives up on (one that contains
 * itself, as a YAML alias can, or one nested thousands deep) is described instead.
 */
export function show(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (typeof value === 'bigint') return `${value}n`;
  let json: unknown;
  try {
    json = JSON.stringify(value, (_, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v));
  } catch {
    // A cycle (TypeError) or a nesting deeper than the stack (RangeError): the problem is still
    // worth reporting, with the value described rather than written.
    return Array.isArray(value)
      ? '<a list too deep or cyclic to write>'
      : '<an object too deep or cyclic to write>';
  }
  // JSON.stringify gives undefined for a function or a symbol: name the type instead.
  const text = typeof json === 'string' ? json : `<${typeof value}>`;
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
