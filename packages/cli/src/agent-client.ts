// The gRPC side of a call to the agent: grpc-js and the contract's clients, loaded by
// with-agent.ts only once the flags are checked and the agent's socket answers a connect.
import * as grpc from '@grpc/grpc-js';
import { messageOf } from '@allocnet/base';
import {
  createAllocNetworkClient,
  createOperatorClient,
  isServiceError,
  kindOfStatus,
  unary,
} from '@allocnet/proto/client';
import type {
  AllocNetworkServiceClient,
  OperatorServiceClient,
  UnaryMethod,
  UnaryRequest,
  UnaryResponse,
} from '@allocnet/proto/client';
import type { ConnectionSettings } from './connect-options.js';
import { probeConnect } from './connect-probe.js';
import type { ConnectProbe } from './connect-probe.js';
import { CliError, unreachableError } from './errors.js';

export interface AgentConnection {
  /** As the user wrote it (`--address`, `--node`). */
  readonly address: string;
  /** The grpc target (`agentTarget`). */
  readonly target: string;
  readonly alloc: AllocNetworkServiceClient;
  readonly operator: OperatorServiceClient;
  readonly metadata: grpc.Metadata;
  readonly deadlineMs: number;
  /** Calls a unary method of `client` with this connection's deadline and metadata (the token). */
  unary<C extends grpc.Client, M extends UnaryMethod<C>>(
    client: C,
    method: M,
    request: UnaryRequest<C, M>,
  ): Promise<UnaryResponse<C, M>>;
  close(): void;
}

/** Opens clients to the agent; a unix socket needs no credentials, TCP needs TLS files. */
export function connect(settings: ConnectionSettings): AgentConnection {
  const { tls } = settings;
  const credentials =
    tls === undefined
      ? grpc.credentials.createInsecure()
      : grpc.credentials.createSsl(tls.ca, tls.key, tls.cert);
  const metadata = new grpc.Metadata();
  if (settings.token !== undefined) metadata.set('authorization', `Bearer ${settings.token}`);
  const alloc = createAllocNetworkClient(settings.target, credentials);
  const operator = createOperatorClient(settings.target, credentials);
  const { deadlineMs } = settings;
  return {
    address: settings.address,
    target: settings.target,
    alloc,
    operator,
    metadata,
    deadlineMs,
    unary: (client, method, request) => unary(client, method, request, { deadlineMs, metadata }),
    close() {
      alloc.close();
      operator.close();
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
  const refused = error.code === grpc.status.UNAVAILABLE ? await probe(agent.target) : undefined;
  if (refused !== undefined) return unreachableError(agent.address, refused, error);
  const name = (grpc.status[error.code] as string | undefined) ?? String(error.code);
  return new CliError(`agent ${agent.address}: ${name}: ${error.details}`, {
    code: 'agent-call',
    kind: kindOfStatus(error.code) ?? 'internal',
    grpcStatus: error.code,
    cause: error,
  });
}
