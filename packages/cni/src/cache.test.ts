// The cache's files on disk: a write leaves the file and nothing else, a failed write leaves no
// temporary, and the temporaries a killed writer left are found (a live writer's are not).
import { spawnSync } from 'node:child_process';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createCniCache } from './cache.js';
import type { CacheEntry } from './cache.js';
import { isCniError } from './errors.js';
import { tempDir } from './testing/tmp.js';

const entry: CacheEntry = {
  networkName: 'nomad',
  containerId: 'a1',
  ifName: 'eth0',
  netns: '/run/netns/a1',
  cniArgs: [],
  capabilityArgs: {},
  config: '{}',
  result: { cniVersion: '1.0.0' },
};

let dir: Awaited<ReturnType<typeof tempDir>>;
beforeEach(async () => {
  dir = await tempDir('allocnet-cache-');
});
afterEach(async () => {
  await dir.remove();
});

describe('the cache files', () => {
  it('leaves the result and the marker and nothing else in their directories', async () => {
    const cache = createCniCache(dir.path);
    await cache.writeResult(entry);
    await cache.markAdding(entry);
    expect(await readdir(join(dir.path, 'results'))).toEqual(['nomad-a1-eth0']);
    expect(await readdir(join(dir.path, 'allocnet', 'adding'))).toEqual(['nomad-a1-eth0']);
  });

  it('removes the temporary of a write that fails, and throws a cache error naming the write', async () => {
    const cache = createCniCache(dir.path);
    // A directory where the marker goes: the rename over it fails.
    await mkdir(join(dir.path, 'allocnet', 'adding', 'nomad-a1-eth0', 'x'), { recursive: true });
    const error: unknown = await cache.markAdding(entry).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isCniError(error) && error.code).toBe('cache');
    expect((error as Error).message).toMatch(/^writing the ADD marker of nomad-a1-eth0: E\w+: /);
    expect(await readdir(join(dir.path, 'allocnet', 'adding'))).toEqual(['nomad-a1-eth0']);
  });

  it('finds the temporaries of a writer that is gone, in both directories, and removes them', async () => {
    const cache = createCniCache(dir.path);
    await cache.writeResult(entry);
    await cache.markAdding(entry);
    const gone = spawnSync('true').pid;
    const stale = [
      join(dir.path, 'allocnet', 'adding', `.nomad-b2-eth0.${gone}.0000abcd.tmp`),
      join(dir.path, 'results', `.nomad-b2-eth0.${gone}.0000abce.tmp`),
    ];
    const inFlight = join(dir.path, 'results', `.nomad-c3-eth0.${process.pid}.0000abcf.tmp`);
    for (const path of [...stale, inFlight]) await writeFile(path, '');
    expect((await cache.staleTemporaries()).sort()).toEqual([...stale].sort());
    for (const path of stale) await cache.removeTemporary(path);
    await cache.removeTemporary(stale[0] ?? '');
    expect(await cache.staleTemporaries()).toEqual([]);
    expect((await readdir(join(dir.path, 'results'))).sort()).toEqual(
      [`.nomad-c3-eth0.${process.pid}.0000abcf.tmp`, 'nomad-a1-eth0'].sort(),
    );
    // The cache's readers skip temporaries, as any dot file.
    expect((await cache.listResults()).map((e) => e.containerId)).toEqual(['a1']);
  });

  it('finds no temporaries in a cache never written', async () => {
    expect(await createCniCache(join(dir.path, 'none')).staleTemporaries()).toEqual([]);
  });
});
