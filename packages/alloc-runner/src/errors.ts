import {
  carriedKind,
  formatPath,
  invalidInputOf,
  kindOf,
  messageOf,
  renderProblem,
} from '@allocnet/base';
import type { ContractError, ErrorKind, FieldPath, Problem } from '@allocnet/base';

export { carriedKind, invalidInputOf, kindOf, messageOf };

/**
 * What went wrong, in detail (the agent's `allocnet-error` metadata); `kind` (see
 * @allocnet/base) is what callers act on:
 * - `invalid-argument` (invalid): a spec or id refused before anything ran; `path` names it;
 * - `not-found` (not-found): no such allocation;
 * - `conflict` (conflict): the allocation is already set up with a different spec;
 * - `host-port-taken` (conflict): a host port, protocol and host address the spec asks for is
 *   mapped by another live allocation (port-claims.ts); `path` names the spec's port; nothing ran;
 * - `failed` (conflict): the allocation is recorded as failed (restore could not keep it); a
 *   teardown clears it;
 * - `setup-failed`, `teardown-failed`, `check-failed`: the operation failed; `cause` holds the
 *   configurator's (or the namespace command's) error with the plugin's message. The kind is
 *   the cause's when it is `unavailable`, `aborted` or `broken` (a CHECK that found the network
 *   broken), `internal` otherwise;
 * - `reconcile-failed` (internal): the reconciler could not read or clean the host state;
 * - `netns`, `store` (internal): `ip netns` failed; the state store could not be used;
 * - `store-full` (exhausted): a write found no space in the data dir; nothing was changed;
 * - `shutting-down` (unavailable): `close()` was called; nothing new is accepted;
 * - `timed-out` (unavailable): the operation ran past the runner's `operationTimeoutMs` and was
 *   stopped (a setup rolled back), so that nothing holds an allocation's turn for ever;
 * - `aborted` (aborted): the caller's signal aborted the operation.
 */
export type RunnerErrorCode =
  | 'invalid-argument'
  | 'not-found'
  | 'conflict'
  | 'host-port-taken'
  | 'failed'
  | 'setup-failed'
  | 'teardown-failed'
  | 'check-failed'
  | 'reconcile-failed'
  | 'netns'
  | 'store'
  | 'store-full'
  | 'shutting-down'
  | 'timed-out'
  | 'aborted';

const KINDS: Readonly<Record<RunnerErrorCode, ErrorKind | 'from-cause'>> = {
  'invalid-argument': 'invalid',
  'not-found': 'not-found',
  conflict: 'conflict',
  'host-port-taken': 'conflict',
  failed: 'conflict',
  'setup-failed': 'from-cause',
  'teardown-failed': 'from-cause',
  'check-failed': 'from-cause',
  'reconcile-failed': 'from-cause',
  netns: 'internal',
  store: 'internal',
  'store-full': 'exhausted',
  'shutting-down': 'unavailable',
  'timed-out': 'unavailable',
  aborted: 'aborted',
};

export interface RunnerErrorDetails {
  readonly code: RunnerErrorCode;
  /** Default: by `code`; for the failures that wrap a cause, `carriedKind(cause)`. */
  readonly kind?: ErrorKind;
  /** The allocation the error is about, when there is one. */
  readonly allocId?: string;
  /** For `invalid-argument` and `host-port-taken`: the field, as a path (`['spec', 'ports', 1, 'value']`). */
  readonly path?: FieldPath;
  /** For `invalid-argument`: what is wrong with the field. */
  readonly problem?: Problem;
  /** The message with the fields it names as paths, when it names any (see @allocnet/base). */
  readonly parts?: Problem;
  readonly cause?: unknown;
}

const BRAND = Symbol.for('@allocnet/alloc-runner.RunnerError');

/**
 * The one error type of this package. Its message puts the context first and quotes
 * identifiers: `setup of allocation "6b23…" failed: plugin "bridge" failed (ADD) for …`.
 */
export class RunnerError extends Error implements ContractError {
  readonly code: RunnerErrorCode;
  readonly kind: ErrorKind;
  readonly allocId: string | undefined;
  readonly path: FieldPath | undefined;
  readonly problem: Problem | undefined;
  readonly parts: Problem | undefined;
  readonly [BRAND] = true;

  constructor(message: string, details: RunnerErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'RunnerError';
    this.code = details.code;
    const byCode = KINDS[details.code];
    this.kind = details.kind ?? (byCode === 'from-cause' ? carriedKind(details.cause) : byCode);
    this.allocId = details.allocId;
    this.path = details.path;
    this.problem = details.problem;
    this.parts = details.parts;
  }

  /** The bad field as the libraries spell it (`spec.ports[1].value`). */
  get field(): string | undefined {
    return this.path === undefined ? undefined : formatPath(this.path);
  }
}

/** An `invalid-argument` error: `<context>: <field> <problem>`. */
export function invalidInput(
  context: string,
  path: FieldPath,
  problem: Problem,
  extra: { readonly allocId?: string; readonly cause?: unknown } = {},
): RunnerError {
  return new RunnerError(`${context}: ${formatPath(path)} ${renderProblem(problem)}`, {
    code: 'invalid-argument',
    path,
    problem,
    ...extra,
  });
}

/** True for a `RunnerError`, also one from another copy of this package. */
export function isRunnerError(value: unknown): value is RunnerError {
  return typeof value === 'object' && value !== null && BRAND in value;
}

/**
 * How an operation whose signal aborted ends: `timed-out` when the runner's own deadline
 * aborted it (its reason is a `timed-out` RunnerError), `aborted` when the caller did.
 */
export function abortCode(signal: AbortSignal | undefined): 'aborted' | 'timed-out' | undefined {
  if (signal?.aborted !== true) return undefined;
  const reason: unknown = signal.reason;
  return isRunnerError(reason) && reason.code === 'timed-out' ? 'timed-out' : 'aborted';
}
