// How a command reaches an agent, as flags and as checked settings: no gRPC here (the flags are
// part of every command's definition, and a bad flag is refused before the client is loaded).
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { Option } from 'commander';
import { DEFAULTS } from '@allocnet/agent/defaults';
import { messageOf } from '@allocnet/base';
import { agentTarget, isProtoError } from '@allocnet/proto/target';
import { usageError } from './errors.js';

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

/** The flags checked and the files read: everything a connection needs but grpc. */
export interface ConnectionSettings {
  /** As the user wrote it (`--address`, `--node`). */
  readonly address: string;
  /** The grpc target (`agentTarget`). */
  readonly target: string;
  readonly deadlineMs: number;
  /** For TCP: the CA, and the client's key and certificate when given (both or neither). */
  readonly tls?: { readonly ca: Buffer; readonly key: Buffer | null; readonly cert: Buffer | null };
  /** The operator token, trimmed. */
  readonly token?: string;
}

function readFile(flag: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (error) {
    throw usageError(`${flag} ${JSON.stringify(file)} cannot be read: ${messageOf(error)}`, error);
  }
}

/**
 * Checks the flags and reads their files, in this order: the address, the deadline, TLS (TCP
 * only: a unix socket needs no credentials), the token. Anything wrong is a usage error naming
 * its flag.
 */
export function connectionSettings(options: ConnectOptions): ConnectionSettings {
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
  let tls: ConnectionSettings['tls'];
  if (!target.startsWith('unix:')) {
    if (options.tlsCa === undefined)
      throw usageError(
        `--tls-ca is needed to reach ${options.address} over TCP (the agent only serves TCP with TLS)`,
      );
    if ((options.tlsCert === undefined) !== (options.tlsKey === undefined))
      throw usageError('--tls-cert and --tls-key go together');
    tls = {
      ca: readFile('--tls-ca', options.tlsCa),
      key: options.tlsKey === undefined ? null : readFile('--tls-key', options.tlsKey),
      cert: options.tlsCert === undefined ? null : readFile('--tls-cert', options.tlsCert),
    };
  }
  const token =
    options.tokenFile === undefined
      ? undefined
      : readFile('--token-file', options.tokenFile).toString('utf8').trim();
  return {
    address: options.address,
    target,
    deadlineMs,
    ...(tls === undefined ? {} : { tls }),
    ...(token === undefined ? {} : { token }),
  };
}
