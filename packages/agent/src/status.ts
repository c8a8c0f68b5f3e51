// Errors as gRPC statuses: what the runner, the configurator, the CNI runtime, iptables and the
// agent throw, mapped to the code a client acts on, with a message that names the field (in
// the .proto's names) for bad input and keeps the plugin's own message for failures.
import * as grpc from '@grpc/grpc-js';
import { isRunnerError } from '@allocnet/alloc-runner';
import type { RunnerErrorCode } from '@allocnet/alloc-runner';
import { isCniError } from '@allocnet/cni';
import type { CniError } from '@allocnet/cni';
import { isConfiguratorError } from '@allocnet/cni-configurator';
import type { ConfiguratorErrorCode } from '@allocnet/cni-configurator';
import { isIptablesError } from '@allocnet/iptables-node';
import { isAgentError, messageOf } from './errors.js';

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

/**
 * A library's field path as the request's .proto field path: `spec.legacyNetworks[0].reservedPorts[1].value`
 * → `networks[0].reserved_ports[1].value`, `spec.cniArgs.a;b` → `cni_args["a;b"]` (a map key is
 * quoted: it may hold any character).
 */
export function protoField(path: string): string {
  const inner = path === 'spec' ? '' : path.startsWith('spec.') ? path.slice('spec.'.length) : path;
  if (inner === 'cniArgs') return 'cni_args';
  if (inner.startsWith('cniArgs.')) return `cni_args[${JSON.stringify(inner.slice(8))}]`;
  return inner
    .split('.')
    .map((segment) => {
      const m = /^([^[]*)(.*)$/.exec(segment);
      const name = m?.[1] ?? segment;
      return `${PROTO_NAMES[name] ?? name}${m?.[2] ?? ''}`;
    })
    .join('.');
}

/** The problem part of a `<field> <problem>` message, wherever the field appears in it. */
function problemAfter(message: string, field: string): string {
  const at = message.indexOf(`${field} `);
  return at < 0 ? message : message.slice(at + field.length + 1);
}

/** Every error of a `cause` chain, outermost first. */
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

function aborted(cause: AbortCause | undefined): grpc.status {
  if (cause === 'deadline') return grpc.status.DEADLINE_EXCEEDED;
  if (cause === 'shutdown') return grpc.status.UNAVAILABLE;
  return grpc.status.CANCELLED;
}

const RUNNER_CODES: Readonly<Record<RunnerErrorCode, grpc.status>> = {
  'invalid-argument': grpc.status.INVALID_ARGUMENT,
  'not-found': grpc.status.NOT_FOUND,
  conflict: grpc.status.FAILED_PRECONDITION,
  failed: grpc.status.FAILED_PRECONDITION,
  'setup-failed': grpc.status.INTERNAL,
  'teardown-failed': grpc.status.INTERNAL,
  'check-failed': grpc.status.INTERNAL,
  'reconcile-failed': grpc.status.INTERNAL,
  netns: grpc.status.INTERNAL,
  store: grpc.status.INTERNAL,
  'shutting-down': grpc.status.UNAVAILABLE,
  aborted: grpc.status.CANCELLED,
};

const CONFIGURATOR_CODES: Readonly<Record<ConfiguratorErrorCode, grpc.status>> = {
  'invalid-argument': grpc.status.INVALID_ARGUMENT,
  'network-not-found': grpc.status.INVALID_ARGUMENT,
  unavailable: grpc.status.UNAVAILABLE,
  'setup-failed': grpc.status.INTERNAL,
  'check-failed': grpc.status.INTERNAL,
  'teardown-failed': grpc.status.INTERNAL,
  'cleanup-failed': grpc.status.INTERNAL,
  aborted: grpc.status.CANCELLED,
};

/** Whether anything in the chain says "a plugin binary or iptables is missing or cannot start". */
function isUnavailable(chain: readonly unknown[]): boolean {
  return chain.some(
    (e) =>
      (isConfiguratorError(e) && e.code === 'unavailable') ||
      (isCniError(e) && (e.code === 'plugin-not-found' || e.code === 'spawn')) ||
      (isIptablesError(e) && e.code === 'spawn'),
  );
}

function isAbort(chain: readonly unknown[]): boolean {
  return chain.some(
    (e) =>
      (isRunnerError(e) && e.code === 'aborted') ||
      (isConfiguratorError(e) && e.code === 'aborted') ||
      (isCniError(e) && e.code === 'aborted') ||
      (isIptablesError(e) && e.code === 'aborted'),
  );
}

/**
 * The gRPC status for anything an RPC threw. Bad input is INVALID_ARGUMENT with the message
 * `<field> <problem>` in the .proto's field names (`ports[1].value should be …`); an unknown
 * network too (it is the caller's input); `not-found` NOT_FOUND; `conflict` and `failed`
 * FAILED_PRECONDITION; a missing plugin or iptables, or a runner shutting down, UNAVAILABLE; an
 * abort DEADLINE_EXCEEDED or CANCELLED by its cause; plugin and host failures INTERNAL with the
 * whole message, the plugin's error included.
 */
export function grpcFailure(error: unknown, abortCause: AbortCause | undefined): GrpcFailure {
  const chain = causes(error);
  const cni = chain.find((e): e is CniError => isCniError(e));
  const attempts = chain.find((e) => isConfiguratorError(e) && e.attempts !== undefined);
  const extra = {
    'allocnet-cni-plugin': cni?.plugin,
    'allocnet-cni-code': cni?.code,
    'allocnet-attempts':
      attempts !== undefined && isConfiguratorError(attempts) ? attempts.attempts : undefined,
  };

  if (isAgentError(error)) {
    const code =
      error.code === 'invalid-request'
        ? grpc.status.INVALID_ARGUMENT
        : error.code === 'not-found'
          ? grpc.status.NOT_FOUND
          : error.code === 'aborted'
            ? aborted(abortCause)
            : grpc.status.INTERNAL;
    return {
      code,
      details: error.message,
      metadata: meta({ 'allocnet-error': error.code, 'allocnet-field': error.field }),
    };
  }

  if (isRunnerError(error)) {
    // The configurator found the bad input (a duplicate host port, an unknown network): its
    // field and message, which are relative to the request.
    const found = chain.find(
      (e) =>
        isConfiguratorError(e) && (e.code === 'invalid-argument' || e.code === 'network-not-found'),
    );
    if (error.code === 'invalid-argument' && found !== undefined)
      return grpcFailure(found, abortCause);
    if (error.code === 'invalid-argument' && error.field !== undefined) {
      const field = protoField(error.field);
      return {
        code: grpc.status.INVALID_ARGUMENT,
        details: `${field} ${problemAfter(error.message, error.field)}`,
        metadata: meta({ 'allocnet-error': error.code, 'allocnet-field': field }),
      };
    }
    let code = RUNNER_CODES[error.code];
    if (error.code === 'aborted' || isAbort(chain)) code = aborted(abortCause);
    else if (code === grpc.status.INTERNAL && isUnavailable(chain)) code = grpc.status.UNAVAILABLE;
    // `… with a different spec (jobId, ports differ)`: the fields as the request names them.
    const details =
      error.code === 'conflict'
        ? error.message.replace(
            /\(([A-Za-z, ]+) differ\)/,
            (_, list: string) => `(${list.split(', ').map(protoField).join(', ')} differ)`,
          )
        : error.message;
    return {
      code,
      details,
      metadata: meta({ 'allocnet-error': error.code, ...extra }),
    };
  }

  if (isConfiguratorError(error)) {
    if (error.code === 'network-not-found') {
      // `network "x" is not known (networks: …)`: the message names the field already.
      return {
        code: grpc.status.INVALID_ARGUMENT,
        details: error.message,
        metadata: meta({ 'allocnet-error': error.code, 'allocnet-field': 'network' }),
      };
    }
    if (error.code === 'invalid-argument') {
      const raw = error.field ?? '';
      const field = protoField(raw);
      // Another field may be quoted in the problem (`… which ports[0].value already claims`).
      const problem = problemAfter(error.message, raw)
        .replaceAll('legacyNetworks[', 'networks[')
        .replaceAll('.reservedPorts[', '.reserved_ports[')
        .replaceAll('.dynamicPorts[', '.dynamic_ports[');
      return {
        code: grpc.status.INVALID_ARGUMENT,
        details: raw === '' ? error.message : `${field} ${problem}`,
        metadata: meta({ 'allocnet-error': error.code, 'allocnet-field': field }),
      };
    }
    let code = CONFIGURATOR_CODES[error.code];
    if (error.code === 'aborted' || isAbort(chain)) code = aborted(abortCause);
    else if (code === grpc.status.INTERNAL && isUnavailable(chain)) code = grpc.status.UNAVAILABLE;
    return {
      code,
      details: error.message,
      metadata: meta({ 'allocnet-error': error.code, ...extra }),
    };
  }

  if (isAbort(chain)) {
    return { code: aborted(abortCause), details: messageOf(error), metadata: meta(extra) };
  }
  if (isUnavailable(chain)) {
    return { code: grpc.status.UNAVAILABLE, details: messageOf(error), metadata: meta(extra) };
  }
  return {
    code: grpc.status.INTERNAL,
    details: messageOf(error),
    metadata: meta({ 'allocnet-error': isCniError(error) ? 'cni' : 'internal', ...extra }),
  };
}

/** The status's name, as logs and the failure metric show it (`INVALID_ARGUMENT`). */
export function statusName(code: grpc.status): string {
  return grpc.status[code];
}
