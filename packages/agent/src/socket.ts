// The agent's unix socket, made safely: its directory is created 0700; a path held by a live
// agent is refused; a stale socket (nobody answers) is replaced; a symlink or any other file is
// refused (lstat: links are never followed). The socket is bound under a temporary name in the
// same directory, made 0600, then renamed over the path, so that nobody can ever connect to it
// before its mode is right, and the path never points at nothing while a stale socket is replaced.
import { createConnection } from 'node:net';
import { chmod, lstat, mkdir, readdir, rename, stat, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { MAX_SOCKET_PATH_BYTES } from './config-codec.js';
import { AgentError, messageOf } from './errors.js';
import type { AgentLogger } from './logging.js';

/** What answers on a socket path: a listener, nobody (a stale socket file), or no file at all. */
export type SocketState = 'listening' | 'stale' | 'absent' | 'silent';

function code(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/**
 * Connects to the socket at `path` to see whether something listens there: `listening`, `stale`
 * (ECONNREFUSED: a socket file nobody listens on), `absent`, or `silent` (no answer within
 * `timeoutMs`: a listener too busy to accept, which counts as alive).
 */
export function probeSocket(path: string, timeoutMs = 1000): Promise<SocketState> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ path });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve('silent');
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.destroy();
      resolve('listening');
    });
    socket.once('error', (error) => {
      clearTimeout(timer);
      const c = code(error);
      if (c === 'ECONNREFUSED') resolve('stale');
      else if (c === 'ENOENT') resolve('absent');
      else
        reject(
          new AgentError(
            `cannot connect to ${JSON.stringify(path)} to see whether another agent listens there: ${messageOf(error)}`,
            {
              code: 'listen-failed',
              cause: error,
            },
          ),
        );
    });
  });
}

/** The socket's directory: made 0700 when missing; a directory others may write to is reported. */
async function prepareDirectory(path: string, logger: AgentLogger): Promise<void> {
  const dir = dirname(path);
  try {
    const st = await stat(dir);
    if (!st.isDirectory())
      throw new AgentError(`the socket's directory ${JSON.stringify(dir)} is not a directory`, {
        code: 'listen-failed',
      });
    // A world-writable directory without the sticky bit lets anyone replace the socket.
    if ((st.mode & 0o002) !== 0 && (st.mode & 0o1000) === 0)
      logger.warn(
        'the socket directory is writable by every user; use a directory only root can write',
        {
          dir,
          mode: (st.mode & 0o7777).toString(8),
        },
      );
  } catch (error) {
    if (code(error) !== 'ENOENT') throw error;
    await mkdir(dir, { recursive: true, mode: 0o700 });
    // mkdir's mode passes through the umask; the directory must be 0700 whatever it is.
    await chmod(dir, 0o700);
  }
}

/** Makes `path` free to bind: refuses a live socket, a link, or another file; removes a stale socket. */
export async function claimSocketPath(path: string, logger: AgentLogger): Promise<void> {
  let st;
  try {
    st = await lstat(path);
  } catch (error) {
    if (code(error) === 'ENOENT') return;
    throw error;
  }
  if (st.isSymbolicLink())
    throw new AgentError(
      `${JSON.stringify(path)} is a symbolic link; the agent does not follow links for its socket`,
      { code: 'listen-failed' },
    );
  if (!st.isSocket())
    throw new AgentError(
      `${JSON.stringify(path)} exists and is not a socket; remove it or pick another path`,
      {
        code: 'listen-failed',
      },
    );
  const state = await probeSocket(path);
  if (state === 'listening' || state === 'silent')
    throw new AgentError(
      `another agent is listening on ${JSON.stringify(path)}${state === 'silent' ? ' (it accepts no connection, but does not refuse one either)' : ''}; stop it first, or give this agent another socket and data dir`,
      { code: 'socket-in-use' },
    );
  if (state === 'stale') {
    try {
      await unlink(path);
      logger.info('removed a stale socket that nobody listened on', { socket: path });
    } catch (error) {
      if (code(error) !== 'ENOENT') throw error;
    }
  }
}

/**
 * Temporary sockets (`.<name>.<pid>`) that an agent which died between its bind and its rename
 * left: removed when nobody answers on them (an agent starting right now answers).
 */
async function removeStaleTemporaries(path: string, logger: AgentLogger): Promise<void> {
  const dir = dirname(path);
  const pattern = new RegExp(
    `^\\.${basename(path).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\.[0-9]+$`,
  );
  for (const name of await readdir(dir)) {
    if (!pattern.test(name)) continue;
    const file = join(dir, name);
    try {
      if (!(await lstat(file)).isSocket()) continue;
      if ((await probeSocket(file)) !== 'stale') continue;
      await unlink(file);
      logger.info('removed a temporary socket a stopped agent left', { socket: file });
    } catch (error) {
      // Gone meanwhile (another agent renamed or removed it): nothing to do.
      if (code(error) !== 'ENOENT') throw error;
    }
  }
}

export interface BoundSocket {
  readonly path: string;
  /** Removes the socket file if it is still the one this agent bound (not a later agent's). */
  release(): Promise<void>;
}

/**
 * Binds a unix socket at `path` with `bind` (which listens on the address it is given, e.g. a
 * grpc server's bindAsync on `unix:<address>`), 0600, its directory 0700, safely (see above).
 */
export async function bindUnixSocket(
  path: string,
  bind: (address: string) => Promise<void>,
  logger: AgentLogger,
): Promise<BoundSocket> {
  await prepareDirectory(path, logger);
  await claimSocketPath(path, logger);
  const temp = join(dirname(path), `.${basename(path)}.${process.pid}`);
  // A temporary name that does not fit a sockaddr is skipped: bind at the path itself.
  const direct = Buffer.byteLength(temp) > MAX_SOCKET_PATH_BYTES;
  const at = direct ? path : temp;
  await removeStaleTemporaries(path, logger);
  try {
    await bind(at);
  } catch (error) {
    throw new AgentError(`cannot listen on ${JSON.stringify(path)}: ${messageOf(error)}`, {
      code: 'listen-failed',
      cause: error,
    });
  }
  await chmod(at, 0o600);
  if (!direct) {
    // Another agent may have bound the path since it was claimed: claim it again, then move in.
    try {
      await claimSocketPath(path, logger);
      await rename(temp, path);
    } catch (error) {
      await unlink(temp).catch((unlinkError: unknown) => {
        // The caller shuts the listener down, which removes the name too; report only oddities.
        if (code(unlinkError) !== 'ENOENT')
          logger.warn('removing the temporary socket failed', {
            socket: temp,
            error: messageOf(unlinkError),
          });
      });
      throw error;
    }
  }
  // Which file is ours, for release: inode numbers alone are reused at once on tmpfs (/run), so
  // the change and birth times (nanoseconds) are compared too.
  const bound = await lstat(path, { bigint: true });
  const same = (a: typeof bound, b: typeof bound) =>
    a.dev === b.dev &&
    a.ino === b.ino &&
    a.ctimeNs === b.ctimeNs &&
    a.birthtimeNs === b.birthtimeNs;
  return {
    path,
    async release() {
      try {
        if (same(await lstat(path, { bigint: true }), bound)) await unlink(path);
      } catch (error) {
        if (code(error) !== 'ENOENT') throw error;
      }
    },
  };
}
