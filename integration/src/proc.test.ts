// The /proc readers the tests use to find and kill processes (fixtures/proc.ts), against the
// kernel: a process reaped after its /proc file was opened makes the read fail with ESRCH, which
// once failed the chaos test's kill of the agent's tree.
import { spawn } from 'node:child_process';
import { open } from 'node:fs/promises';
import { alive, processTable, readOpened, readProc } from './fixtures/proc.js';

/** A `sleep` child, spawned; the caller kills it. */
async function sleeper(): Promise<{ pid: number; kill: () => Promise<void> }> {
  const child = spawn('sleep', ['60'], { stdio: 'ignore' });
  await new Promise((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', reject);
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return {
    pid: child.pid ?? -1,
    kill: async () => {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

it('a process reaped between the open and the read of its /proc file reads as gone, not ESRCH', async () => {
  const child = await sleeper();
  const plain = await open(`/proc/${child.pid}/stat`, 'r');
  const guarded = await open(`/proc/${child.pid}/stat`, 'r');
  await child.kill();
  try {
    // The kernel fact the readers handle.
    await expect(plain.readFile('utf8')).rejects.toMatchObject({ code: 'ESRCH' });
  } finally {
    await plain.close();
  }
  expect(await readOpened(guarded)).toBeUndefined();
  expect(await readProc(child.pid, 'stat')).toBeUndefined();
  expect(await alive(child.pid)).toBe(false);
});

it('lists a running child under its parent, and it is alive until killed', async () => {
  const child = await sleeper();
  try {
    expect((await processTable()).get(child.pid)).toBe(process.pid);
    expect(await alive(child.pid)).toBe(true);
    expect(await readProc(child.pid, 'cmdline')).toBe('sleep\x0060\x00');
  } finally {
    await child.kill();
  }
  expect((await processTable()).has(child.pid)).toBe(false);
});
