import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { DEFAULTS } from '@allocnet/agent';
import type { ErrorKind } from '@allocnet/base';
import type { Command } from 'commander';
import { Option } from 'commander';
import {
  agentTarget,
  createAllocNetworkClient,
  createOperatorClient,
  isServiceError,
} from '@allocnet/proto';
import type { AllocNetworkServiceClient, OperatorServiceClient } from '@allocnet/proto';
import { UsageError } from './errors.js';

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
    throw new UsageError(
      `${flag} ${JSON.stringify(file)} cannot be read: ${(error as Error).message}`,
    );
  }
}

export interface AgentConnection {
  readonly address: string;
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
    throw new UsageError(`--address: ${(error as Error).message}`);
  }
  const deadlineMs = Number(options.timeout);
  if (!Number.isInteger(deadlineMs) || deadlineMs < 1)
    throw new UsageError(
      `--timeout ${JSON.stringify(options.timeout)} is not a whole number of milliseconds`,
    );
  const unix = target.startsWith('unix:');
  let credentials: grpc.ChannelCredentials;
  if (unix) credentials = grpc.credentials.createInsecure();
  else {
    if (options.tlsCa === undefined)
      throw new UsageError(
        `--tls-ca is needed to reach ${options.address} over TCP (the agent only serves TCP with TLS)`,
      );
    if ((options.tlsCert === undefined) !== (options.tlsKey === undefined))
      throw new UsageError('--tls-cert and --tls-key go together');
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

/** A failed call as one line: `<agent>: <CODE>: <details>`. */
/** The kind (@allocnet/base) of an agent's answer, by its status: the agent's table, read back. */
const STATUS_KIND: Readonly<Partial<Record<grpc.status, ErrorKind>>> = {
  [grpc.status.INVALID_ARGUMENT]: 'invalid',
  [grpc.status.NOT_FOUND]: 'not-found',
  [grpc.status.FAILED_PRECONDITION]: 'conflict',
  [grpc.status.UNAVAILABLE]: 'unavailable',
  [grpc.status.RESOURCE_EXHAUSTED]: 'exhausted',
  [grpc.status.CANCELLED]: 'aborted',
  [grpc.status.DEADLINE_EXCEEDED]: 'aborted',
};

/** A call to an agent that failed: the agent's status (or none: the call never got an answer). */
export class AgentCallError extends Error {
  readonly kind: ErrorKind;

  constructor(
    message: string,
    readonly code: grpc.status | undefined,
  ) {
    super(message);
    this.name = 'AgentCallError';
    this.kind = (code === undefined ? undefined : STATUS_KIND[code]) ?? 'internal';
  }
}

export function callError(address: string, error: unknown): AgentCallError {
  if (isServiceError(error)) {
    const name = grpc.status[error.code] as string | undefined;
    // grpc-js wraps a failed connect as "No connection established. Last error: Error: connect
    // ENOENT /path. Resolution note: …": the connect error is what helps.
    const connectFailure = /connect (E[A-Z]+) ([^\s.]+(?:\.[^\s.]+)*)/.exec(error.details);
    const details =
      error.code === grpc.status.UNAVAILABLE && connectFailure !== null
        ? `cannot connect (${connectFailure[1] ?? ''}); is the agent running? start it with \`allocnet agent\`, or pass --address`
        : error.details;
    return new AgentCallError(`agent ${address}: ${name ?? error.code}: ${details}`, error.code);
  }
  return new AgentCallError(
    `agent ${address}: ${error instanceof Error ? error.message : String(error)}`,
    undefined,
  );
}
