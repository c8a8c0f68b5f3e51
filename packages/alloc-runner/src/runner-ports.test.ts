// The runner's host-port claims (port-claims.ts) against the recording fakes and a real LMDB
// store: a setup asking for a host port another live allocation maps is refused before anything
// is written or run, race-free between setups started together, across a restart; the claim goes
// with the record (teardown, rollback, a restore that records `failed`).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AllocRecord } from './record.js';
import { createAllocRunner } from './runner.js';
import type { AllocRunner } from './runner.js';
import type { RunnerSpec } from './spec.js';
import { openRunnerStore } from './store.js';
import type { RunnerStore } from './store.js';
import {
  createDeferred,
  createManualClock,
  createRecordingConfigurator,
  createRecordingNetns,
  fillable,
  runnerRejection,
} from './testing/index.js';
import type { RecordingConfigurator, RecordingNetns } from './testing/index.js';

const A = '6b235529-8111-4bbe-520b-d639b1d2a94e';
const B = '0c1d2e3f-0000-4000-8000-00000000000b';
const C = '0c1d2e3f-0000-4000-8000-00000000000c';

const REFUSED_B = `setup of allocation "${B}" refused: spec.ports[0].value ("web"): host port 28080/tcp on every address is already mapped by allocation "${A}"`;

/** An allocation with host port 28080 (tcp and udp) on every address, or on `hostIp`. */
function spec(allocId: string, hostIp?: string): RunnerSpec {
  return {
    allocId,
    namespace: 'default',
    jobId: 'web',
    groupName: 'api',
    ports: [{ label: 'web', value: 28080, to: 8080, ...(hostIp === undefined ? {} : { hostIp }) }],
  };
}

let dir: string;
let opened: AllocRunner[];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'allocnet-ports-'));
  opened = [];
});
afterEach(async () => {
  for (const r of opened) await r.close();
  await rm(dir, { recursive: true, force: true });
});

async function make(
  configurator: RecordingConfigurator = createRecordingConfigurator(),
  netns: RecordingNetns = createRecordingNetns(),
  store?: RunnerStore,
): Promise<{ runner: AllocRunner; configurator: RecordingConfigurator; netns: RecordingNetns }> {
  const runner = await createAllocRunner({
    dataDir: dir,
    clock: createManualClock(1_000),
    crashPoints: { reached: () => undefined },
    reconcile: { mode: 'report', intervalMs: 0 },
    configurator,
    netns,
    ...(store === undefined ? {} : { store }),
  });
  opened.push(runner);
  return { runner, configurator, netns };
}

const rejection = runnerRejection;

/** What a refusal must leave: no record, no namespace, no configurator call for `allocId`. */
function untouched(
  runner: AllocRunner,
  configurator: RecordingConfigurator,
  netns: RecordingNetns,
  allocId: string,
) {
  return {
    record: runner.get(allocId),
    configurator: configurator.calls.filter((c) => c.allocId === allocId),
    netns: netns.calls.filter((c) => String(c.arg).endsWith(allocId)),
  };
}

const NOTHING = { record: undefined, configurator: [], netns: [] };

describe('host-port claims', () => {
  it('refuses a second allocation on a mapped host port before anything is written or run', async () => {
    const { runner, configurator, netns } = await make();
    await runner.setup(spec(A));
    const error = await rejection(runner.setup(spec(B)));
    expect([error.code, error.kind, error.field, error.allocId, error.message]).toEqual([
      'host-port-taken',
      'conflict',
      'spec.ports[0].value',
      B,
      REFUSED_B,
    ]);
    expect(untouched(runner, configurator, netns, B)).toEqual(NOTHING);
    expect(runner.stats().setupFailures).toBe(1);
    // A is as it was, and its own setup again with the same spec is not a conflict.
    await expect(runner.setup(spec(A))).resolves.toEqual(runner.get(A)?.status);
  });

  it('lets a port on another host address through, and refuses one on that address', async () => {
    const { runner } = await make();
    await runner.setup(spec(A, '10.0.0.1'));
    await runner.setup(spec(B, '10.0.0.2'));
    expect((await rejection(runner.setup(spec(C)))).message).toBe(
      `setup of allocation "${C}" refused: spec.ports[0].value ("web"): host port 28080/tcp on every address is already mapped by allocation "${A}" (on 10.0.0.1)`,
    );
  });

  it('admits exactly one of two setups started in the same tick, refusing the other while the first runs', async () => {
    const { runner, configurator, netns } = await make();
    const arrived = createDeferred();
    const go = createDeferred();
    configurator.before = async (call) => {
      if (call.method !== 'setup') return;
      arrived.resolve();
      await go.promise;
    };
    const first = runner.setup(spec(A));
    const second = runner.setup(spec(B));
    // B is refused while A's ADD is held: A's claim was taken before its intent record.
    const error = await rejection(second);
    await arrived.promise;
    expect([error.code, error.message, runner.get(A)?.phase]).toEqual([
      'host-port-taken',
      REFUSED_B,
      'setting-up',
    ]);
    go.resolve();
    await first;
    expect(untouched(runner, configurator, netns, B)).toEqual(NOTHING);
    expect(runner.get(A)?.phase).toBe('ready');
  });

  it('gives the port to the next allocation once the holder is torn down', async () => {
    const { runner } = await make();
    await runner.setup(spec(A));
    await runner.teardown(A);
    await expect(runner.setup(spec(B))).resolves.toMatchObject({ allocId: B });
  });

  it('frees the port when the setup fails and is rolled back', async () => {
    const { runner, configurator } = await make();
    configurator.fail('setup', new Error('bridge said no'));
    expect((await rejection(runner.setup(spec(A)))).code).toBe('setup-failed');
    await expect(runner.setup(spec(B))).resolves.toMatchObject({ allocId: B });
  });

  it('frees the port when the intent record cannot be written', async () => {
    const store = fillable(await openRunnerStore({ dataDir: dir }), dir);
    const { runner, configurator } = await make(undefined, undefined, store);
    store.full = true;
    expect((await rejection(runner.setup(spec(A)))).code).toBe('store-full');
    expect(configurator.calls).toEqual([]);
    store.full = false;
    await expect(runner.setup(spec(B))).resolves.toMatchObject({ allocId: B });
  });

  it('still refuses after a restart, from the records', async () => {
    const first = await make();
    await first.runner.setup(spec(A));
    await first.runner.close();
    const { runner, configurator, netns } = await make(first.configurator, first.netns);
    configurator.clearCalls();
    const error = await rejection(runner.setup(spec(B)));
    expect([error.code, error.message]).toEqual(['host-port-taken', REFUSED_B]);
    expect(untouched(runner, configurator, netns, B)).toEqual(NOTHING);
  });

  it('holds the ports of an intent record (no attachment yet) from its spec until restore settles it', async () => {
    await seed(record(A, { phase: 'setting-up' }));
    const { runner } = await make();
    expect((await rejection(runner.setup(spec(B)))).message).toBe(REFUSED_B);
    // The restore undoes the interrupted setup and records it failed: the port is free.
    await runner.start();
    expect(runner.get(A)?.phase).toBe('failed');
    await expect(runner.setup(spec(B))).resolves.toMatchObject({ allocId: B });
  });

  it('holds nothing for a failed record', async () => {
    await seed(record(A, { phase: 'failed', error: 'gone' }));
    const { runner } = await make();
    await expect(runner.setup(spec(B))).resolves.toMatchObject({ allocId: B });
  });

  it('lets a new setup replace a failed record of the same allocation', async () => {
    await seed(record(A, { phase: 'failed', error: 'gone' }));
    const { runner } = await make();
    await expect(runner.setup(spec(A))).resolves.toMatchObject({ allocId: A });
    expect((await rejection(runner.setup(spec(B)))).message).toBe(REFUSED_B);
  });
});

/** Writes records straight into the store: the state a crash leaves. */
async function seed(...records: AllocRecord[]): Promise<void> {
  const store = await openRunnerStore({ dataDir: dir });
  for (const r of records) await store.put(r);
  await store.close();
}

function record(allocId: string, over: Partial<AllocRecord>): AllocRecord {
  return {
    schema: 1,
    allocId,
    spec: spec(allocId),
    phase: 'setting-up',
    netnsPath: `/run/netns/alloc-${allocId}`,
    netnsCreated: true,
    updatedAtMs: 1,
    ...over,
  };
}
