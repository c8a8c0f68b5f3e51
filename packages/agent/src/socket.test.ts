import { createServer } from 'node:net';
import type { Server } from 'node:net';
import { link, lstat, mkdir, readdir, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tempDir } from '@allocnet/cni/testing';
import { isAgentError } from './errors.js';
import { silentAgentLogger } from './logging.js';
import type { AgentLogger } from './logging.js';
import { bindUnixSocket, claimSocketPath, probeSocket } from './socket.js';

let tmp: Awaited<ReturnType<typeof tempDir>>;
const servers: Server[] = [];
const infos: Record<string, unknown>[] = [];
const logger: AgentLogger = { ...silentAgentLogger, info: (_m, meta) => infos.push(meta ?? {}) };

beforeEach(async () => {
  tmp = await tempDir('allocnet-agent-socket-');
  infos.length = 0;
});

afterEach(async () => {
  await Promise.all(
    servers.splice(0).map(
      (s) =>
        new Promise<void>((resolve) =>
          s.close(() => {
            resolve();
          }),
        ),
    ),
  );
  await tmp.remove();
});

/** A plain net server as the `bind` of bindUnixSocket (a grpc server's bindAsync in the agent). */
function listen(address: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer((c) => c.end());
    servers.push(server);
    server.once('error', reject);
    server.listen(address, () => {
      resolve(server);
    });
  });
}

/** bindUnixSocket's `bind`, on a plain net server. */
async function bindWith(address: string): Promise<void> {
  await listen(address);
}

/** A socket file nobody listens on, as a listener that died without removing it leaves. */
async function staleSocket(path: string): Promise<void> {
  // Node removes the file it listened on when it closes; a hard link to it stays, unbound.
  const bound = `${path}.bound`;
  const server = await listen(bound);
  await link(bound, path);
  await new Promise<void>((resolve) =>
    server.close(() => {
      resolve();
    }),
  );
}

async function refusal(fn: () => Promise<unknown>): Promise<[string, string]> {
  try {
    await fn();
  } catch (error) {
    if (isAgentError(error)) return [error.code, error.message];
    throw error;
  }
  throw new Error('it was not refused');
}

describe('bindUnixSocket', () => {
  it('makes the directory 0700 and the socket 0600, and nothing else is left in the directory', async () => {
    const path = join(tmp.path, 'run', 'allocnet', 'agent.sock');
    const bound = await bindUnixSocket(path, bindWith, logger);
    expect((await stat(join(tmp.path, 'run', 'allocnet'))).mode & 0o7777).toBe(0o700);
    const st = await lstat(path);
    expect(st.isSocket()).toBe(true);
    expect(st.mode & 0o777).toBe(0o600);
    expect(await readdir(join(tmp.path, 'run', 'allocnet'))).toEqual(['agent.sock']);
    expect(await probeSocket(path)).toBe('listening');
    await bound.release();
    expect(await readdir(join(tmp.path, 'run', 'allocnet'))).toEqual([]);
  });

  it('replaces a stale socket', async () => {
    const path = join(tmp.path, 'agent.sock');
    await staleSocket(path);
    expect(await probeSocket(path)).toBe('stale');
    await bindUnixSocket(path, bindWith, logger);
    expect(await probeSocket(path)).toBe('listening');
    expect(infos).toEqual([{ socket: path }]);
  });

  it('removes temporary sockets a dead agent left, and leaves a live one alone', async () => {
    const path = join(tmp.path, 'agent.sock');
    await staleSocket(join(tmp.path, '.agent.sock.12345'));
    await listen(join(tmp.path, '.agent.sock.23456'));
    await bindUnixSocket(path, bindWith, logger);
    expect((await readdir(tmp.path)).sort()).toEqual(['.agent.sock.23456', 'agent.sock']);
    expect(infos).toEqual([{ socket: join(tmp.path, '.agent.sock.12345') }]);
  });

  it('refuses a socket another agent listens on, and leaves it alone', async () => {
    const path = join(tmp.path, 'agent.sock');
    await listen(path);
    const before = await lstat(path);
    expect(await refusal(() => bindUnixSocket(path, bindWith, logger))).toEqual([
      'socket-in-use',
      `another agent is listening on "${path}"; stop it first, or give this agent another socket and data dir`,
    ]);
    expect((await lstat(path)).ino).toBe(before.ino);
    expect(await probeSocket(path)).toBe('listening');
  });

  it('refuses a symlink and a regular file, without following or removing them', async () => {
    const target = join(tmp.path, 'elsewhere.sock');
    await staleSocket(target);
    const link = join(tmp.path, 'link.sock');
    await symlink(target, link);
    expect(await refusal(() => claimSocketPath(link, logger))).toEqual([
      'listen-failed',
      `"${link}" is a symbolic link; the agent does not follow links for its socket`,
    ]);
    const file = join(tmp.path, 'file.sock');
    await writeFile(file, 'data');
    expect(await refusal(() => claimSocketPath(file, logger))).toEqual([
      'listen-failed',
      `"${file}" exists and is not a socket; remove it or pick another path`,
    ]);
    expect((await lstat(link)).isSymbolicLink()).toBe(true);
    expect((await lstat(target)).isSocket()).toBe(true);
  });

  it('refuses a socket directory that is a file', async () => {
    await writeFile(join(tmp.path, 'notadir'), '');
    const path = join(tmp.path, 'notadir', 'agent.sock');
    expect(await refusal(() => bindUnixSocket(path, bindWith, logger))).toEqual([
      'listen-failed',
      `the socket's directory "${join(tmp.path, 'notadir')}" is not a directory`,
    ]);
  });

  it('does not remove a socket that a later agent bound at the path', async () => {
    const path = join(tmp.path, 'agent.sock');
    const first = await bindUnixSocket(path, bindWith, logger);
    // The first agent's listener dies: its socket file stays (it was bound under another name
    // and renamed), and a second agent replaces the stale socket.
    await new Promise<void>((resolve) =>
      servers[0]?.close(() => {
        resolve();
      }),
    );
    expect(await probeSocket(path)).toBe('stale');
    await bindUnixSocket(path, bindWith, logger);
    await first.release();
    expect(await probeSocket(path)).toBe('listening');
  });

  it('reports a failed bind as listen-failed', async () => {
    const path = join(tmp.path, 'agent.sock');
    await mkdir(tmp.path, { recursive: true });
    const [code, message] = await refusal(() =>
      bindUnixSocket(path, () => Promise.reject(new Error('EACCES: permission denied')), logger),
    );
    expect([code, message]).toEqual([
      'listen-failed',
      `cannot listen on "${path}": EACCES: permission denied`,
    ]);
  });
});

describe('probeSocket', () => {
  it('says absent for no file', async () => {
    expect(await probeSocket(join(tmp.path, 'none.sock'))).toBe('absent');
  });
});
