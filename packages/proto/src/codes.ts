// gRPC's status codes and its failed call, without grpc-js: a client that only calls (the CLI,
// through h2-call.ts) reads them without loading it. The numbers are the protocol's (grpc's
// doc/statuscodes.md); call.test.ts holds them equal to grpc-js's `status`.
import type { status } from '@grpc/grpc-js';

/** Each status code by its name, as grpc-js's `status` enum has them. */
export const STATUS = Object.freeze({
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const);

export type StatusName = keyof typeof STATUS;

const NAMES = new Map<number, StatusName>(
  Object.entries(STATUS).map(([name, code]) => [code, name as StatusName]),
);

/** The name of a status code (`UNAVAILABLE`), or the number as text for one gRPC does not define. */
export function statusName(code: number): string {
  return NAMES.get(code) ?? String(code);
}

/** A status by its name, typed as grpc-js's enum (the same number). */
export function statusCode(name: StatusName): status {
  // The one place a protocol number becomes grpc-js's enum: the same numbers (call.test.ts).
  // eslint-disable-next-line @typescript-eslint/no-unsafe-enum-assignment
  return STATUS[name];
}

/** A status code read off the wire, 0-16, typed as grpc-js's enum; undefined for another number. */
export function statusOfNumber(code: number): status | undefined {
  return NAMES.has(code) ? statusCode(NAMES.get(code) as StatusName) : undefined;
}

/**
 * A failed call: grpc-js's `ServiceError`, or h2-call.ts' `CallError`, which has the same shape
 * (`code`, `details`, `metadata`).
 */
export interface ServiceErrorLike extends Error {
  readonly code: status;
  readonly details: string;
  readonly metadata: object;
}

/** True for a failed call's error: an `Error` with a numeric status `code`, `details` and `metadata`. */
export function isServiceError(value: unknown): value is ServiceErrorLike {
  return (
    value instanceof Error &&
    typeof (value as Partial<ServiceErrorLike>).code === 'number' &&
    typeof (value as Partial<ServiceErrorLike>).details === 'string' &&
    // not `instanceof grpc.Metadata`: the error may come from another copy of grpc-js, or none
    typeof (value as Partial<ServiceErrorLike>).metadata === 'object'
  );
}
