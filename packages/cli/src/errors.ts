import type { ErrorKind } from '@allocnet/base';
import type { status as GrpcStatus } from '@grpc/grpc-js';
import { statusCode } from '@allocnet/proto/codes';

/**
 * Why the command failed (the kind, @allocnet/base's, in brackets):
 * - `usage` (invalid): bad flags or arguments, found before anything ran; exits 2;
 * - `exit` (the caller's): the command said what it had to say on stdout and fails (`alloc
 *   check` of a broken allocation, `fleet` with a node that did not answer); exits 1;
 * - `agent-call` (the agent's answer's, read back from its gRPC status): a call to an agent
 *   failed, or never got an answer (`internal`); exits 1.
 */
export type CliErrorCode = 'usage' | 'exit' | 'agent-call';

export interface CliErrorDetails {
  readonly code: CliErrorCode;
  /** The kind, for `exit` and `agent-call`; a `usage` error is `invalid`. */
  readonly kind?: ErrorKind;
  /** For `agent-call`: the agent's gRPC status, or undefined when the call got no answer. */
  readonly grpcStatus?: GrpcStatus;
  readonly cause?: unknown;
}

const BRAND = Symbol.for('@allocnet/cli.CliError');

/** The one error type of this package; its message (if any) goes to stderr after `allocnet: `. */
export class CliError extends Error {
  readonly code: CliErrorCode;
  readonly kind: ErrorKind;
  readonly grpcStatus: GrpcStatus | undefined;
  readonly [BRAND] = true;

  constructor(message: string, details: CliErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'CliError';
    this.code = details.code;
    this.kind = details.code === 'usage' ? 'invalid' : (details.kind ?? 'internal');
    this.grpcStatus = details.grpcStatus;
  }
}

/** True for a `CliError`, also one from another copy of this package. */
export function isCliError(value: unknown): value is CliError {
  return typeof value === 'object' && value !== null && BRAND in value;
}

/** A usage error: bad flags or arguments; the command exits 2 and runs nothing. */
export function usageError(message: string, cause?: unknown): CliError {
  return new CliError(message, { code: 'usage', cause });
}

/**
 * The command reported its failure on stdout and exits 1; `kind` says what kind of failure
 * (`broken` for a CHECK that failed, `unavailable` for a node that did not answer, …).
 */
export function reportedFailure(kind: ErrorKind, message = ''): CliError {
  return new CliError(message, { code: 'exit', kind });
}

/**
 * gRPC's UNAVAILABLE, from @allocnet/proto's table of codes alone (`@allocnet/proto/codes`), so
 * that a call that cannot connect is reported without loading the contract's client
 * (with-agent.ts).
 */
export const GRPC_UNAVAILABLE: GrpcStatus = statusCode('UNAVAILABLE');

/**
 * A call that cannot reach the agent at `address`: connect(2) failed with `errno` (`ENOENT`,
 * `ECONNREFUSED`, …). Said the way a call that failed UNAVAILABLE is (`agent <address>:
 * UNAVAILABLE: …`), with what to do; the kind is `unavailable`, the same call may work later.
 */
export function unreachableError(address: string, errno: string, cause?: unknown): CliError {
  return new CliError(
    `agent ${address}: UNAVAILABLE: cannot connect (${errno}); is the agent running? start it with \`allocnet agent\`, or pass --address`,
    {
      code: 'agent-call',
      kind: 'unavailable',
      grpcStatus: GRPC_UNAVAILABLE,
      ...(cause === undefined ? {} : { cause }),
    },
  );
}
