import { renderProblem } from '@allocnet/base';
import type { ContractError, ErrorKind, FieldPath, Problem } from '@allocnet/base';

export { messageOf, show } from '@allocnet/base';

/**
 * What went wrong in the agent itself (the runner's and configurator's errors keep their own
 * types; every kind is mapped to a gRPC status in status.ts):
 * - `invalid-config`: a configuration key is wrong; `field` names it (`cni.timeoutMs`), `source`
 *   says where the value came from (`file /etc/allocnet/agent.yaml`, `env ALLOCNET_SOCKET`,
 *   `flag --data-dir`);
 * - `invalid-request`: a gRPC request refused before anything ran; `field` names it with the
 *   .proto field names (`ports[1].value`);
 * - `not-found`: a request names an allocation the agent does not know;
 * - `socket-in-use`: another process answers on the unix socket;
 * - `data-dir-in-use`: another agent holds the data dir's lock (`<dataDir>/agent.lock`); the
 *   message names its pid and sockets when it wrote them;
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
  | 'data-dir-in-use'
  | 'listen-failed'
  | 'start-failed'
  | 'dev-failed'
  | 'encode-failed'
  | 'aborted';

/** What callers act on (see @allocnet/base), by code. */
const KINDS: Readonly<Record<AgentErrorCode, ErrorKind>> = {
  // A bad configuration is the operator's input to `allocnet agent`, and no RPC's: the RPC that
  // meets one (ReloadConfig) reports it as the agent's own failure.
  'invalid-config': 'internal',
  'invalid-request': 'invalid',
  'not-found': 'not-found',
  'socket-in-use': 'conflict',
  'data-dir-in-use': 'conflict',
  'listen-failed': 'internal',
  'start-failed': 'internal',
  'dev-failed': 'internal',
  'encode-failed': 'internal',
  aborted: 'aborted',
};

export interface AgentErrorDetails {
  readonly code: AgentErrorCode;
  /** The configuration key or request field as its source spells it (`cni.timeoutMs`, `alloc_id`). */
  readonly field?: string;
  /** For `invalid-request`: the request field (`['ports', 1, 'value']`) and what is wrong. */
  readonly path?: FieldPath;
  readonly problem?: Problem;
  /** For `invalid-config`: where the value came from. */
  readonly source?: string;
  readonly cause?: unknown;
}

const BRAND = Symbol.for('@allocnet/agent.AgentError');

/**
 * The one error type of this package. Its message puts the context first and quotes values:
 * `config: socket "run/agent.sock" is not an absolute path (flag --socket)`.
 */
export class AgentError extends Error implements ContractError {
  readonly code: AgentErrorCode;
  readonly kind: ErrorKind;
  readonly field: string | undefined;
  readonly path: FieldPath | undefined;
  readonly problem: Problem | undefined;
  /** Messages here name no field outside `field`/`problem`. */
  readonly parts: Problem | undefined = undefined;
  readonly source: string | undefined;
  readonly [BRAND] = true;

  constructor(message: string, details: AgentErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'AgentError';
    this.code = details.code;
    this.kind = KINDS[details.code];
    this.field = details.field;
    this.path = details.path;
    this.problem = details.problem;
    this.source = details.source;
  }
}

/** True for an `AgentError`, also one from another copy of this package. */
export function isAgentError(value: unknown): value is AgentError {
  return typeof value === 'object' && value !== null && BRAND in value;
}

/**
 * An `invalid-request` error: `<field> <problem>`, the field in the .proto's spelling given by
 * `spell` (status.ts `protoField`); `cause`, a library's error it restates (its code stays the
 * `allocnet-error` a client sees).
 */
export function invalidRequest(
  path: FieldPath,
  problem: Problem,
  spell: (path: FieldPath) => string,
  cause?: unknown,
): AgentError {
  const field = spell(path);
  return new AgentError(`${field} ${renderProblem(problem, spell)}`, {
    code: 'invalid-request',
    field,
    path,
    problem,
    ...(cause === undefined ? {} : { cause }),
  });
}

/** Throws `aborted` once the start's signal has aborted. */
export function checkNotAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted === true)
    throw new AgentError('the agent was stopped while it was starting', { code: 'aborted' });
}
