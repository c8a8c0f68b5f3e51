import { execFile } from 'node:child_process';
import { chmodSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from '@allocnet/cni/testing';
import { MAX_KEYS, ROOT_CACHE_DIR, cacheDirOf, commandKey, loadBundle } from './code-cache.js';

const UID = process.getuid?.();

let dir: Awaited<ReturnType<typeof tempDir>>;
beforeEach(async () => {
  dir = await tempDir();
});
afterEach(async () => {
  await dir.remove();
});

/** A bundle of a few functions, its exports what they give. */
function writeBundle(name = 'bundle.cjs', n = 1): string {
  const file = join(dir.path, name);
  writeFileSync(
    file,
    `exports.n = ${n};\nexports.add = function (a, b) { return a + b; };\nexports.where = __filename + ' ' + __dirname;\n`,
  );
  return file;
}

const CODE_CACHE = fileURLToPath(new URL('../dist/code-cache.js', import.meta.url));

/**
 * `loadBundle` in a process of its own, then its `save`: what it did with the cache. Within one
 * process V8 compiles a source once (its own compilation cache) and never looks at the bytes
 * again, so whether V8 takes or refuses them is seen only in a fresh process.
 */
function loadInChild(file: string, key: string, cacheDir: string): Promise<string> {
  const script = `import { loadBundle } from ${JSON.stringify(CODE_CACHE)};
const b = loadBundle(${JSON.stringify(file)}, ${JSON.stringify(key)}, ${JSON.stringify(cacheDir)}, process.getuid());
b.save();
process.stdout.write(b.cache);`;
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--input-type=module', '-e', script], (error, stdout) => {
      if (error === null) resolve(stdout);
      else reject(new Error(`node exited: ${error.message}`));
    });
  });
}

/** The cache files in `cacheDir`, each with the commands it was written after. */
function caches(cacheDir: string): { name: string; keys: string[] }[] {
  return readdirSync(cacheDir)
    .filter((name) => name.endsWith('.v8cache'))
    .map((name) => {
      const bytes = readFileSync(join(cacheDir, name));
      const length = bytes.readUInt32LE(6);
      return { name, keys: JSON.parse(bytes.toString('utf8', 10, 10 + length)) as string[] };
    });
}

describe('where the cache is', () => {
  it('ALLOCNET_CLI_CACHE_DIR first (empty or off: none), then root’s, then XDG’s or ~/.cache', () => {
    expect(cacheDirOf({ ALLOCNET_CLI_CACHE_DIR: '/c' }, 0, '/root')).toBe('/c');
    expect(cacheDirOf({ ALLOCNET_CLI_CACHE_DIR: 'off' }, 0, '/root')).toBeUndefined();
    expect(cacheDirOf({ ALLOCNET_CLI_CACHE_DIR: '' }, 1000, '/home/u')).toBeUndefined();
    expect(cacheDirOf({}, 0, '/root')).toBe(ROOT_CACHE_DIR);
    expect(cacheDirOf({ XDG_CACHE_HOME: '/x' }, 1000, '/home/u')).toBe('/x/allocnet');
    // a relative XDG_CACHE_HOME is invalid (the XDG spec): ignored
    expect(cacheDirOf({ XDG_CACHE_HOME: 'x' }, 1000, '/home/u')).toBe('/home/u/.cache/allocnet');
    expect(cacheDirOf({}, 1000, '/home/u')).toBe('/home/u/.cache/allocnet');
  });
});

describe('a command’s key', () => {
  it('its first words, and local for --local; anything else is other', () => {
    expect(commandKey(['alloc', 'list', '--address', '/s'])).toBe('alloc list');
    expect(commandKey(['leaks', '--reap', '--local'])).toBe('leaks local');
    expect(commandKey(['leaks', '--known-file', 'ids.txt'])).toBe('leaks');
    expect(commandKey(['--help'])).toBe('');
    expect(commandKey([])).toBe('');
    expect(commandKey(['/etc/passwd'])).toBe('other');
    expect(commandKey(['ALLOC'])).toBe('other');
  });
});

// In this process V8 compiles each bundle's source once: `used` below says the file was read and
// given to V8; `loadInChild` shows what V8 does with it.
describe('loadBundle', () => {
  it('runs the bundle as a CommonJS module, then from the cache its save wrote', () => {
    const file = writeBundle();
    const cacheDir = join(dir.path, 'cache');
    const first = loadBundle(file, 'version', cacheDir, UID);
    expect(first.cache).toBe('none');
    const exports = first.exports as { add: (a: number, b: number) => number; where: string };
    expect(exports.add(2, 3)).toBe(5);
    expect(exports.where).toBe(`${file} ${dir.path}`);
    first.save();
    expect(caches(cacheDir).map((c) => c.keys)).toEqual([['version']]);
    expect(caches(cacheDir)[0]?.name).toMatch(/^cli-[0-9a-f]{20}\.v8cache$/);
    expect(statSync(cacheDir).mode & 0o777).toBe(0o700);

    const second = loadBundle(file, 'version', cacheDir, UID);
    expect(second.cache).toBe('used');
    expect((second.exports as { add: (a: number, b: number) => number }).add(1, 1)).toBe(2);
  });

  it('writes again after a command not in it yet, and only then', () => {
    const file = writeBundle();
    const cacheDir = join(dir.path, 'cache');
    loadBundle(file, 'version', cacheDir, UID).save();
    const [written] = readdirSync(cacheDir);
    const path = join(cacheDir, written ?? '');
    const before = statSync(path).mtimeMs;
    // the same command: nothing to add
    loadBundle(file, 'version', cacheDir, UID).save();
    expect(statSync(path).mtimeMs).toBe(before);
    loadBundle(file, 'leaks local', cacheDir, UID).save();
    expect(caches(cacheDir).map((c) => c.keys)).toEqual([['version', 'leaks local']]);
  });

  it('stops adding commands at MAX_KEYS', () => {
    const file = writeBundle();
    const cacheDir = join(dir.path, 'cache');
    for (let i = 0; i < MAX_KEYS + 3; i++) loadBundle(file, `c${i}`, cacheDir, UID).save();
    expect(caches(cacheDir)[0]?.keys).toHaveLength(MAX_KEYS);
  });

  it('another build of the bundle, even of the same length, does not read the old cache, and its save removes it', () => {
    const cacheDir = join(dir.path, 'cache');
    loadBundle(writeBundle('bundle.cjs', 1), 'version', cacheDir, UID).save();
    const old = caches(cacheDir);
    const file = writeBundle('bundle.cjs', 2);
    const next = loadBundle(file, 'version', cacheDir, UID);
    expect(next.cache).toBe('none');
    expect((next.exports as { n: number }).n).toBe(2);
    next.save();
    const now = caches(cacheDir);
    expect(now).toHaveLength(1);
    expect(now[0]?.name).not.toBe(old[0]?.name);
  });

  it('a cache V8 refuses is written anew, from this command alone', async () => {
    const file = writeBundle();
    const cacheDir = join(dir.path, 'cache');
    expect(await loadInChild(file, 'version', cacheDir)).toBe('none');
    expect(await loadInChild(file, 'version', cacheDir)).toBe('used');
    const [name = ''] = readdirSync(cacheDir);
    const path = join(cacheDir, name);
    const bytes = readFileSync(path);
    // V8's bytes start after the header and the keys (["version"]: 11 bytes of JSON)
    for (let i = 10 + 11; i < bytes.length; i++) bytes[i] = (bytes[i] as number) ^ 0x5a;
    writeFileSync(path, bytes);
    expect(await loadInChild(file, 'alloc list', cacheDir)).toBe('rejected');
    expect(caches(cacheDir).map((c) => c.keys)).toEqual([['alloc list']]);
    expect(await loadInChild(file, 'alloc list', cacheDir)).toBe('used');
  }, 60_000);

  it('does not read a cache others may write, nor a truncated one', () => {
    const file = writeBundle();
    const cacheDir = join(dir.path, 'cache');
    loadBundle(file, 'version', cacheDir, UID).save();
    const [name = ''] = readdirSync(cacheDir);
    const path = join(cacheDir, name);
    chmodSync(path, 0o666);
    expect(loadBundle(file, 'version', cacheDir, UID).cache).toBe('none');
    chmodSync(path, 0o600);
    chmodSync(cacheDir, 0o777);
    expect(loadBundle(file, 'version', cacheDir, UID).cache).toBe('none');
    chmodSync(cacheDir, 0o700);
    expect(loadBundle(file, 'version', cacheDir, UID).cache).toBe('used');
    writeFileSync(path, readFileSync(path).subarray(0, 8));
    expect(loadBundle(file, 'version', cacheDir, UID).cache).toBe('none');
  });

  it('without a cache directory, or one it cannot make, runs the bundle all the same', () => {
    const file = writeBundle();
    const off = loadBundle(file, 'version', undefined, UID);
    expect(off.cache).toBe('off');
    off.save();
    // a file where the directory should be: nothing is written, nothing throws
    const blocked = join(dir.path, 'blocked');
    writeFileSync(blocked, '');
    const loaded = loadBundle(file, 'version', join(blocked, 'cache'), UID);
    expect(loaded.cache).toBe('none');
    expect(() => {
      loaded.save();
    }).not.toThrow();
    expect(readdirSync(dir.path).sort()).toEqual(['blocked', 'bundle.cjs']);
  });
});

describe('the built command', () => {
  const MAIN = fileURLToPath(new URL('../dist/main.cjs', import.meta.url));
  const run = (cacheDir: string, ...args: string[]) =>
    new Promise<string>((resolve, reject) => {
      execFile(
        process.execPath,
        [MAIN, ...args],
        { env: { ...process.env, ALLOCNET_CLI_CACHE_DIR: cacheDir } },
        (error, stdout) => {
          if (error === null) resolve(stdout);
          else reject(new Error(`node exited: ${error.message}`));
        },
      );
    });

  it('writes its code cache after each command’s first run, and answers the same from it', async () => {
    const cacheDir = join(dir.path, 'cache');
    const help = await run(cacheDir, '--help');
    expect(caches(cacheDir).map((c) => c.keys)).toEqual([['']]);
    expect(await run(cacheDir, '--help')).toBe(help);
    const version = await run(cacheDir, 'version', '--address', join(dir.path, 'none.sock'));
    expect(version).toMatch(/^allocnet \S+$/m);
    expect(caches(cacheDir).map((c) => c.keys)).toEqual([['', 'version']]);
  }, 60_000);
});
