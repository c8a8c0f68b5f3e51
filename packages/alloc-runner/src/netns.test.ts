// The runner's adapter over @allocnet/netns: the same messages, as RunnerErrors with the runner's
// codes (the manager's own argv and messages are tested in @allocnet/netns).
import type { CommandExec, CommandSpec } from '@allocnet/netns';
import { isRunnerError } from './errors.js';
import { NETNS_RUN_DIR, checkNetnsName, createIpNetnsManager } from './netns.js';

type RunResult = Awaited<ReturnType<CommandExec['run']>>;

function answering(...answers: RunResult[]) {
  const calls: CommandSpec[] = [];
  const run = (request: CommandSpec) => {
    calls.push(request);
    return Promise.resolve(
      answers.shift() ?? { kind: 'exited' as const, exitCode: 0, stdout: '', stderr: '' },
    );
  };
  return { calls, netns: createIpNetnsManager({ run }) };
}

async function runnerFailure(fn: () => unknown) {
  try {
    await fn();
  } catch (error) {
    if (isRunnerError(error))
      return { code: error.code, field: error.field, message: error.message };
    throw error;
  }
  throw new Error('it did not fail');
}

describe('the runner’s NetnsManager', () => {
  it('makes, lists and removes through ip netns', async () => {
    const { calls, netns } = answering(
      { kind: 'exited', exitCode: 0, stdout: '', stderr: '' },
      { kind: 'exited', exitCode: 0, stdout: 'alloc-1\n', stderr: '' },
    );
    expect(await netns.create('alloc-1')).toBe(`${NETNS_RUN_DIR}/alloc-1`);
    expect(await netns.list()).toEqual(['alloc-1']);
    expect(await netns.remove('alloc-1')).toBe(true);
    expect(calls.map((c) => [c.file, ...c.args].join(' '))).toEqual([
      'ip netns add alloc-1',
      'ip netns list',
      'ip netns del alloc-1',
    ]);
  });

  it('refuses a bad name as invalid-argument on netnsName', async () => {
    const expected = {
      code: 'invalid-argument',
      field: 'netnsName',
      message:
        'namespace name "a/b" is not 1 to 255 of [A-Za-z0-9_.-] starting with a letter, a digit or "_"',
    };
    expect(await runnerFailure(() => checkNetnsName('a/b'))).toEqual(expected);
    const { netns } = answering();
    expect(await runnerFailure(() => netns.pathOf('a/b'))).toEqual(expected);
    expect(await runnerFailure(() => netns.create('a/b'))).toEqual(expected);
  });

  it('fails a command as netns and an abort as aborted, with the manager’s messages', async () => {
    const { netns } = answering(
      {
        kind: 'exited',
        exitCode: 1,
        stdout: '',
        stderr: 'Cannot create namespace file: File exists\n',
      },
      { kind: 'failed', reason: 'aborted', message: 'cancelled', stdout: '', stderr: '' },
    );
    expect(await runnerFailure(() => netns.create('alloc-1'))).toEqual({
      code: 'netns',
      field: undefined,
      message:
        'ip netns add alloc-1 failed (exit status 1): Cannot create namespace file: File exists',
    });
    expect(await runnerFailure(() => netns.list())).toEqual({
      code: 'aborted',
      field: undefined,
      message: 'ip netns list was aborted',
    });
  });

  it('tells a namespace from a file', async () => {
    const { netns } = answering();
    expect(await netns.exists('/proc/self/ns/net')).toBe(true);
    expect(await netns.exists('/proc/self/status')).toBe(false);
  });
});
