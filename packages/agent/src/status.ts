// Errors as gRPC statuses, by one table: every allocnet error carries a `kind` (@allocnet/base),
// decided by the layer that knew; here a kind becomes a status code (an abort by its cause), and
// a field path becomes the .proto's spelling of it. Nothing here reads a message's text.
import * as grpc from '@grpc/grpc-js';
import { invalidInputOf, kindOf, messageIn, renderProblem } from '@allocnet/base';
import type { ErrorKind, FieldPath } from '@allocnet/base';
import { isRunnerError } from '@allocnet/alloc-runner';
import { isCniError } from '@allocnet/cni';
import type { CniError } from '@allocnet/cni';
import { isConfiguratorError } from '@allocnet/cni-configurator';
import { isAgentError } from './errors.js';

/** Why a call's signal aborted: its deadline passed, the client cancelled, or the agent stopped. */
export type AbortCause = 'deadline' | 'cancelled' | 'shutdown';

export interface GrpcFailure {
  readonly code: grpc.status;
  readonly details: string;
  /**
   * Trailing metadata for programs: `allocnet-error` (the code of the error, e.g. `conflict`),
   * `allocnet-field` (the bad field), `allocnet-cni-plugin`, `allocnet-cni-code` (the failing
   * plugin and its CNI error code), `allocnet-attempts` (ADD attempts made).
   */
  readonly metadata: Readonly<Record<string, string>>;
}

/** The one mapping of kinds to gRPC statuses; `aborted` is decided by the abort's cause. */
export const KIND_STATUS: Readonly<Record<Exclude<ErrorKind, 'aborted'>, grpc.status>> = {
  invalid: grpc.status.INVALID_ARGUMENT,
  'not-found': grpc.status.NOT_FOUND,
  conflict: grpc.status.FAILED_PRECONDITION,
  unavailable: grpc.status.UNAVAILABLE,
  // A CHECK that found the network broken failed: the allocation needs a new setup.
  broken: grpc.status.INTERNAL,
  exhausted: grpc.status.RESOURCE_EXHAUSTED,
  internal: grpc.status.INTERNAL,
};

/** An abort's status by its cause: the deadline, the client, or the agent shutting down. */
export const ABORT_STATUS: Readonly<Record<AbortCause, grpc.status>> = {
  deadline: grpc.status.DEADLINE_EXCEEDED,
  cancelled: grpc.status.CANCELLED,
  shutdown: grpc.status.UNAVAILABLE,
};

/** The status for a kind (an error without one is `internal`). */
export function statusOf(
  kind: ErrorKind | undefined,
  abortCause: AbortCause | undefined,
): grpc.status {
  if (kind === 'aborted') return ABORT_STATUS[abortCause ?? 'cancelled'];
  return KIND_STATUS[kind ?? 'internal'];
}

/** The request field names of the .proto for the names the libraries use (camelCase). */
const PROTO_NAMES: Readonly<Record<string, string>> = {
  allocId: 'alloc_id',
  jobId: 'job_id',
  groupName: 'group_name',
  cniArgs: 'cni_args',
  netnsPath: 'netns_path',
  netns: 'netns_path',
  hostIp: 'host_ip',
  legacyNetworks: 'networks',
  reservedPorts: 'reserved_ports',
  dynamicPorts: 'dynamic_ports',
  batchSize: 'batch_size',
  dryRun: 'dry_run',
};

/** Fields whose next segment is a map key, which the .proto path quotes (it may hold anything). */
const MAP_FIELDS: ReadonlySet<string> = new Set(['cniArgs']);

/**
 * A library's field path as the request's .proto field path: `['spec', 'legacyNetworks', 0,
 * 'reservedPorts', 1, 'value']` → `networks[0].reserved_ports[1].value`, `['spec', 'cniArgs',
 * 'a;b']` → `cni_args["a;b"]`. The request is the spec, so a leading `spec` is dropped.
 */
export function protoField(path: FieldPath): string {
  const inner = path[0] === 'spec' ? path.slice(1) : path;
  let out = '';
  inner.forEach((segment, i) => {
    const previous = inner[i - 1];
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (typeof previous === 'string' && MAP_FIELDS.has(previous))
      out += `[${JSON.stringify(segment)}]`;
    else {
      const name = PROTO_NAMES[segment] ?? segment;
      out += out === '' ? name : `.${name}`;
    }
  });
  return out;
}

/**
 * Every error of a `cause` chain, outermost first: read for the diagnostic metadata only (which
 * plugin failed, after how many attempts, which layer found the input bad), never to decide a
 * status or to change a message.
 */
function causes(error: unknown): unknown[] {
  const chain: unknown[] = [];
  let at: unknown = error;
  while (at !== undefined && at !== null && chain.length < 16) {
    chain.push(at);
    at = typeof at === 'object' ? (at as { cause?: unknown }).cause : undefined;
  }
  return chain;
}

const ASCII = /^[ -~]*$/;

function meta(entries: Record<string, string | number | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(entries)) {
    // Text metadata must be printable ASCII; a value that is not stays in the message only.
    if (v !== undefined && ASCII.test(String(v))) out[k] = String(v);
  }
  return out;
}

/** An error's own code, as `allocnet-error` names it. */
function errorCode(error: unknown): string {
  if (isAgentError(error) || isRunnerError(error) || isConfiguratorError(error)) return error.code;
  return isCniError(error) ? 'cni' : 'internal';
}

/**
 * The code of the error that found the input bad: the innermost `invalid` one of the chain (the
 * configurator's `network-not-found` under the runner's `invalid-argument`).
 */
function invalidCode(chain: readonly unknown[]): string {
  const finder = chain.findLast((e) => kindOf(e) === 'invalid');
  return errorCode(finder ?? chain[0]);
}

/**
 * The gRPC status for anything an RPC threw: the status of its kind; bad input names the field
 * in the .proto's spelling (`ports[1].value should be …`, the bad field also in metadata); other
 * messages whole, with the fields they name spelled as the request does (`(job_id, ports
 * differ)`) and the plugin's own message kept.
 */
export function grpcFailure(error: unknown, abortCause: AbortCause | undefined): GrpcFailure {
  const kind = kindOf(error);
  const code = statusOf(kind, abortCause);
  const chain = causes(error);
  const input = invalidInputOf(error);
  if (input !== undefined) {
    const field = protoField(input.path);
    return {
      code,
      details: `${field === '' ? 'spec' : field} ${renderProblem(input.problem, protoField)}`,
      metadata: meta({ 'allocnet-error': invalidCode(chain), 'allocnet-field': field }),
    };
  }
  const cni = chain.find((e): e is CniError => isCniError(e));
  const attempts = chain.find((e) => isConfiguratorError(e) && e.attempts !== undefined);
  return {
    code,
    details: messageIn(error, protoField),
    metadata: meta({
      'allocnet-error': errorCode(error),
      'allocnet-cni-plugin': cni?.plugin,
      'allocnet-cni-code': cni?.code,
      'allocnet-attempts':
        attempts !== undefined && isConfiguratorError(attempts) ? attempts.attempts : undefined,
    }),
  };
}

/** The status's name, as logs and the failure metric show it (`INVALID_ARGUMENT`). */
export function statusName(code: grpc.status): string {
  return grpc.status[code];
}
