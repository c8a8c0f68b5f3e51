import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open } from 'lmdb';
import { isRunnerError } from './errors.js';
import type { AllocRecord } from './record.js';
import { realRoomSystem } from './room.js';
import { SCHEMA_KEY, isNoSpace, openRunnerStore } from './store.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'allocnet-runner-store-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const RECORD: AllocRecord = {
  schema: 1,
  allocId: 'a1',
  spec: { allocId: 'a1', namespace: 'default', jobId: 'web', groupName: 'g' },
  phase: 'setting-up',
  netnsPath: '/run/netns/alloc-a1',
  netnsCreated: true,
  updatedAtMs: 5,
};

/** Writes raw entries as an older (or another) version would have, then closes. */
async function seed(entries: Record<string, unknown>): Promise<void> {
  const db = open({ path: join(dir, 'state'), encoding: 'json', overlappingSync: false });
  for (const [key, value] of Object.entries(entries)) await db.put(key, value);
  await db.close();
}

async function refusal(options: Parameters<typeof openRunnerStore>[0]): Promise<[string, string]> {
  try {
    const store = await openRunnerStore(options);
    await store.close();
  } catch (error) {
    if (!isRunnerError(error)) throw error;
    return [error.code, error.message];
  }
  throw new Error('the store opened');
}

describe('openRunnerStore', () => {
  it('makes a new store at schema 1 and keeps records across a reopen', async () => {
    const store = await openRunnerStore({ dataDir: dir });
    expect(store.path).toBe(join(dir, 'state'));
    await store.put(RECORD);
    await store.put({ ...RECORD, allocId: 'a0', spec: { ...RECORD.spec, allocId: 'a0' } });
    await store.close();

    const again = await openRunnerStore({ dataDir: dir });
    expect(again.list().map((r) => r.allocId)).toEqual(['a0', 'a1']);
    expect(again.get('a1')).toEqual(RECORD);
    await again.remove('a1');
    await again.close();

    const db = open({ path: join(dir, 'state'), encoding: 'json' });
    expect(db.get(SCHEMA_KEY)).toBe(1);
    expect(db.get('alloc/a1')).toBeUndefined();
    await db.close();
  });

  it('refuses a store written by a newer schema', async () => {
    await seed({ [SCHEMA_KEY]: 2, 'alloc/a1': { whatever: true } });
    expect(await refusal({ dataDir: dir })).toEqual([
      'store',
      `the state store "${dir}/state" has schema 2, newer than this agent's 1: run an agent that knows schema 2, or move the store away`,
    ]);
  });

  it('refuses entries without a schema key when there is no migration from schema 0', async () => {
    await seed({ 'alloc/a1': { id: 'a1' } });
    expect(await refusal({ dataDir: dir })).toEqual([
      'store',
      `the state store "${dir}/state" has schema 0 and there is no migration from schema 0 to 1`,
    ]);
  });

  it('migrates a schema-0 fixture through the migrations table, in one transaction', async () => {
    // A made-up first shape: `{ id, state, ns }` under `a/<id>`.
    await seed({ 'a/a1': { id: 'a1', state: 'up', ns: '/run/netns/alloc-a1' } });
    const store = await openRunnerStore({
      dataDir: dir,
      migrations: {
        0(db) {
          for (const key of db.keys('a/')) {
            const old = db.get(key) as { id: string; ns: string };
            db.put(`alloc/${old.id}`, {
              ...RECORD,
              allocId: old.id,
              netnsPath: old.ns,
              phase: 'failed',
              error: 'migrated',
            });
            db.remove(key);
          }
        },
      },
    });
    expect(store.list()).toEqual([
      { ...RECORD, phase: 'failed', error: 'migrated', netnsPath: '/run/netns/alloc-a1' },
    ]);
    await store.close();
  });

  it('leaves the store at its old schema when a migration throws', async () => {
    await seed({ 'a/a1': { id: 'a1' } });
    const migrations = {
      0(db: { put(k: string, v: unknown): void }) {
        db.put('alloc/x', RECORD);
        throw new Error('boom');
      },
    };
    expect(await refusal({ dataDir: dir, migrations })).toEqual([
      'store',
      `migrating the state store "${dir}/state" from schema 0 to 1 failed: boom`,
    ]);
    const db = open({ path: join(dir, 'state'), encoding: 'json' });
    expect([db.get(SCHEMA_KEY), db.get('alloc/x'), db.get('a/a1')]).toEqual([
      undefined,
      undefined,
      { id: 'a1' },
    ]);
    await db.close();
  });

  it('refuses a record it cannot read, naming the key and the field', async () => {
    await seed({ [SCHEMA_KEY]: 1, 'alloc/a1': { ...RECORD, phase: 'halfway' } });
    expect(await refusal({ dataDir: dir })).toEqual([
      'store',
      `the state store "${dir}/state" has an unreadable record "alloc/a1": phase should be "setting-up" | "ready" | "tearing-down" | "failed", got "halfway"`,
    ]);
  });

  it('refuses writes after close', async () => {
    const store = await openRunnerStore({ dataDir: dir });
    await store.close();
    await expect(store.put(RECORD)).rejects.toThrow(
      `writing the record of allocation "a1" failed: the state store "${dir}/state" is closed`,
    );
  });
});

describe('the store on a full disk (its room, room.ts)', () => {
  /** The real system calls, with the free space the test says. */
  const roomWith = (space: { free: number }) => ({
    ...realRoomSystem,
    available: () => space.free,
  });

  it('refuses to make a new store where its first write has no room, and says so', async () => {
    expect(await refusal({ dataDir: dir, roomSystem: roomWith({ free: 4096 }) })).toEqual([
      'store-full',
      `writing the schema version failed: the data dir "${dir}" has no space left (No space left on device: 4096 bytes free, and a write may need 36864); nothing was changed, and writes work again once space is freed there`,
    ]);
  });

  it('bounds a write by its bytes, not its characters', async () => {
    const space = { free: 1 << 30 };
    const store = await openRunnerStore({ dataDir: dir, roomSystem: roomWith(space) });
    space.free = 0;
    // 3,000 characters that are 6,000 bytes in UTF-8: two pages of value, not one.
    const wide = { ...RECORD, spec: { ...RECORD.spec, jobId: 'é'.repeat(3000) } };
    await expect(store.put(wide)).rejects.toThrow('a write may need 40960)');
    await store.close();
  });

  it('refuses a write before LMDB sees it, reports it, and takes the next one once there is room', async () => {
    const space = { free: 1 << 30 };
    const store = await openRunnerStore({
      dataDir: dir,
      roomSystem: roomWith(space),
      now: () => 7,
    });
    space.free = 0;
    await expect(store.put(RECORD)).rejects.toThrow(
      `writing the record of allocation "a1" failed: the data dir "${dir}" has no space left (No space left on device: 0 bytes free, and a write may need 36864); nothing was changed, and writes work again once space is freed there`,
    );
    expect(await store.probe()).toBe(false);
    expect(store.health()).toEqual({
      writable: false,
      problem: `the data dir "${dir}" has no space left (No space left on device: 0 bytes free, and a write may need 36864)`,
      sinceMs: 7,
      writeFailures: 2,
    });
    expect(store.get('a1')).toBeUndefined();
    space.free = 1 << 30;
    await store.put(RECORD);
    expect(store.health()).toEqual({ writable: true, writeFailures: 2 });
    await store.close();
    const again = await openRunnerStore({ dataDir: dir });
    expect(again.list()).toEqual([RECORD]);
    await again.close();
  });
});

describe('isNoSpace', () => {
  it('decides by the code lmdb-js and fs give, never by the message', () => {
    // lmdb-js: the errno as `code`; fs: `code` ENOSPC / EDQUOT and a negative `errno`.
    const lmdb = Object.assign(new Error('No space left on device'), { code: 28 });
    const fs = Object.assign(new Error('ENOSPC: no space left on device, write'), {
      code: 'ENOSPC',
      errno: -28,
    });
    const quota = Object.assign(new Error('whatever the libc says'), { code: 122 });
    expect([lmdb, fs, quota].map(isNoSpace)).toEqual([true, true, true]);
    // The same words without the code: another failure (before, the text alone said "full").
    const words = new Error('MDB_PROBLEM: No space left on device');
    const other = Object.assign(new Error('No space left on device'), { code: 5 });
    expect([words, other, 'No space left on device'].map(isNoSpace)).toEqual([false, false, false]);
  });
});
