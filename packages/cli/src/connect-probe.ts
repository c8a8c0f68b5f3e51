// Why a call got no answer, as a fact rather than read from the call's text: a call that fails
// UNAVAILABLE either never reached the agent or was answered UNAVAILABLE by it. The CLI connects
// to the same address once more, alone: the socket or port refusing it (ENOENT, ECONNREFUSED,
// EACCES, …) is what helps the person at the terminal; a connect that works means the agent
// answered (or TLS failed), and grpc's own details say more.
import { createConnection } from 'node:net';
import type { NetConnectOpts } from 'node:net';

/** How long a probe of a TCP address may take; a unix socket answers at once. */
export const PROBE_TIMEOUT_MS = 3000;

/** The socket path or host and port of a target as `agentTarget` writes it. */
export function probeAddress(target: string): NetConnectOpts {
  if (target.startsWith('unix:')) {
    const rest = target.slice('unix:'.length);
    return { path: rest.startsWith('//') ? rest.slice(2) : rest };
  }
  const colon = target.lastIndexOf(':');
  const host = target.slice(0, colon);
  return {
    host: host.startsWith('[') ? host.slice(1, -1) : host,
    port: Number(target.slice(colon + 1)),
  };
}

/** A connect's errno code (`ENOENT`, `ECONNREFUSED`, …), or undefined when it connected. */
export type ConnectProbe = (target: string) => Promise<string | undefined>;

/**
 * Connects to `target` and closes at once: the errno code of a failed connect(2), or undefined
 * when it connected, timed out or failed before connecting (a name that does not resolve).
 */
export const probeConnect: ConnectProbe = (target) =>
  new Promise((resolve) => {
    const socket = createConnection({ ...probeAddress(target), timeout: PROBE_TIMEOUT_MS });
    const done = (code: string | undefined) => {
      socket.destroy();
      resolve(code);
    };
    socket.once('connect', () => {
      done(undefined);
    });
    socket.once('timeout', () => {
      done(undefined);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => {
      done(error.syscall === 'connect' ? error.code : undefined);
    });
  });
