// The gRPC side of a call to the agent: the contract's methods over node:http2
// (@allocnet/proto/call, no grpc-js), loaded by with-agent.ts only once the flags are checked and
// the agent's socket answers a connect.
import { messageOf } from '@allocnet/base';
import {
  ALLOC_NETWORK,
  OPERATOR,
  isServiceError,
  kindOfStatus,
  openChannel,
  statusName,
} from '@allocnet/proto/call';
import type { Channel } from '@allocnet/proto/call';
import type { ConnectionSettings } from './connect-options.js';
import { probeConnect } from './connect-probe.js';
import type { ConnectProbe } from './connect-probe.js';
import { CliError, GRPC_UNAVAILABLE, unreachableError } from './errors.js';

export interface AgentConnection {
  /** As the user wrote it (`--address`, `--node`). */
  readonly address: string;
  /** The grpc target (`agentTarget`). */
  readonly target: string;
  readonly alloc: typeof ALLOC_NETWORK;
  readonly operator: typeof OPERATOR;
  readonly deadlineMs: number;
  /** Calls a unary method with this connection's deadline (unless given) and metadata (the token). */
  readonly unary: Channel['unary'];
  /** Calls a unary method the same way, its answer read through a view (only the view's fields). */
  readonly unaryView: Channel['unaryView'];
  /** Calls a server-streaming method the same way, each message to `onMessage`. */
  readonly serverStream: Channel['serverStream'];
  close(): void;
}

/** Opens a connection to the agent; a unix socket needs no credentials, TCP needs TLS files. */
export function connect(settings: ConnectionSettings): AgentConnection {
  const { deadlineMs, tls, token } = settings;
  const channel = openChannel(settings.target, {
    ...(tls === undefined ? {} : { tls }),
    ...(token === undefined ? {} : { metadata: { authorization: `Bearer ${token}` } }),
  });
  return {
    address: settings.address,
    target: settings.target,
    alloc: ALLOC_NETWORK,
    operator: OPERATOR,
    deadlineMs,
    unary: (service, method, request, options) =>
      channel.unary(service, method, request, { deadlineMs, ...options }),
    unaryView: (view, request, options) =>
      channel.unaryView(view, request, { deadlineMs, ...options }),
    serverStream: (service, method, request, onMessage, options) =>
      channel.serverStream(service, method, request, onMessage, { deadlineMs, ...options }),
    close() {
      channel.close();
    },
  };
}

/**
 * A failed call as one line: `agent <address>: <STATUS>: <details>`. A call that never reached
 * the agent (UNAVAILABLE, and a connect to its address fails now: `probe`) says why and what to
 * do instead of grpc's details (`unreachableError`). The kind is the agent's, read back from the
 * status (`kindOfStatus`, @allocnet/proto's one table); a call without an answer is `internal`.
 */
export async function callError(
  agent: Pick<AgentConnection, 'address' | 'target'>,
  error: unknown,
  probe: ConnectProbe = probeConnect,
): Promise<CliError> {
  if (!isServiceError(error))
    return new CliError(`agent ${agent.address}: ${messageOf(error)}`, {
      code: 'agent-call',
      cause: error,
    });
  const refused = error.code === GRPC_UNAVAILABLE ? await probe(agent.target) : undefined;
  if (refused !== undefined) return unreachableError(agent.address, refused, error);
  return new CliError(`agent ${agent.address}: ${statusName(error.code)}: ${error.details}`, {
    code: 'agent-call',
    kind: kindOfStatus(error.code) ?? 'internal',
    grpcStatus: error.code,
    cause: error,
  });
}
