import { spawn } from 'node:child_process';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { removeEmptyReservations } from './ipam.js';

describe('removeEmptyReservations', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'allocnet-ipam-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('removes the empty reservation files a killed host-local left, and nothing else', async () => {
    await writeFile(join(dir, '172.26.64.2'), '');
    await writeFile(join(dir, 'fd42::2'), '');
    await writeFile(join(dir, '172.26.64.3'), 'a1\r\neth0');
    await writeFile(join(dir, '172.26.64.4'), 'a2\r\neth0\r\nallocnet-hold');
    await writeFile(join(dir, 'last_reserved_ip.0'), '');
    await writeFile(join(dir, 'lock'), '');
    expect((await removeEmptyReservations(dir)).sort()).toEqual(['172.26.64.2', 'fd42::2']);
    expect((await readdir(dir)).sort()).toEqual([
      '172.26.64.3',
      '172.26.64.4',
      'last_reserved_ip.0',
      'lock',
    ]);
  });

  it('waits for host-local’s lock before it removes anything', async () => {
    await writeFile(join(dir, '172.26.64.2'), '');
    // Another process holds the lock, as host-local does between its create and its write.
    const holder = spawn('flock', ['-o', join(dir, 'lock'), '-c', 'echo held; exec sleep 30'], {
      stdio: ['ignore', 'pipe', 'ignore'],
      // Its own process group: the kill below takes its sleep too.
      detached: true,
    });
    const exited = new Promise((resolve) => holder.once('exit', resolve));
    await new Promise((resolve) => holder.stdout.once('data', resolve));
    const removing = removeEmptyReservations(dir);
    // Several polls of the lock (every 10 ms) go by: the file stays while the lock is held.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await readdir(dir)).toContain('172.26.64.2');
    process.kill(-(holder.pid ?? 0), 'SIGKILL');
    await exited;
    expect(await removing).toEqual(['172.26.64.2']);
    expect(await readdir(dir)).not.toContain('172.26.64.2');
  });

  it('finds nothing in a directory that is not there', async () => {
    expect(await removeEmptyReservations(join(dir, 'none'))).toEqual([]);
  });
});
