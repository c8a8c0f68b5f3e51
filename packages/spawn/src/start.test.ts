import { mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { runProcess, startProcess } from './index.js';
import type { SpawnMethod, StartedProcess } from './index.js';

const ENV = { PATH: '/usr/bin:/bin', LC_ALL: 'C' };

let dir: string;
/** Processes a failing test could leave waiting; killed after each test. */
const leftovers: StartedProcess[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'allocnet-start-'));
});
afterEach(() => {
  for (const child of leftovers.splice(0)) child.cancel();
  rmSync(dir, { recursive: true, force: true });
});

/** A FIFO the child writes to once it runs: reading it waits for the child, no polling. */
async function fifo(name: string): Promise<string> {
  const path = join(dir, name);
  expect(await runProcess({ file: 'mkfifo', args: [path], env: ENV })).toMatchObject({
    kind: 'exited',
    exitCode: 0,
  });
  return path;
}

/** What `run()` resolves for a process that was aborted or cancelled, with its output so far. */
const cancelled = (stdout = '') => ({
  kind: 'failed',
  reason: 'aborted',
  message: 'cancelled',
  stdout,
  stderr: '',
});

/** The session id in a /proc/<pid>/stat line (the field after state, ppid and pgrp). */
const sessionOf = (stat: string) => stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3];

describe.each<SpawnMethod>(['posix_spawn', 'child_process'])('startProcess over %s', (method) => {
  test('starts at once and waits for its input; run() gives it and resolves the exit', async () => {
    const started = await fifo('started');
    const child = startProcess({
      method,
      file: 'sh',
      args: ['-c', 'echo up > "$1"; cat; echo err >&2; exit 3', 'sh', started],
      env: ENV,
    });
    // The child is running before it has any input.
    expect(await readFile(started, 'utf8')).toBe('up\n');
    expect(await child.run('in\n')).toEqual({
      kind: 'exited',
      exitCode: 3,
      stdout: 'in\n',
      stderr: 'err\n',
    });
  });

  test('the timeout counts from run(), not from the start, and says so', async () => {
    const started = await fifo('started');
    const child = startProcess({
      method,
      file: 'sh',
      args: ['-c', 'echo up > "$1"; cat; exec sleep 30', 'sh', started],
      env: ENV,
      timeoutMs: 200,
    });
    await readFile(started, 'utf8');
    // Waiting longer than the timeout before the input is the point of this test, not a sync.
    await sleep(400);
    const given = performance.now();
    // Alive and reading: it echoes the input, then the timer (from now) kills it.
    expect(await child.run('late\n')).toEqual({
      kind: 'failed',
      reason: 'timeout',
      message: 'timed out after 200 ms',
      stdout: 'late\n',
      stderr: '',
    });
    expect(performance.now() - given).toBeGreaterThanOrEqual(190);
  });

  test('an already aborted signal starts nothing', async () => {
    const controller = new AbortController();
    controller.abort();
    const marker = join(dir, 'ran');
    const child = startProcess({
      method,
      file: 'sh',
      args: ['-c', 'touch "$1"', 'sh', marker],
      env: ENV,
      signal: controller.signal,
    });
    expect(child.kill('SIGKILL')).toBe(false);
    expect(await child.run()).toEqual(cancelled());
    expect(() => readFileSync(marker)).toThrow(/ENOENT/);
  });

  test('an abort before run() kills the waiting process at once; run() then says aborted', async () => {
    const started = await fifo('started');
    const held = await fifo('held');
    const controller = new AbortController();
    const child = startProcess({
      method,
      file: 'sh',
      // Holds `held` open for writing until it dies; `exec cat` keeps it one process.
      args: ['-c', 'exec 3>"$2"; echo up > "$1"; exec cat', 'sh', started, held],
      env: ENV,
      signal: controller.signal,
    });
    leftovers.push(child);
    const gone = readFile(held, 'utf8'); // ends when its last writer, the child, has died
    await readFile(started, 'utf8');
    controller.abort();
    expect(await gone).toBe('');
    expect(await child.run('never read\n')).toEqual(cancelled());
  });

  test('an abort while it runs kills it, keeping the output so far', async () => {
    const started = await fifo('started');
    const controller = new AbortController();
    const child = startProcess({
      method,
      file: 'sh',
      args: ['-c', 'cat; echo up > "$1"; exec sleep 30', 'sh', started],
      env: ENV,
      signal: controller.signal,
    });
    const running = child.run('read\n');
    await readFile(started, 'utf8');
    controller.abort();
    expect(await running).toEqual(cancelled('read\n'));
  });

  test('cancel() before the input kills it: the input never reaches it', async () => {
    const got = join(dir, 'got');
    const child = startProcess({
      method,
      file: 'sh',
      args: ['-c', 'cat > "$1"', 'sh', got],
      env: ENV,
      timeoutMs: 10_000,
    });
    child.cancel();
    expect(await child.run('secret\n')).toEqual(cancelled());
    // Killed before the shell ran (no file) or while cat waited for input (an empty one).
    expect(await readFile(got, 'utf8').catch(() => '')).toBe('');
  });

  test('cancel() during run() stops it', async () => {
    const child = startProcess({ method, file: 'sleep', args: ['30'], env: ENV });
    const running = child.run('');
    child.cancel();
    await expect(running).resolves.toMatchObject({ kind: 'failed', reason: 'aborted' });
  });

  test('kill() forwards a signal; the result says who it was', async () => {
    const child = startProcess({ method, file: 'sleep', args: ['30'], env: ENV, stdin: 'ignore' });
    const running = child.run();
    expect(child.kill('SIGTERM')).toBe(true);
    expect(await running).toEqual({
      kind: 'failed',
      reason: 'killed',
      message: 'killed by SIGTERM',
      stdout: '',
      stderr: '',
    });
    expect(child.kill('SIGTERM')).toBe(false);
  });

  test('a process that did not start is a `spawn` result with its errno name', async () => {
    const result = await startProcess({ method, file: '/nonexistent/plugin', env: ENV }).run('{}');
    expect(result).toMatchObject({ kind: 'failed', reason: 'spawn', code: 'ENOENT' });
    expect(result.kind === 'failed' && result.message).toMatch(
      /^spawn \/nonexistent\/plugin ENOENT/,
    );
  });

  test('run() is once, and takes no input with stdin ignored', async () => {
    const child = startProcess({ method, file: 'true', env: ENV, stdin: 'ignore' });
    expect(() => child.run('x')).toThrow("input for a process started with stdin: 'ignore'");
    await expect(child.run()).resolves.toMatchObject({ kind: 'exited', exitCode: 0 });
    expect(() => child.run()).toThrow('run() was called twice on one started process');
  });

  test.each([
    ['stdout', 1, 'stderr', 2],
    ['stderr', 2, 'stdout', 1],
  ] as const)(
    "%s 'inherit' hands down this process's own descriptor",
    async (shared, fd, piped, to) => {
      const result = await startProcess({
        method,
        file: 'sh',
        // Read in a subshell: the shell may exec a last simple command with its redirection.
        args: ['-c', `fd=$(readlink /proc/$$/fd/${fd}); echo "$fd" >&${to}`],
        env: ENV,
        stdin: 'ignore',
        [shared]: 'inherit',
      }).run();
      expect(result).toEqual({
        kind: 'exited',
        exitCode: 0,
        [shared]: '',
        [piped]: `${readlinkSync(`/proc/self/fd/${fd}`)}\n`,
      });
    },
  );

  test('detached starts it in a session of its own; otherwise it shares ours', async () => {
    const session = async (detached: boolean) => {
      const result = await runProcess({
        method,
        file: 'sh',
        args: ['-c', 'echo $$; cat /proc/$$/stat'],
        env: ENV,
        detached,
      });
      const [pid = '', stat = ''] = result.kind === 'exited' ? result.stdout.split('\n') : [];
      return { pid, session: sessionOf(stat) };
    };
    const own = await session(true);
    expect(own.session).toBe(own.pid);
    expect((await session(false)).session).toBe(sessionOf(readFileSync('/proc/self/stat', 'utf8')));
  });

  test('outputGraceMs: a process it left holding its stdout does not hold the result', async () => {
    const began = Date.now();
    const result = await runProcess({
      method,
      file: 'sh',
      // `sleep` inherits the shell's stdout and keeps it open after the shell exits.
      args: ['-c', 'sleep 30 & echo $!; exit 4'],
      env: ENV,
      detached: true,
      outputGraceMs: 100,
    });
    expect(result).toMatchObject({ kind: 'exited', exitCode: 4 });
    expect(Date.now() - began).toBeLessThan(5000);
    const sleeper = Number(result.kind === 'exited' ? result.stdout.trim() : NaN);
    // Not killed: the grace closes our ends, nothing more (a daemon a plugin starts may stay).
    expect(alive(sleeper)).toBe(true);
    process.kill(sleeper, 'SIGKILL');
  });

  test('detached: the timeout ends the whole process group, what the process started too', async () => {
    const started = await fifo('started');
    const child = startProcess({
      method,
      file: 'sh',
      args: ['-c', 'sleep 30 & echo $! > "$1"; wait', 'sh', started],
      env: ENV,
      stdin: 'ignore',
      detached: true,
      timeoutMs: 200,
    });
    leftovers.push(child);
    const run = child.run();
    const sleeper = Number((await readFile(started, 'utf8')).trim());
    expect(await run).toMatchObject({ kind: 'failed', reason: 'timeout' });
    expect(await until(() => !alive(sleeper))).toBe(true);
  });
});

/** Whether a process is alive: there, and not a zombie waiting for its parent. */
function alive(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z';
  } catch {
    return false;
  }
}

/** Polls `condition` every 20 ms for up to 5 s. */
async function until(condition: () => boolean): Promise<boolean> {
  for (let i = 0; i < 250; i++) {
    if (condition()) return true;
    await sleep(20);
  }
  return condition();
}
