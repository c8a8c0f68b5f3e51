// The files the TCP listener needs: its TLS certificate, key and client CA, and the operator
// token. They are read before anything is opened, so that what an operator must fix is
// reported first (`invalid-config`, naming the key).
import { readFile, stat } from 'node:fs/promises';
import type { TcpConfig } from './config.js';
import { AgentError, messageOf } from './errors.js';

export interface TlsFiles {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly clientCa: Buffer;
}

function unreadable(field: string, file: string, error: unknown): AgentError {
  return new AgentError(
    `config: ${field} ${JSON.stringify(file)} cannot be read: ${messageOf(error)}`,
    { code: 'invalid-config', field, cause: error },
  );
}

async function readSecretFile(field: string, file: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (error) {
    throw unreadable(field, file, error);
  }
}

/** The TLS files of `tcp.tls`, or undefined without TLS. */
export async function readTlsFiles(tcp: TcpConfig | undefined): Promise<TlsFiles | undefined> {
  if (tcp?.tls === undefined) return undefined;
  return {
    cert: await readSecretFile('tcp.tls.cert', tcp.tls.cert),
    key: await readSecretFile('tcp.tls.key', tcp.tls.key),
    clientCa: await readSecretFile('tcp.tls.clientCa', tcp.tls.clientCa),
  };
}

/** The operator token: the file's first line; refused when others may read it or it is short. */
export async function readOperatorToken(file: string): Promise<string> {
  const field = 'tcp.operatorTokenFile';
  let mode: number;
  try {
    mode = (await stat(file)).mode;
  } catch (error) {
    throw unreadable(field, file, error);
  }
  if ((mode & 0o077) !== 0)
    throw new AgentError(
      `config: ${field} ${JSON.stringify(file)} may be read by other users (mode ${(mode & 0o777).toString(8).padStart(4, '0')}); chmod 600 it`,
      { code: 'invalid-config', field },
    );
  const token = (await readSecretFile(field, file)).toString('utf8').split('\n')[0]?.trim() ?? '';
  if (token.length < 16)
    throw new AgentError(
      `config: ${field} ${JSON.stringify(file)} holds a token of ${token.length} characters; use at least 16 random characters`,
      { code: 'invalid-config', field },
    );
  return token;
}
