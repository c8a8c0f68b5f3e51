/**
 * What went wrong in the agent itself (the runner's and configurator's errors keep their own
 * types and are mapped to gRPC statuses in status.ts):
 * - `invalid-config`: a configuration key is wrong; `field` names it (`cni.timeoutMs`), `source`
 *   says where the value came from (`file /etc/allocnet/agent.yaml`, `env ALLOCNET_SOCKET`,
 *   `flag --data-dir`);
 * - `invalid-request`: a gRPC request refused before anything ran; `field` names it with the
 *   .proto field names (`ports[1].value`);
 * - `not-found`: a request names an allocation the agent does not know;
 * - `socket-in-use`: another process answers on the unix socket;
 * - `listen-failed`: a listener (unix socket, TCP, metrics) could not be opened;
 * - `start-failed`: the runner, the configurator or the state store could not be opened;
 * - `dev-failed`: `--dev` could not make or remove its sandbox;
 * - `aborted`: the start was aborted (a signal arrived while the agent was starting).
 */
export type AgentErrorCode =
  | 'invalid-config'
  | 'invalid-request'
  | 'not-found'
  | 'socket-in-use'
  | 'listen-failed'
  | 'start-failed'
  | 'dev-failed'
  | 'aborted';

export interface AgentErrorDetails {
  readonly code: AgentErrorCode;
  /** The configuration key or request field, as a path. */
  readonly field?: string;
  /** For `invalid-config`: where the value came from. */
  readonly source?: string;
  readonly cause?: unknown;
}

const BRAND = Symbol.for('@allocnet/agent.AgentError');

/**
 * The one error type of this package. Its message puts the context first and quotes values:
 * `config: socket "run/agent.sock" is not an absolute path (flag --socket)`.
 */
export class AgentError extends Error {
  readonly code: AgentErrorCode;
  readonly field: string | undefined;
  readonly source: string | undefined;
  readonly [BRAND] = true;

  constructor(message: string, details: AgentErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'AgentError';
    this.code = details.code;
    this.field = details.field;
    this.source = details.source;
  }
}

/** True for an `AgentError`, also one from another copy of this package. */
export function isAgentError(value: unknown): value is AgentError {
  return typeof value === 'object' && value !== null && BRAND in value;
}

/** The message of anything thrown, for logs and statuses. */
export function messageOf(error: unknown): string {
  // Not `instanceof Error`: errors from another realm (node:fs under jest's vm) are objects too.
  if (typeof error === 'object' && error !== null && typeof (error as Error).message === 'string')
    return (error as Error).message;
  if (typeof error === 'string') return error;
  const json = JSON.stringify(error) as string | undefined;
  return json ?? String(error);
}

/** A value as messages quote it: JSON, cut at 80 characters. */
export function show(value: unknown): string {
  if (value === undefined) return 'nothing';
  // JSON.stringify gives undefined for functions and symbols: name the type instead.
  const text = (JSON.stringify(value) as string | undefined) ?? `<${typeof value}>`;
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
