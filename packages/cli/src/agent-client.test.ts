// A failed call as one line: the connect probe decides, by a real connect, whether the agent
// could be reached; the message never comes from reading grpc-js's text.
import { writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import type { Server } from 'node:net';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { tempDir } from '@allocnet/cni/testing';
import { kindOfStatus } from '@allocnet/proto';
import { callError } from './agent-client.js';
import { probeAddress, probeConnect } from './connect-probe.js';
import { isCliError } from './errors.js';
import type { CliError } from './errors.js';
import { withAgent } from './with-agent.js';

function serviceError(code: grpc.status, details: string): grpc.ServiceError {
  return Object.assign(new Error(`${code} ${grpc.status[code]}: ${details}`), {
    code,
    details,
    metadata: new grpc.Metadata(),
  });
}

/** A probe that records the targets it was asked about and answers `answer`. */
function fakeProbe(answer: string | undefined) {
  const targets: string[] = [];
  return {
    targets,
    probe: (target: string) => {
      targets.push(target);
      return Promise.resolve(answer);
    },
  };
}

const AGENT = { address: '/run/allocnet/agent.sock', target: 'unix:///run/allocnet/agent.sock' };

describe('callError', () => {
  it('says how to start the agent when UNAVAILABLE and its socket refuses a connect', async () => {
    const fake = fakeProbe('ENOENT');
    const error = await callError(
      AGENT,
      serviceError(grpc.status.UNAVAILABLE, 'No connection established. Whatever it says.'),
      fake.probe,
    );
    expect(error.message).toBe(
      'agent /run/allocnet/agent.sock: UNAVAILABLE: cannot connect (ENOENT); is the agent running? start it with `allocnet agent`, or pass --address',
    );
    expect([error.code, error.kind, error.grpcStatus]).toEqual([
      'agent-call',
      'unavailable',
      grpc.status.UNAVAILABLE,
    ]);
    expect(fake.targets).toEqual(['unix:///run/allocnet/agent.sock']);
  });

  it("keeps the agent's own details when the address connects (the agent answered)", async () => {
    const fake = fakeProbe(undefined);
    const error = await callError(
      AGENT,
      serviceError(grpc.status.UNAVAILABLE, 'connect ENOENT /looks/like/a/connect/error'),
      fake.probe,
    );
    expect(error.message).toBe(
      'agent /run/allocnet/agent.sock: UNAVAILABLE: connect ENOENT /looks/like/a/connect/error',
    );
  });

  it('probes only for UNAVAILABLE; an answer without a status is internal', async () => {
    const fake = fakeProbe('ECONNREFUSED');
    const notFound = await callError(
      AGENT,
      serviceError(grpc.status.NOT_FOUND, 'allocation "a1" not found'),
      fake.probe,
    );
    expect([notFound.message, notFound.kind]).toEqual([
      'agent /run/allocnet/agent.sock: NOT_FOUND: allocation "a1" not found',
      'not-found',
    ]);
    const other = await callError(AGENT, new Error('the agent ended ReapLeaks without a summary'));
    expect([other.message, other.kind, other.grpcStatus]).toEqual([
      'agent /run/allocnet/agent.sock: the agent ended ReapLeaks without a summary',
      'internal',
      undefined,
    ]);
    expect(fake.targets).toEqual([]);
  });
});

describe('probeConnect', () => {
  let dir: Awaited<ReturnType<typeof tempDir>>;
  const servers: Server[] = [];
  beforeEach(async () => {
    dir = await tempDir();
  });
  afterEach(async () => {
    for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
    await dir.remove();
  });

  const listen = (at: string | number) =>
    new Promise<Server>((resolve) => {
      const server = createServer((socket) => socket.destroy());
      servers.push(server);
      server.listen(at, () => {
        resolve(server);
      });
    });

  it('reads the path or host and port of a target', () => {
    expect(probeAddress('unix:///run/a.sock')).toEqual({ path: '/run/a.sock' });
    expect(probeAddress('unix:/run/a.sock')).toEqual({ path: '/run/a.sock' });
    expect(probeAddress('unix:./a.sock')).toEqual({ path: './a.sock' });
    expect(probeAddress('node1.example:4647')).toEqual({ host: 'node1.example', port: 4647 });
    expect(probeAddress('[::1]:4647')).toEqual({ host: '::1', port: 4647 });
  });

  it("gives connect(2)'s errno code, or undefined when it connects", async () => {
    const missing = join(dir.path, 'missing.sock');
    expect(await probeConnect(`unix://${missing}`)).toBe('ENOENT');
    const file = join(dir.path, 'not-a-socket');
    await writeFile(file, '');
    expect(await probeConnect(`unix://${file}`)).toBe('ECONNREFUSED');
    const socket = join(dir.path, 'agent.sock');
    await listen(socket);
    expect(await probeConnect(`unix://${socket}`)).toBeUndefined();
    const tcp = await listen(0);
    const port = (tcp.address() as { port: number }).port;
    expect(await probeConnect(`127.0.0.1:${port}`)).toBeUndefined();
  });
});

describe('withAgent', () => {
  it('refuses a socket that does not connect before loading gRPC, as a failed call would', async () => {
    const dir = await tempDir();
    try {
      const address = join(dir.path, 'none.sock');
      let called = false;
      const error: unknown = await withAgent({ address, timeout: '1000' }, () => {
        called = true;
        return Promise.resolve();
      }).catch((e: unknown) => e);
      const failed = await callError(
        { address, target: `unix://${address}` },
        serviceError(grpc.status.UNAVAILABLE, 'No connection established'),
      );
      expect(called).toBe(false);
      expect(isCliError(error)).toBe(true);
      const { message, code, kind, grpcStatus } = error as CliError;
      expect({ message, code, kind, grpcStatus }).toEqual({
        message: failed.message,
        code: failed.code,
        kind: failed.kind,
        grpcStatus: failed.grpcStatus,
      });
      expect([kind, grpcStatus]).toEqual([
        kindOfStatus(grpc.status.UNAVAILABLE),
        grpc.status.UNAVAILABLE,
      ]);
    } finally {
      await dir.remove();
    }
  });

  it('refuses bad flags as usage errors before it connects', async () => {
    await expect(
      withAgent({ address: '/x.sock', timeout: '0' }, () => Promise.resolve()),
    ).rejects.toThrow('--timeout "0" is not a whole number of milliseconds');
    await expect(
      withAgent({ address: '/x.sock', timeout: '10', tokenFile: '/nonexistent/token' }, () =>
        Promise.resolve(),
      ),
    ).rejects.toThrow('--token-file "/nonexistent/token" cannot be read');
  });
});
