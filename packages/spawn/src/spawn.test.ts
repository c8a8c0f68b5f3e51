import { spawn as nodeSpawn } from 'node:child_process';
import { createRequire } from 'node:module';
import type * as Koffi from 'koffi';
import {
  chmodSync,
  closeSync,
  copyFileSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { Worker } from 'node:worker_threads';
import { join } from 'node:path';
import { defaultSpawnMethod, isSpawnError, releaseFreeMemory, spawnChild } from './index.js';
import type { SpawnMethod, SpawnOptions, SpawnedChild } from './index.js';

const ENV = { PATH: '/usr/bin:/bin', LC_ALL: 'C' };

async function collect(child: SpawnedChild, input?: string | Buffer) {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout.on('data', (d: Buffer) => out.push(d));
  child.stderr.on('data', (d: Buffer) => err.push(d));
  if (child.stdin !== null) {
    child.stdin.on('error', () => undefined); // EPIPE from a child that does not read: not tested here
    child.stdin.end(input);
  }
  const exit = await child.closed;
  return { ...exit, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() };
}

const run = (method: SpawnMethod, options: Omit<SpawnOptions, 'method'>, input?: string | Buffer) =>
  collect(spawnChild({ ...options, method }), input);

test('posix_spawn is the default on this machine (glibc, koffi)', () => {
  expect(defaultSpawnMethod()).toBe('posix_spawn');
});

describe.each<SpawnMethod>(['posix_spawn', 'child_process'])('%s', (method) => {
  test('the child gets exactly the environment given, and argv after argv[0]', async () => {
    const env = await run(method, { file: '/usr/bin/env', env: { A: '1', B: 'two words' } });
    expect(env).toEqual({ code: 0, signal: null, stdout: 'A=1\nB=two words\n', stderr: '' });
    const argv = await run(method, {
      file: 'sh',
      args: ['-c', 'printf "%s|" "$0" "$@"', 'zero', 'one', 'a b'],
      env: ENV,
    });
    expect(argv.stdout).toBe('zero|one|a b|');
  });

  test('stdin reaches the child whole, and 1 MiB of output comes back whole', async () => {
    const big = Buffer.alloc(1 << 20, 'x');
    const result = await run(method, { file: 'cat', env: ENV }, big);
    expect(result.code).toBe(0);
    expect(result.stdout.length).toBe(big.length);
    expect(result.stdout).toBe(big.toString());
  });

  test('exit codes, stderr, and death by a signal', async () => {
    expect(
      await run(method, { file: 'sh', args: ['-c', 'echo no >&2; exit 3'], env: ENV }),
    ).toEqual({ code: 3, signal: null, stdout: '', stderr: 'no\n' });
    const killed = await run(method, { file: 'sh', args: ['-c', 'kill -KILL $$'], env: ENV });
    expect(killed).toMatchObject({ code: null, signal: 'SIGKILL' });
  });

  test('kill() ends a running child and returns false once it is reaped', async () => {
    const child = spawnChild({ method, file: 'sleep', args: ['30'], env: ENV, stdin: 'ignore' });
    expect(child.pid).toEqual(expect.any(Number));
    expect(child.kill('SIGKILL')).toBe(true);
    await expect(child.closed).resolves.toEqual({ code: null, signal: 'SIGKILL' });
    expect(child.kill('SIGKILL')).toBe(false);
  });

  test('stdin is closed once the child is gone, even when nothing was written to it', async () => {
    // The CNI runtime kills pre-started plugins that never get their stdin; the pipe must not
    // stay open behind them.
    const child = spawnChild({ method, file: 'sleep', args: ['30'], env: ENV });
    child.stdin?.on('error', () => undefined);
    expect(child.kill('SIGKILL')).toBe(true);
    await child.closed;
    await new Promise((resolve) => setImmediate(resolve));
    expect(child.stdin?.destroyed).toBe(true);
  });

  test("stdin 'ignore' gives the child /dev/null", async () => {
    const child = spawnChild({ method, file: 'cat', env: ENV, stdin: 'ignore' });
    expect(child.stdin).toBeNull();
    expect(await collect(child)).toEqual({ code: 0, signal: null, stdout: '', stderr: '' });
  });

  test('a missing or unrunnable file rejects `closed` with its errno name', async () => {
    await expect(
      spawnChild({ method, file: '/nonexistent/plugin', env: ENV }).closed,
    ).rejects.toMatchObject({ name: 'SpawnError', code: 'ENOENT' });
    await expect(
      spawnChild({ method, file: 'no-such-command-here', env: ENV }).closed,
    ).rejects.toMatchObject({ code: 'ENOENT' });
    const dir = mkdtempSync(join(tmpdir(), 'allocnet-spawn-'));
    try {
      const plain = join(dir, 'not-executable');
      copyFileSync('/bin/true', plain);
      chmodSync(plain, 0o644);
      const error: unknown = await spawnChild({ method, file: plain, env: ENV }).closed.catch(
        (e: unknown) => e,
      );
      expect(isSpawnError(error) && error.code).toBe('EACCES');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a binary still open for writing fails with ETXTBSY (what the CNI runtime retries)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'allocnet-spawn-'));
    const file = join(dir, 'being-written');
    copyFileSync('/bin/true', file);
    chmodSync(file, 0o755);
    const fd = openSync(file, 'r+');
    try {
      await expect(spawnChild({ method, file, env: ENV }).closed).rejects.toMatchObject({
        code: 'ETXTBSY',
      });
    } finally {
      closeSync(fd);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('50 children at once, mixed with node:child_process ones: each is reaped by its starter', async () => {
    const ours = Array.from({ length: 50 }, (_, i) =>
      run(method, {
        file: 'sh',
        args: ['-c', 'sleep 0.0$1; echo $1', 'sh', String(i % 10)],
        env: ENV,
      }),
    );
    const theirs = Array.from(
      { length: 10 },
      (_, i) =>
        new Promise<number | null>((resolve) => {
          nodeSpawn('sh', ['-c', `exit ${i}`]).on('close', resolve);
        }),
    );
    const results = await Promise.all(ours);
    expect(results.map((r) => r.stdout)).toEqual(
      Array.from({ length: 50 }, (_, i) => `${i % 10}\n`),
    );
    expect(await Promise.all(theirs)).toEqual(Array.from({ length: 10 }, (_, i) => i));
  });
});

describe('posix_spawn child state', () => {
  test('no signal blocked or ignored in the child (Node ignores SIGPIPE)', async () => {
    const status = await run('posix_spawn', { file: 'cat', args: ['/proc/self/status'], env: ENV });
    const field = (name: string) =>
      new RegExp(`^${name}:\\s*(\\S+)$`, 'm').exec(status.stdout)?.[1];
    expect(field('SigBlk')).toBe('0000000000000000');
    expect(field('SigIgn')).toBe('0000000000000000');
  });

  test('only descriptors 0, 1 and 2 reach the child, even ones opened without O_CLOEXEC', async () => {
    // Node opens everything with O_CLOEXEC; a native addon may not. dup() never sets it.
    const koffi = createRequire(import.meta.url)('koffi') as typeof Koffi;
    const lib = koffi.load('libc.so.6');
    const dup = lib.func('int dup(int fd)') as (fd: number) => number;
    const close = lib.func('int close(int fd)') as (fd: number) => number;
    const leaky = dup(1);
    expect(leaky).toBeGreaterThan(2);
    try {
      const listed = await run('posix_spawn', { file: 'ls', args: ['/proc/self/fd'], env: ENV });
      const fds = listed.stdout.trim().split('\n').map(Number);
      expect(fds).not.toContain(leaky);
      // ls opens /proc/self/fd itself: the one descriptor above 2 it may list.
      expect(fds.filter((n) => n > 2).length).toBeLessThanOrEqual(1);
      expect(fds.slice(0, 3)).toEqual([0, 1, 2]);
    } finally {
      close(leaky);
    }
  });
});

describe('in a worker thread', () => {
  test('falls back to child_process (SIGCHLD reaches only the main thread) and still works', async () => {
    // A worker loads plain JavaScript: this runs the built package (tools/setup.sh builds the
    // workspace before any test runs).
    const dist = new URL('../dist/index.js', import.meta.url).href;
    const worker = new Worker(
      `const { parentPort } = require('node:worker_threads');
       import(${JSON.stringify(dist)}).then(async (spawn) => {
         const r = await spawn.runProcess({ file: 'sh', args: ['-c', 'echo hi'], env: { PATH: '/usr/bin:/bin' } });
         parentPort.postMessage({ method: spawn.defaultSpawnMethod(), r });
       });`,
      { eval: true },
    );
    try {
      const message = await new Promise((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      });
      expect(message).toEqual({
        method: 'child_process',
        r: { kind: 'exited', exitCode: 0, stdout: 'hi\n', stderr: '' },
      });
    } finally {
      await worker.terminate();
    }
  });
});

describe('releaseFreeMemory', () => {
  it('hands heap memory glibc kept after a free back to the kernel', () => {
    const koffi = createRequire(import.meta.url)('koffi') as typeof Koffi;
    const lib = koffi.load('libc.so.6');
    const malloc = lib.func('void *malloc(size_t size)') as (size: number) => unknown;
    const memset = lib.func('void *memset(void *s, int c, size_t n)') as (
      p: unknown,
      c: number,
      n: number,
    ) => unknown;
    const free = lib.func('void free(void *p)') as (p: unknown) => void;
    const rssAnon = () =>
      Number(/RssAnon:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1]) * 1024;
    // 64 MiB in 64 KiB blocks (under glibc's mmap threshold: from the heap), touched, then all
    // freed but the last, which keeps the heap's top in use: glibc keeps the rest resident.
    const size = 64 * 1024;
    const blocks = Array.from({ length: 1024 }, () => {
      const p = malloc(size);
      memset(p, 1, size);
      return p;
    });
    for (const p of blocks.slice(0, -1)) free(p);
    const kept = rssAnon();
    expect(releaseFreeMemory()).toBe(true);
    expect(kept - rssAnon()).toBeGreaterThan(32 * 2 ** 20);
    free(blocks.at(-1));
  });
});
