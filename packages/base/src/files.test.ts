import { spawnSync } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  isStaleTemporary,
  listTemporaries,
  nodeWriteFs,
  parseTemporary,
  procProcessTable,
  removeStaleTemporaries,
  temporaryPath,
  writeFileDurably,
} from './files.js';
import type { ProcessTable, WriteFs } from './files.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'allocnet-files-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** An errno error as node:fs throws it. */
function errnoError(code: string, syscall: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: ${syscall} failed`), { code, syscall });
}

type Step = 'writeSync' | 'fdatasync' | 'closeSync' | 'renameSync' | 'fsync';

/** node:fs, with `failing` steps throwing (or rejecting) their error; records the calls. */
function failingFs(failing: Partial<Record<Step, NodeJS.ErrnoException>>): {
  fs: WriteFs;
  calls: string[];
} {
  const calls: string[] = [];
  const fail = (step: Step) => {
    calls.push(step);
    const error = failing[step];
    if (error !== undefined) throw error;
  };
  return {
    calls,
    fs: {
      openSync: (p, f, m) => {
        calls.push('openSync');
        return nodeWriteFs.openSync(p, f, m);
      },
      writeSync: (fd, text) => {
        fail('writeSync');
        return nodeWriteFs.writeSync(fd, text);
      },
      fdatasync: async (fd) => {
        fail('fdatasync');
        await nodeWriteFs.fdatasync(fd);
      },
      closeSync: (fd) => {
        // The descriptor is closed whatever the step says, so that the test leaks none.
        nodeWriteFs.closeSync(fd);
        fail('closeSync');
      },
      renameSync: (from, to) => {
        fail('renameSync');
        nodeWriteFs.renameSync(from, to);
      },
      fsync: async (fd) => {
        fail('fsync');
        await nodeWriteFs.fsync(fd);
      },
      unlinkSync: (p) => {
        calls.push('unlinkSync');
        nodeWriteFs.unlinkSync(p);
      },
    },
  };
}

describe('writeFileDurably', () => {
  it('writes the file through a synced temporary, renamed into place, leaving nothing else', async () => {
    const { fs, calls } = failingFs({});
    const file = join(dir, 'sub', 'state.json');
    await writeFileDurably(file, '{"a":1}', { fs });
    expect(readFileSync(file, 'utf8')).toBe('{"a":1}');
    expect(readdirSync(join(dir, 'sub'))).toEqual(['state.json']);
    expect(calls).toEqual([
      'openSync',
      'writeSync',
      'fdatasync',
      'closeSync',
      'renameSync',
      'openSync',
      'fsync',
      'closeSync',
    ]);
  });

  it.each<[Step]>([['writeSync'], ['fdatasync'], ['closeSync'], ['renameSync']])(
    'removes the temporary when %s fails, keeps the old file, and throws that error',
    async (step) => {
      const file = join(dir, 'state.json');
      writeFileSync(file, 'old');
      const error = errnoError('ENOSPC', step);
      const { fs, calls } = failingFs({ [step]: error });
      await expect(writeFileDurably(file, 'new', { fs })).rejects.toBe(error);
      expect(readdirSync(dir)).toEqual(['state.json']);
      expect(readFileSync(file, 'utf8')).toBe('old');
      expect(calls.at(-1)).toBe('unlinkSync');
    },
  );

  it('keeps the first error when the close after a failed write fails too', async () => {
    const first = errnoError('ENOSPC', 'write');
    const { fs } = failingFs({ writeSync: first, closeSync: errnoError('EIO', 'close') });
    await expect(writeFileDurably(join(dir, 'f'), 'x', { fs })).rejects.toBe(first);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('throws a failed directory sync with the new file in place and no temporary', async () => {
    const error = errnoError('EIO', 'fsync');
    const { fs } = failingFs({ fsync: error });
    await expect(writeFileDurably(join(dir, 'f'), 'x', { fs })).rejects.toBe(error);
    expect(readdirSync(dir)).toEqual(['f']);
  });

  it('writes with the mode asked for (0600 by default)', async () => {
    await writeFileDurably(join(dir, 'a'), 'x');
    await writeFileDurably(join(dir, 'b'), 'x', { mode: 0o640 });
    expect(statSync(join(dir, 'a')).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'b')).mode & 0o777).toBe(0o640);
  });
});

describe('temporaries', () => {
  it('names a temporary after its target and writer, and reads the name back', () => {
    const path = temporaryPath('/d/nomad-a1-eth0', 4242, '0badcafe');
    expect(path).toBe('/d/.nomad-a1-eth0.4242.0badcafe.tmp');
    expect(parseTemporary('.nomad-a1-eth0.4242.0badcafe.tmp')).toEqual({
      target: 'nomad-a1-eth0',
      pid: 4242,
    });
    expect(parseTemporary('nomad-a1-eth0')).toBeUndefined();
    expect(parseTemporary('.lock')).toBeUndefined();
    expect(parseTemporary('.x.0.0badcafe.tmp')).toBeUndefined();
    expect(parseTemporary('.x.12.0BADCAFE.tmp')).toBeUndefined();
  });

  it('lists the temporaries of a directory (of one target when asked), none of a missing one', async () => {
    writeFileSync(join(dir, 'ready.json'), '{}');
    writeFileSync(join(dir, '.ready.json.12.00000001.tmp'), '');
    writeFileSync(join(dir, '.other.13.00000002.tmp'), '');
    writeFileSync(join(dir, '.lock'), '');
    expect((await listTemporaries(dir)).map((t) => [t.target, t.pid])).toEqual([
      ['other', 13],
      ['ready.json', 12],
    ]);
    expect((await listTemporaries(dir, { target: 'ready.json' })).map((t) => t.path)).toEqual([
      join(dir, '.ready.json.12.00000001.tmp'),
    ]);
    expect(await listTemporaries(join(dir, 'missing'))).toEqual([]);
  });

  /** A process table of given start times. */
  const table = (started: Record<number, number>): ProcessTable => ({
    startedAtMs: (pid) => started[pid],
  });

  it('calls a temporary stale when its writer is gone or its pid was used again, never our own', () => {
    const processes = table({ [process.pid]: 0, 7: 1_000, 8: 50_000 });
    expect(isStaleTemporary({ pid: process.pid, mtimeMs: 0 }, processes)).toBe(false);
    // A live writer: started before it wrote.
    expect(isStaleTemporary({ pid: 7, mtimeMs: 10_000 }, processes)).toBe(false);
    // Within the slack of /proc's whole-second boot time.
    expect(isStaleTemporary({ pid: 8, mtimeMs: 48_500 }, processes)).toBe(false);
    // Pid 8 started well after the temporary was written: another process.
    expect(isStaleTemporary({ pid: 8, mtimeMs: 10_000 }, processes)).toBe(true);
    // No such process.
    expect(isStaleTemporary({ pid: 9, mtimeMs: 10_000 }, processes)).toBe(true);
  });

  it("reads start times from /proc: this process started before now, a dead child's is gone", () => {
    const started = procProcessTable.startedAtMs(process.pid);
    expect(started).toBeLessThanOrEqual(Date.now());
    expect(started).toBeGreaterThan(Date.now() - 24 * 3600 * 1000 * 365);
    const child = spawnSync('true');
    expect(child.pid).toBeGreaterThan(0);
    expect(procProcessTable.startedAtMs(child.pid)).toBeUndefined();
  });

  it('removes the stale temporaries only: a live writer’s and our own stay, other files too', async () => {
    const dead = spawnSync('true').pid;
    const names = {
      dead: `.nomad-a-eth0.${dead}.00000001.tmp`,
      ours: `.nomad-b-eth0.${process.pid}.00000002.tmp`,
      parent: `.nomad-c-eth0.${process.ppid}.00000003.tmp`,
      reused: `.nomad-d-eth0.${process.ppid}.00000004.tmp`,
    };
    for (const name of Object.values(names)) writeFileSync(join(dir, name), '');
    const ready = `.ready.json.${dead}.00000005.tmp`;
    const otherReady = `.other.json.${dead}.00000006.tmp`;
    writeFileSync(join(dir, 'nomad-a-eth0'), '{}');
    writeFileSync(join(dir, '.lock'), '');
    // Written long before our parent started: its pid was someone else's then.
    utimesSync(join(dir, names.reused), 1, 1);
    const sub = join(dir, 'ready');
    mkdirSync(sub);
    writeFileSync(join(sub, ready), '');
    writeFileSync(join(sub, otherReady), '');
    const removed = await removeStaleTemporaries([
      { dir },
      { dir: sub, target: 'ready.json' },
      { dir: join(dir, 'missing') },
    ]);
    expect(removed).toEqual([join(dir, names.dead), join(dir, names.reused), join(sub, ready)]);
    expect(readdirSync(dir).sort()).toEqual(
      ['.lock', names.ours, names.parent, 'nomad-a-eth0', 'ready'].sort(),
    );
    expect(readdirSync(sub)).toEqual([otherReady]);
  });
});
