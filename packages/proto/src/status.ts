// The one table between allocnet's error kinds (@allocnet/base) and gRPC statuses. The agent
// answers a failed call with `statusOfKind`; the CLI reads an answer's kind back with
// `kindOfStatus`, the same table inverted; the CNI server's codes come from the same kinds. No
// grpc-js here (codes.ts): a client reads a failed call's kind without loading it.
import type { status } from '@grpc/grpc-js';
import { ERROR_KINDS } from '@allocnet/base';
import type { ErrorKind } from '@allocnet/base';
import { statusCode } from './codes.js';

/** Why a call's signal aborted: its deadline passed, the client cancelled, or the agent stopped. */
export type AbortCause = 'deadline' | 'cancelled' | 'shutdown';

/** The status of each kind; `aborted` is decided by the abort's cause (`ABORT_STATUS`). */
export const KIND_STATUS: Readonly<Record<Exclude<ErrorKind, 'aborted'>, status>> = {
  invalid: statusCode('INVALID_ARGUMENT'),
  'not-found': statusCode('NOT_FOUND'),
  conflict: statusCode('FAILED_PRECONDITION'),
  unavailable: statusCode('UNAVAILABLE'),
  // A CHECK that found the network broken failed: the allocation needs a new setup.
  broken: statusCode('INTERNAL'),
  exhausted: statusCode('RESOURCE_EXHAUSTED'),
  internal: statusCode('INTERNAL'),
};

/** An abort's status by its cause: the deadline, the client, or the agent shutting down. */
export const ABORT_STATUS: Readonly<Record<AbortCause, status>> = {
  deadline: statusCode('DEADLINE_EXCEEDED'),
  cancelled: statusCode('CANCELLED'),
  shutdown: statusCode('UNAVAILABLE'),
};

/** The status for a kind (an error without one is `internal`). */
export function statusOfKind(kind: ErrorKind | undefined, abortCause?: AbortCause): status {
  if (kind === 'aborted') return ABORT_STATUS[abortCause ?? 'cancelled'];
  return KIND_STATUS[kind ?? 'internal'];
}

// The table read back. Two kinds share INTERNAL (`broken`, `internal`): a reader cannot tell them
// apart, so INTERNAL reads as `internal`. UNAVAILABLE is `unavailable` whether a dependency or
// the agent's shutdown caused it: the same call may work later either way.
const STATUS_KIND: ReadonlyMap<status, ErrorKind> = new Map<status, ErrorKind>([
  ...Object.values(ABORT_STATUS).map((code): [status, ErrorKind] => [code, 'aborted']),
  ...ERROR_KINDS.filter((kind): kind is Exclude<ErrorKind, 'aborted'> => kind !== 'aborted')
    .filter((kind) => kind !== 'broken')
    .map((kind): [status, ErrorKind] => [KIND_STATUS[kind], kind]),
]);

/** The kind of an agent's answer, by its status; undefined for a status the agent never gives. */
export function kindOfStatus(code: status): ErrorKind | undefined {
  return STATUS_KIND.get(code);
}
