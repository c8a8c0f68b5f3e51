// Errors as gRPC statuses, by one table: every allocnet error carries a `kind` (@allocnet/base),
// decided by the layer that knew; its status comes from @allocnet/proto's table (`statusOfKind`:
// `KIND_STATUS`, an abort by its cause in `ABORT_STATUS`), and a field path becomes the .proto's
// spelling of it here. Nothing here reads a message's text.
import * as grpc from '@grpc/grpc-js';
import { invalidInputOf, kindOf, messageIn, renderProblem } from '@allocnet/base';
import type { FieldPath } from '@allocnet/base';
import { isRunnerError } from '@allocnet/alloc-runner';
import { isCniError } from '@allocnet/cni';
import type { CniError } from '@allocnet/cni';
import { isConfiguratorError } from '@allocnet/cni-configurator';
import { statusOfKind } from '@allocnet/proto';
import type { AbortCause } from '@allocnet/proto';
import { isAgentError } from './errors.js';

export type { AbortCause } from '@allocnet/proto';

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
  interfaceName: 'interface_name',
  ifName: 'interface_name',
  defaultRoute: 'default_route',
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
  const code = statusOfKind(kind, abortCause);
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
      // A refusal about one field of a valid request (a host port another allocation maps).
      'allocnet-field':
        isRunnerError(error) && error.path !== undefined ? protoField(error.path) : undefined,
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
