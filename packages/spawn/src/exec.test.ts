import { createCommandExec } from './exec.js';

describe('createCommandExec', () => {
  it('runs the argv without a shell, with LC_ALL=C, and the input on stdin', async () => {
    const result = await createCommandExec().run({
      file: 'sh',
      args: ['-c', 'echo "$LC_ALL|$0"; cat; exit 2', 'a b;c'],
      input: 'line 1\nline 2\n',
    });
    expect(result).toEqual({
      kind: 'exited',
      exitCode: 2,
      stdout: 'C|a b;c\nline 1\nline 2\n',
      stderr: '',
    });
  });

  it('gives stdin /dev/null without input, and kills at the timeout', async () => {
    const result = await createCommandExec().run({
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
    const result = await createCommandExec().run({
      file: '/nonexistent/command',
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

  it('gives stdout to onStdout as it comes, and not again in the result', async () => {
    const pieces: string[] = [];
    const result = await createCommandExec().run({
      file: 'sh',
      args: ['-c', 'printf out'],
      onStdout: (chunk) => {
        pieces.push(chunk.toString('utf8'));
      },
    });
    expect([pieces.join(''), result.stdout]).toEqual(['out', '']);
  });
});
