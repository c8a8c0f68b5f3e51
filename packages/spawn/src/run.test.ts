import { runProcess } from './index.js';
import type { SpawnMethod } from './index.js';

const ENV = { PATH: '/usr/bin:/bin', LC_ALL: 'C' };

describe.each<SpawnMethod>(['posix_spawn', 'child_process'])('runProcess over %s', (method) => {
  test('input in, whole output and the exit code out', async () => {
    expect(
      await runProcess({
        method,
        file: 'sh',
        args: ['-c', 'cat; echo err >&2; exit 4'],
        env: ENV,
        input: 'in\n',
      }),
    ).toEqual({ kind: 'exited', exitCode: 4, stdout: 'in\n', stderr: 'err\n' });
  });

  test('onStdout is given the output piece by piece as it comes, all of it before the result, which does not hold it again', async () => {
    const pieces: string[] = [];
    let resolved = false;
    const running = runProcess({
      method,
      file: 'sh',
      // The second piece is written only once the first was read: two separate reads.
      args: ['-c', 'printf first; sleep 0.2; printf second'],
      env: ENV,
      onStdout: (chunk) => {
        expect(resolved).toBe(false);
        pieces.push(chunk.toString('utf8'));
      },
    });
    const result = await running.then((r) => {
      resolved = true;
      return r;
    });
    expect(pieces).toEqual(['first', 'second']);
    expect(result).toEqual({ kind: 'exited', exitCode: 0, stdout: '', stderr: '' });
  });

  test('without input the child reads /dev/null', async () => {
    expect(await runProcess({ method, file: 'cat', env: ENV })).toEqual({
      kind: 'exited',
      exitCode: 0,
      stdout: '',
      stderr: '',
    });
  });

  test('a timeout kills it and says so, with the output so far', async () => {
    const result = await runProcess({
      method,
      file: 'sh',
      args: ['-c', 'echo started; exec sleep 30'],
      env: ENV,
      timeoutMs: 200,
    });
    expect(result).toEqual({
      kind: 'failed',
      reason: 'timeout',
      message: 'timed out after 200 ms',
      stdout: 'started\n',
      stderr: '',
    });
  });

  test('an abort kills it; an aborted signal starts nothing', async () => {
    const controller = new AbortController();
    const running = runProcess({
      method,
      file: 'sleep',
      args: ['30'],
      env: ENV,
      signal: controller.signal,
    });
    controller.abort();
    await expect(running).resolves.toMatchObject({ kind: 'failed', reason: 'aborted' });
    await expect(
      runProcess({ method, file: 'no-such-command-here', env: ENV, signal: controller.signal }),
    ).resolves.toMatchObject({ kind: 'failed', reason: 'aborted', message: 'cancelled' });
  });

  test('a signal nobody here sent is `killed`; a missing file is `spawn`', async () => {
    await expect(
      runProcess({ method, file: 'sh', args: ['-c', 'kill -TERM $$'], env: ENV }),
    ).resolves.toMatchObject({ kind: 'failed', reason: 'killed', message: 'killed by SIGTERM' });
    const missing = await runProcess({ method, file: '/nonexistent/iptables', env: ENV });
    expect(missing).toMatchObject({ kind: 'failed', reason: 'spawn' });
    expect(missing.kind === 'failed' && missing.message).toMatch(
      /^spawn \/nonexistent\/iptables ENOENT/,
    );
  });
});
