import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { DEFAULTS } from '@allocnet/agent';
import { messageOf } from '@allocnet/base';
import type { Command } from 'commander';
import { Option } from 'commander';
import {
  agentTarget,
  createAllocNetworkClient,
  createOperatorClient,
  isProtoError,
  isServiceError,
  kindOfStatus,
} from '@allocnet/proto';
import type {
  AllocNetworkServiceClient,
  OperatorServiceClient,
  UnaryOptions,
} from '@allocnet/proto';
import { probeConnect } from './connect-probe.js';
import type { ConnectProbe } from './connect-probe.js';
import { CliError, isCliError, usageError } from './errors.js';

/** The agent's socket when none is given: the agent's own default. */
export const DEFAULT_AGENT_ADDRESS = DEFAULTS.socket;

/** How to reach an agent: `--address`, TLS files for TCP, an operator token, a deadline. */
export interface ConnectOptions {
  readonly address: string;
  readonly tlsCa?: string;
  readonly tlsCert?: string;
  readonly tlsKey?: string;
  readonly tokenFile?: string;
  readonly timeout: string;
}

/** `--address`, the TLS files, the token and the deadline. */
export function connectOptions(command: Command): Command {
  return securityOptions(
    command.addOption(
      new Option('--address <addr>', 'the agent: a socket path, unix:<path> or host:port')
        .env('ALLOCNET_ADDRESS')
        .default(DEFAULT_AGENT_ADDRESS),
    ),
  );
}

/** The TLS files, the token and the deadline (for commands that take their addresses otherwise). */
export function securityOptions(command: Command): Command {
  return command
    .addOption(new Option('--tls-ca <file>', 'CA that signed the agent’s certificate (TCP)'))
    .addOption(new Option('--tls-cert <file>', 'client certificate (TCP)'))
    .addOption(new Option('--tls-key <file>', 'client key (TCP)'))
    .addOption(new Option('--token-file <file>', 'operator token, sent as a bearer token (TCP)'))
    .addOption(new Option('--timeout <ms>', 'deadline of each call').default('120000'));
}

function readFile(flag: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (error) {
    throw usageError(`${flag} ${JSON.stringify(file)} cannot be read: ${messageOf(error)}`, error);
  }
}

export interface AgentConnection {
  /** As the user wrote it (`--address`, `--node`). */
  readonly address: string;
  /** The grpc target (`agentTarget`). */
  readonly target: string;
  readonly alloc: AllocNetworkServiceClient;
  readonly operator: OperatorServiceClient;
  readonly metadata: grpc.Metadata;
  readonly deadlineMs: number;
  close(): void;
}

/** Opens clients to the agent; a unix socket needs no credentials, TCP needs TLS files. */
export function connect(options: ConnectOptions): AgentConnection {
  let target: string;
  try {
    target = agentTarget(options.address);
  } catch (error) {
    if (!isProtoError(error)) throw error;
    throw usageError(`--address: ${error.message}`, error);
  }
  const deadlineMs = Number(options.timeout);
  if (!Number.isInteger(deadlineMs) || deadlineMs < 1)
    throw usageError(
      `--timeout ${JSON.stringify(options.timeout)} is not a whole number of milliseconds`,
    );
  const unix = target.startsWith('unix:');
  let credentials: grpc.ChannelCredentials;
  if (unix) credentials = grpc.credentials.createInsecure();
  else {
    if (options.tlsCa === undefined)
      throw usageError(
        `--tls-ca is needed to reach ${options.address} over TCP (the agent only serves TCP with TLS)`,
      );
    if ((options.tlsCert === undefined) !== (options.tlsKey === undefined))
      throw usageError('--tls-cert and --tls-key go together');
    credentials = grpc.credentials.createSsl(
      readFile('--tls-ca', options.tlsCa),
      options.tlsKey === undefined ? null : readFile('--tls-key', options.tlsKey),
      options.tlsCert === undefined ? null : readFile('--tls-cert', options.tlsCert),
    );
  }
  const metadata = new grpc.Metadata();
  if (options.tokenFile !== undefined)
    metadata.set(
      'authorization',
      `Bearer ${readFile('--token-file', options.tokenFile).toString('utf8').trim()}`,
    );
  const alloc = createAllocNetworkClient(target, credentials);
  const operator = createOperatorClient(target, credentials);
  return {
    address: options.address,
    target,
    alloc,
    operator,
    metadata,
    deadlineMs,
    close() {
      alloc.close();
      operator.close();
    },
  };
}

/**
 * A failed call as one line: `agent <address>: <STATUS>: <details>`. A call that never reached
 * the agent (UNAVAILABLE, and a connect to its address fails now: `probe`) says why and what to
 * do instead of grpc's details. The kind is the agent's, read back from the status
 * (`kindOfStatus`, @allocnet/proto's one table); a call without an answer is `internal`.
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
  const name = (grpc.status[error.code] as string | undefined) ?? String(error.code);
  const refused = error.code === grpc.status.UNAVAILABLE ? await probe(agent.target) : undefined;
  const details =
    refused === undefined
      ? error.details
      : `cannot connect (${refused}); is the agent running? start it with \`allocnet agent\`, or pass --address`;
  return new CliError(`agent ${agent.address}: ${name}: ${details}`, {
    code: 'agent-call',
    kind: kindOfStatus(error.code) ?? 'internal',
    grpcStatus: error.code,
    cause: error,
  });
}

/** Runs `fn` with a connection, turning a failed call into one line and closing the clients. */
export async function withAgent<T>(
  options: ConnectOptions,
  fn: (agent: AgentConnection) => Promise<T>,
): Promise<T> {
  const agent = connect(options);
  try {
    return await fn(agent);
  } catch (error) {
    if (isCliError(error)) throw error;
    throw await callError(agent, error);
  } finally {
    agent.close();
  }
}

/** A unary call's deadline and metadata (the token) on `agent`. */
export function call(agent: AgentConnection): UnaryOptions {
  return { deadlineMs: agent.deadlineMs, metadata: agent.metadata };
}
