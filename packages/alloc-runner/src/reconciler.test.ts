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
  emptyHostState,
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

  /** Holds the configurator's calls of `method` (the first id of a batch, or `*`) until released. */
  function hold(method: 'reapLeaks' | 'reapBatch' | 'reapOrphans', keys: readonly string[]) {
    const arrived = new Map(keys.map((k) => [k, createDeferred()]));
    const release = new Map(keys.map((k) => [k, createDeferred()]));
    configurator.before = async (call) => {
      if (call.method !== method) return;
      const key = call.allocIds?.[0] ?? '*';
      arrived.get(key)?.resolve();
      await release.get(key)?.promise;
    };
    return {
      arrived: (key: string) => arrived.get(key)?.promise,
      release: (key: string) => release.get(key)?.resolve(),
    };
  }

  const orphanRule = {
    family: 'ipv4' as const,
    table: 'filter',
    chain: 'CNI-FORWARD',
    line: '-A CNI-FORWARD -s 172.26.64.99/32 -j ACCEPT',
  };

  it('sets up a new allocation beside the reap, before it ends, and has the configurator spare it', async () => {
    await start();
    await runner.setup(spec(A));
    configurator.leak(C);
    const order: string[] = [];
    const scan = hold('reapLeaks', ['*']);
    const reaping = runner.reapLeaks().then((report) => {
      order.push('reap done');
      return report;
    });
    await scan.arrived('*');
    // B's setup runs while the reap is in its scan, and answers first.
    await runner.setup(spec(B));
    order.push('B ready');
    scan.release('*');
    const report = await reaping;

    expect(order).toEqual(['B ready', 'reap done']);
    expect(report.reaped.map((l) => l.allocId)).toEqual([C]);
    expect(configurator.callsOf('reapBatch')).toEqual([
      { method: 'reapBatch', allocIds: [C], spared: [B] },
    ]);
    expect([...configurator.attached.keys()].sort()).toEqual([A, B].sort());
    expect([runner.get(A)?.phase, runner.get(B)?.phase]).toEqual(['ready', 'ready']);
  });

  it('tears down and checks a known allocation while a batch is being removed', async () => {
    await start();
    await runner.setup(spec(A));
    await runner.setup(spec(B));
    configurator.leak(C);
    const batch = hold('reapBatch', [C]);
    const reaping = runner.reapLeaks();
    await batch.arrived(C);
    expect(await runner.check(B)).toEqual({ allocId: B, ran: true });
    await runner.teardown(A);
    expect(runner.get(A)).toBeUndefined();
    batch.release(C);
    expect((await reaping).reaped.map((l) => l.allocId)).toEqual([C]);
    expect([...configurator.attached.keys()]).toEqual([B]);
  });

  it('holds an operation on an allocation being reaped until its own batch is done, no longer', async () => {
    await start();
    configurator.leak(C).leak(D);
    const batches = hold('reapBatch', [C, D]);
    const order: string[] = [];
    const reaping = runner.reapLeaks({ batchSize: 1 }).then(() => order.push('reap done'));
    await batches.arrived(C);
    const teardownC = runner.teardown(C).then(() => order.push('C torn down'));
    await setImmediate();
    // C's batch is under way: its teardown waits, and nothing of it reached the configurator.
    expect(configurator.callsOf('teardown')).toEqual([]);
    await runner.setup(spec(B));
    order.push('B ready');

    batches.release(C);
    await batches.arrived(D);
    await teardownC;
    // C's teardown went on once C's batch was done, while D's batch is still being removed.
    expect(order).toEqual(['B ready', 'C torn down']);
    expect(configurator.callsOf('teardown').map((c) => c.allocId)).toEqual([C]);
    batches.release(D);
    await reaping;
    expect(order).toEqual(['B ready', 'C torn down', 'reap done']);
    expect(configurator.callsOf('reapBatch')).toEqual([
      { method: 'reapBatch', allocIds: [C], spared: [] },
      { method: 'reapBatch', allocIds: [D], spared: [B] },
    ]);
  });

  it('leaves the orphans of a reap that a setup ran beside, and removes them on a quiet one', async () => {
    await start();
    configurator.orphans = { ...emptyHostState, rules: [orphanRule] };
    const scan = hold('reapLeaks', ['*']);
    const reaping = runner.reapLeaks();
    await scan.arrived('*');
    await runner.setup(spec(B));
    scan.release('*');
    expect((await reaping).orphans).toEqual(emptyHostState);
    expect(configurator.callsOf('reapOrphans')).toEqual([]);
    expect(configurator.orphans.rules).toEqual([orphanRule]);

    configurator.before = undefined;
    expect((await runner.reapLeaks()).orphans.rules).toEqual([orphanRule]);
    expect(configurator.callsOf('reapOrphans')).toEqual([{ method: 'reapOrphans', spared: [] }]);
    expect(configurator.orphans).toEqual(emptyHostState);
  });

  it('holds operations while the orphans go, and lets them go after', async () => {
    await start();
    await runner.setup(spec(A));
    configurator.orphans = { ...emptyHostState, rules: [orphanRule] };
    const orphans = hold('reapOrphans', ['*']);
    const order: string[] = [];
    const reaping = runner.reapLeaks().then(() => order.push('reap done'));
    await orphans.arrived('*');
    const checked = runner.check(A).then(() => order.push('A checked'));
    await setImmediate();
    expect(configurator.callsOf('check')).toEqual([]);
    orphans.release('*');
    await Promise.all([reaping, checked]);
    expect(order).toEqual(['reap done', 'A checked']);
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
