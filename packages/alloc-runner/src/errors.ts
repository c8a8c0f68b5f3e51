/**
 * What went wrong, as a caller needs to act on it (the agent maps each to a gRPC status):
 * - `invalid-argument`: a spec or id refused before anything ran; `field` names it (INVALID_ARGUMENT);
 * - `not-found`: no such allocation (NOT_FOUND);
 * - `conflict`: the allocation is already set up with a different spec (FAILED_PRECONDITION);
 * - `failed`: the allocation is recorded as failed (restore could not keep it); a teardown clears
 *   it (FAILED_PRECONDITION);
 * - `setup-failed`, `teardown-failed`, `check-failed`: the operation failed; `cause` holds the
 *   configurator's (or the namespace command's) error with the plugin's message (INTERNAL);
 * - `reconcile-failed`: the reconciler could not read or clean the host state (INTERNAL);
 * - `netns`: `ip netns` failed (INTERNAL);
 * - `store`: the state store could not be opened, read or written (INTERNAL);
 * - `shutting-down`: `close()` was called; nothing new is accepted (UNAVAILABLE);
 * - `aborted`: the caller's signal aborted the operation (CANCELLED).
 */
export type RunnerErrorCode =
  | 'invalid-argument'
  | 'not-found'
  | 'conflict'
  | 'failed'
  | 'setup-failed'
  | 'teardown-failed'
  | 'check-failed'
  | 'reconcile-failed'
  | 'netns'
  | 'store'
  | 'shutting-down'
  | 'aborted';

export interface RunnerErrorDetails {
  readonly code: RunnerErrorCode;
  /** The allocation the error is about, when there is one. */
  readonly allocId?: string;
  /** For `invalid-argument`: the field, as a path (`ports[1].value`). */
  readonly field?: string;
  readonly cause?: unknown;
}

const BRAND = Symbol.for('@allocnet/alloc-runner.RunnerError');

/**
 * The one error type of this package. Its message puts the context first and quotes
 * identifiers: `setup of allocation "6b23…" failed: plugin "bridge" failed (ADD) for …`.
 */
export class RunnerError extends Error {
  readonly code: RunnerErrorCode;
  readonly allocId: string | undefined;
  readonly field: string | undefined;
  readonly [BRAND] = true;

  constructor(message: string, details: RunnerErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'RunnerError';
    this.code = details.code;
    this.allocId = details.allocId;
    this.field = details.field;
  }
}

/** True for a `RunnerError`, also one from another copy of this package. */
export function isRunnerError(value: unknown): value is RunnerError {
  return typeof value === 'object' && value !== null && BRAND in value;
}

/** The message of anything thrown, for records and logs. */
export function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  if (typeof error === 'string') return error;
  // JSON.stringify gives undefined for undefined, functions and symbols.
  const json = JSON.stringify(error) as string | undefined;
  return json ?? String(error);
}
