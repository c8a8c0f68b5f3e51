import { createSpawnExec } from './exec.js';

describe('createSpawnExec', () => {
  it('runs the argv without a shell, with LC_ALL=C, and the input on stdin', async () => {
    const result = await createSpawnExec().run({
      file: 'sh',
      args: ['-c', 'echo "$LC_ALL|$0"; cat; exit 2', 'a b;c'],
      input: '*filter\nCOMMIT\n',
    });
    expect(result).toEqual({
      kind: 'exited',
      exitCode: 2,
      stdout: 'C|a b;c\n*filter\nCOMMIT\n',
      stderr: '',
    });
  });

  it('gives stdin /dev/null without input, and kills at the timeout', async () => {
    const result = await createSpawnExec().run({
      file: 'sh',
      args: ['-c', 'cat; echo read all; exec sleep 30'],
      timeoutMs: 200,
    });
    expect(result).toEqual({
      kind: 'failed',
      reason: 'timeout',
      message: 'timed out after 200 ms',
      stdout: 'read all\n',
      stderr: '',
    });
  });

  it('starts nothing for an aborted signal', async () => {
    const controller = new AbortController();
    controller.abort();
    const result = await createSpawnExec().run({
      file: '/nonexistent/iptables',
      args: [],
      signal: controller.signal,
    });
    expect(result).toEqual({
      kind: 'failed',
      reason: 'aborted',
      message: 'cancelled',
      stdout: '',
      stderr: '',
    });
  });
});
