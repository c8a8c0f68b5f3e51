// Stray namespaces (`<netnsPrefix><id>` that no allocation has) in the operators' findLeaks and
// reapLeaks and in the reconciler, against the recording fakes and a real LMDB store: what counts
// as stray, what is never removed (an allocation's own namespace, one given to an allocation by
// path, one whose allocation got a record while the reap ran) and what a failed removal reports.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate } from 'node:timers/promises';
import { RunnerError } from './errors.js';
import { createAllocRunner } from './runner.js';
import type { AllocRunner, AllocRunnerOptions } from './runner.js';
import type { RunnerSpec } from './spec.js';
import {
  createDeferred,
  createManualClock,
  createRecordingConfigurator,
  createRecordingNetns,
} from './testing/index.js';
import type { RecordingConfigurator, RecordingNetns } from './testing/index.js';

const A = '6b235529-8111-4bbe-520b-d639b1d2a94e';
const B = '0c1d2e3f-0000-4000-8000-00000000000b';
const C = '0c1d2e3f-0000-4000-8000-00000000000c';
const D = '0c1d2e3f-0000-4000-8000-00000000000d';
const REASON = `named like this agent's allocations (prefix "alloc-") but no allocation has it`;

function spec(allocId: string, extra: Partial<RunnerSpec> = {}): RunnerSpec {
  return { allocId, namespace: 'default', jobId: 'web', groupName: 'api', ...extra };
}

function stray(allocId: string) {
  return { name: `alloc-${allocId}`, path: `/run/netns/alloc-${allocId}`, allocId, reason: REASON };
}

let dir: string;
let runner: AllocRunner;
let configurator: RecordingConfigurator;
let netns: RecordingNetns;

async function start(options: Partial<AllocRunnerOptions> = {}): Promise<void> {
  runner = await createAllocRunner({
    dataDir: dir,
    clock: createManualClock(1_000),
    crashPoints: { reached: () => undefined },
    reconcile: { mode: 'report', intervalMs: 0 },
    ...options,
    configurator,
    netns,
  });
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'allocnet-reconciler-'));
  configurator = createRecordingConfigurator();
  netns = createRecordingNetns();
});
afterEach(async () => {
  try {
    await runner.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

/** A (the runner's own), B (given a path that carries the prefix), C and D stray, and others. */
async function plant(): Promise<void> {
  await runner.setup(spec(A));
  netns.add(`alloc-${C}`).add(`alloc-${D}`).add('alloc-').add('alloc-a;b').add('other-ns');
  netns.add('alloc-given-to-b');
  await runner.setup(spec(B, { netnsPath: '/run/netns/alloc-given-to-b' }));
}

describe("the operators' findLeaks", () => {
  it('lists the stray namespaces with their path and why, and no allocation’s namespace', async () => {
    await start();
    await plant();

    const report = await runner.findLeaks();

    expect(report.namespaces).toEqual([stray(C), stray(D)]);
    expect(report.leaks).toEqual([]);
    expect([...netns.names]).toContain(`alloc-${C}`);
    expect(netns.callsOf('remove')).toEqual([]);
    expect(runner.stats()).toMatchObject({ orphanNamespacesFound: 2, orphanNamespacesReaped: 0 });
  });

  it('leaves out a namespace whose allocation has an operation queued or running', async () => {
    await start();
    netns.add(`alloc-${C}`);
    const arrived = createDeferred();
    const release = createDeferred();
    configurator.before = async (call) => {
      if (call.method !== 'teardown') return;
      arrived.resolve();
      await release.promise;
    };
    // A teardown of an unknown allocation: it will remove the namespace itself.
    const teardown = runner.teardown(C);
    await arrived.promise;

    expect((await runner.findLeaks()).namespaces).toEqual([]);

    release.resolve();
    await teardown;
    expect(netns.names.has(`alloc-${C}`)).toBe(false);
  });
});

describe("the operators' reapLeaks", () => {
  it('removes the stray namespaces and reports them, leaving every allocation’s namespace', async () => {
    await start();
    await plant();

    const report = await runner.reapLeaks();

    expect(report.namespaces).toEqual([stray(C), stray(D)]);
    expect(report.namespaceFailures).toEqual([]);
    expect(netns.callsOf('remove')).toEqual([
      { method: 'remove', arg: `alloc-${C}` },
      { method: 'remove', arg: `alloc-${D}` },
    ]);
    expect([...netns.names].sort()).toEqual(
      ['alloc-', 'alloc-a;b', `alloc-${A}`, 'alloc-given-to-b', 'other-ns'].sort(),
    );
    expect(runner.stats()).toMatchObject({ orphanNamespacesFound: 2, orphanNamespacesReaped: 2 });
    expect((await runner.findLeaks()).namespaces).toEqual([]);
  });

  it('leaves a namespace whose allocation got its record while the reap ran', async () => {
    await start();
    // The setup of C starts after the reap counted its live ids and before it lists the
    // namespaces: the reap sees `alloc-C` with no record, then waits for C's turn in the queue.
    const setupArrived = createDeferred();
    const setupRelease = createDeferred();
    configurator.before = async (call) => {
      if (call.method !== 'setup') return;
      setupArrived.resolve();
      await setupRelease.promise;
    };
    let setupC: Promise<unknown> | undefined;
    netns.before = async (call) => {
      if (call.method !== 'list' || setupC !== undefined) return;
      setupC = runner.setup(spec(C));
      await setupArrived.promise;
    };
    const reaping = runner.reapLeaks();
    await setupArrived.promise;
    // The namespace exists and the reap is waiting for C's turn: nothing was removed.
    expect(netns.names.has(`alloc-${C}`)).toBe(true);
    expect(netns.callsOf('remove')).toEqual([]);

    setupRelease.resolve();
    await setupC;
    const report = await reaping;

    expect(report.namespaces).toEqual([]);
    expect(report.namespaceFailures).toEqual([]);
    expect(netns.names.has(`alloc-${C}`)).toBe(true);
    expect(netns.callsOf('remove')).toEqual([]);
    expect(runner.get(C)?.phase).toBe('ready');
  });

  it('holds a setup that arrives while the configurator reaps, and spares one under way', async () => {
    await start();
    // A's setup is under way (its ADD held) when the reap starts; B's arrives during the reap.
    const addArrived = createDeferred();
    const addRelease = createDeferred();
    const reapArrived = createDeferred();
    const reapRelease = createDeferred();
    configurator.before = async (call) => {
      if (call.method === 'setup' && call.allocId === A) {
        addArrived.resolve();
        await addRelease.promise;
      }
      if (call.method === 'reapLeaks') {
        reapArrived.resolve();
        await reapRelease.promise;
      }
    };
    const setupA = runner.setup(spec(A));
    await addArrived.promise;
    const reaping = runner.reapLeaks();
    await reapArrived.promise;
    const setupB = runner.setup(spec(B));
    await setImmediate();
    // B waits for the reap before its turn starts (A's setup runs, B's waits); A, counted as
    // known, is not waited for.
    expect(runner.stats()).toMatchObject({ running: 1, waiting: 1 });
    expect(configurator.callsOf('reapLeaks')).toEqual([{ method: 'reapLeaks', known: [A] }]);
    expect(configurator.callsOf('setup').map((c) => c.allocId)).toEqual([A]);
    expect(runner.get(B)).toBeUndefined();

    reapRelease.resolve();
    await setupB;
    expect(configurator.callsOf('setup').map((c) => c.allocId)).toEqual([A, B]);
    addRelease.resolve();
    await Promise.all([setupA, reaping]);
    expect([runner.get(A)?.phase, runner.get(B)?.phase]).toEqual(['ready', 'ready']);
  });

  it('reports a namespace it could not remove, and goes on with the next', async () => {
    await start();
    netns.add(`alloc-${C}`).add(`alloc-${D}`);
    netns.fail(
      'remove',
      new RunnerError(
        `ip netns delete alloc-${C} failed (exit status 1): Device or resource busy`,
        {
          code: 'netns',
        },
      ),
    );

    const report = await runner.reapLeaks();

    expect(report.namespaces).toEqual([stray(D)]);
    expect(report.namespaceFailures).toEqual([
      {
        namespace: stray(C),
        error: `ip netns delete alloc-${C} failed (exit status 1): Device or resource busy`,
      },
    ]);
    expect([...netns.names]).toEqual([`alloc-${C}`]);
    expect(runner.stats()).toMatchObject({ orphanNamespacesFound: 2, orphanNamespacesReaped: 1 });
  });
});

describe('the reconciler', () => {
  it('never reaps a namespace an allocation was given by path, even with the prefix', async () => {
    await start({ reconcile: { mode: 'reap', intervalMs: 0 } });
    await plant();

    const report = await runner.reconcile();

    expect(report).toMatchObject({ orphanNamespaces: 2, reapedNamespaces: 2, failed: [] });
    expect([...netns.names].sort()).toEqual(
      ['alloc-', 'alloc-a;b', `alloc-${A}`, 'alloc-given-to-b', 'other-ns'].sort(),
    );
    expect(runner.get(B)?.phase).toBe('ready');
  });

  it('names the namespace it could not reap', async () => {
    await start({ reconcile: { mode: 'reap', intervalMs: 0 } });
    netns.add(`alloc-${C}`);
    netns.fail('remove', new RunnerError('ip netns delete failed', { code: 'netns' }));

    expect(await runner.reconcile()).toMatchObject({
      orphanNamespaces: 1,
      reapedNamespaces: 0,
      failed: [{ what: `namespace "alloc-${C}"`, error: 'ip netns delete failed' }],
    });
    expect(runner.stats().strayNamespacesLeft).toBe(1);
  });
});
