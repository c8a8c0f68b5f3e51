// The CLI's one table of error kinds to exit statuses, and the kinds it reads back from an
// agent's gRPC status.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { ERROR_KINDS } from '@allocnet/base';
import { callError } from './agent-client.js';
import { KIND_EXIT, SIGPIPE_EXIT, USAGE_EXIT } from './cli.js';

describe('exit statuses', () => {
  it('maps every kind to 1 (the operation failed); 2 is the usage error alone', () => {
    expect(ERROR_KINDS.map((kind) => [kind, KIND_EXIT[kind]])).toEqual([
      ['invalid', 1],
      ['not-found', 1],
      ['conflict', 1],
      ['unavailable', 1],
      ['aborted', 1],
      ['broken', 1],
      ['exhausted', 1],
      ['internal', 1],
    ]);
    expect(USAGE_EXIT).toBe(2);
  });

  it("reads an agent's status back as the kind the agent mapped it from", async () => {
    // No probe: what the kind is does not depend on whether the agent can be reached.
    const kind = async (code: grpc.status | undefined) =>
      (
        await callError(
          { address: 'x', target: 'unix:///x' },
          code === undefined
            ? new Error('no answer')
            : Object.assign(new Error('failed'), {
                code,
                details: 'failed',
                metadata: new grpc.Metadata(),
              }),
          () => Promise.resolve(undefined),
        )
      ).kind;
    expect(
      await Promise.all(
        [
          grpc.status.INVALID_ARGUMENT,
          grpc.status.NOT_FOUND,
          grpc.status.FAILED_PRECONDITION,
          grpc.status.UNAVAILABLE,
          grpc.status.CANCELLED,
          grpc.status.DEADLINE_EXCEEDED,
          grpc.status.RESOURCE_EXHAUSTED,
          grpc.status.INTERNAL,
          grpc.status.UNKNOWN,
          undefined,
        ].map(kind),
      ),
    ).toEqual([
      'invalid',
      'not-found',
      'conflict',
      'unavailable',
      'aborted',
      'aborted',
      'exhausted',
      'internal',
      'internal',
      'internal',
    ]);
  });
});

describe('a reader that closes the pipe early', () => {
  it('ends the command quietly with 141, as a death by SIGPIPE reads in a shell', async () => {
    const main = fileURLToPath(new URL('../dist/main.cjs', import.meta.url));
    const child = spawn(process.execPath, [main, '--help'], { stdio: ['ignore', 'pipe', 'pipe'] });
    // Closed before the command has started, so its first write finds no reader.
    child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const [code] = (await once(child, 'exit')) as [number | null];
    expect({ code, stderr }).toEqual({ code: SIGPIPE_EXIT, stderr: '' });
  });
});
