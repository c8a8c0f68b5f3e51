// The runner against the recording fakes of the configurator and of `ip netns`, with a real LMDB
// store in a temporary directory: lifecycle, idempotence, rollback, ordering and parallelism,
// restore of every phase, the reconciler, shutdown.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate } from 'node:timers/promises';
import { CniError } from '@allocnet/cni';
import { ConfiguratorError } from '@allocnet/cni-configurator';
import type { CrashPoint } from './crash.js';
import type { AllocRecord } from './record.js';
import { createAllocRunner } from './runner.js';
import type { AllocRunner, AllocRunnerOptions } from './runner.js';
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
import type {
  ConfiguratorCall,
  Deferred,
  ManualClock,
  RecordingConfigurator,
  RecordingNetns,
} from './testing/index.js';

const A = '6b235529-8111-4bbe-520b-d639b1d2a94e';
const B = '0c1d2e3f-0000-4000-8000-00000000000b';
const C = '0c1d2e3f-0000-4000-8000-00000000000c';

function spec(allocId: string, extra: Partial<RunnerSpec> = {}): RunnerSpec {
  return { allocId, namespace: 'default', jobId: 'web', groupName: 'api', ...extra };
}

interface Harness {
  runner: AllocRunner;
  configurator: RecordingConfigurator;
  netns: RecordingNetns;
  clock: ManualClock;
  points: CrashPoint[];
}

let dir: string;
let opened: AllocRunner[];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'allocnet-runner-'));
  opened = [];
});
afterEach(async () => {
  for (const r of opened) await r.close();
  await rm(dir, { recursive: true, force: true });
});

/** A runner on the test's data dir; pass the fakes of a previous one to model the same host. */
async function make(
  options: Partial<AllocRunnerOptions> & {
    configurator?: RecordingConfigurator;
    netns?: RecordingNetns;
  } = {},
): Promise<Harness> {
  const configurator = options.configurator ?? createRecordingConfigurator();
  const netns = options.netns ?? createRecordingNetns();
  const clock = createManualClock(1_000);
  const points: CrashPoint[] = [];
  const runner = await createAllocRunner({
    dataDir: dir,
    clock,
    crashPoints: { reached: (p) => points.push(p) },
    // The tests were written against the library's old default, `reap`; `report` is tested by name.
    reconcile: { mode: 'reap', intervalMs: 0 },
    ...options,
    configurator,
    netns,
  });
  opened.push(runner);
  return { runner, configurator, netns, clock, points };
}

/** Writes records straight into the store: the state a crash at some point leaves. */
async function seed(...records: AllocRecord[]): Promise<void> {
  const store = await openRunnerStore({ dataDir: dir });
  for (const r of records) await store.put(r);
  await store.close();
}

function record(allocId: string, over: Partial<AllocRecord> = {}): AllocRecord {
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

const rejection = runnerRejection;

/** What the configurator throws when CHECK finds the network broken. */
function checkFailed(msg: string): ConfiguratorError {
  return new ConfiguratorError(msg, { code: 'check-failed' });
}

/** Holds the configurator's calls of `method` for the given ids until the test releases them. */
function holdCalls(
  configurator: RecordingConfigurator,
  method: ConfiguratorCall['method'],
  ids: readonly string[],
) {
  const arrived = new Map(ids.map((id) => [id, createDeferred()]));
  const release = new Map(ids.map((id) => [id, createDeferred()]));
  configurator.before = async (call) => {
    if (call.method !== method || call.allocId === undefined) return;
    arrived.get(call.allocId)?.resolve();
    await release.get(call.allocId)?.promise;
  };
  return {
    arrived: (id: string) => (arrived.get(id) as Deferred<void>).promise,
    release: (id: string) => {
      (release.get(id) as Deferred<void>).resolve();
    },
  };
}

describe('setup', () => {
  it('records the intent, makes the namespace, runs the configurator, records ready', async () => {
    const { runner, configurator, netns, points } = await make();
    const seen: string[] = [];
    netns.before = (call) => {
      if (call.method === 'create') seen.push(`create: record ${runner.get(A)?.phase ?? 'none'}`);
    };
    configurator.before = (call) => {
      seen.push(`${call.method}: record ${runner.get(A)?.phase ?? 'none'}`);
    };

    const status = await runner.setup(spec(A));

    expect(status).toEqual({
      allocId: A,
      network: 'nomad',
      interfaceName: 'eth0',
      address: '172.26.64.2',
      addressIpv6: '',
      dns: undefined,
      portMappings: [],
      attempts: 1,
    });
    expect(seen).toEqual(['create: record setting-up', 'setup: record setting-up']);
    expect(points).toEqual([
      'setup:after-intent',
      'setup:after-netns',
      'setup:after-add',
      'setup:after-ready',
    ]);
    expect(netns.callsOf('create')).toEqual([{ method: 'create', arg: `alloc-${A}` }]);
    expect(configurator.callsOf('setup')).toEqual([
      {
        method: 'setup',
        allocId: A,
        spec: spec(A),
        netns: `/run/netns/alloc-${A}`,
        ownNamespace: true,
      },
    ]);
    expect(runner.get(A)).toEqual({
      schema: 1,
      allocId: A,
      spec: spec(A),
      phase: 'ready',
      netnsPath: `/run/netns/alloc-${A}`,
      netnsCreated: true,
      attachment: configurator.attached.get(A),
      status,
      updatedAtMs: 1_000,
    });
  });

  it('keeps the record across a restart (it is committed before setup returns)', async () => {
    const first = await make();
    const status = await first.runner.setup(spec(A));
    await first.runner.close();
    const { runner } = await make({ configurator: first.configurator, netns: first.netns });
    expect(runner.get(A)?.status).toEqual(status);
  });

  it('returns the stored status for an equal spec, without a second ADD', async () => {
    const { runner, configurator } = await make();
    const status = await runner.setup(spec(A, { ports: [{ label: 'http', value: 8080, to: -1 }] }));
    const again = await runner.setup({
      groupName: 'api',
      jobId: 'web',
      namespace: 'default',
      allocId: A,
      network: '',
      ports: [{ value: 8080, label: 'http', to: 8080 }],
      cniArgs: {},
    });
    expect(again).toEqual(status);
    expect(configurator.callsOf('setup')).toHaveLength(1);
  });

  it('refuses a different spec for an allocation already set up', async () => {
    const { runner, configurator } = await make();
    await runner.setup(spec(A));
    const error = await rejection(
      runner.setup(spec(A, { jobId: 'other', ports: [{ label: 'x', value: 9000 }] })),
    );
    expect([error.code, error.message]).toEqual([
      'conflict',
      `allocation "${A}" is already set up with a different spec (jobId, ports differ); tear it down first`,
    ]);
    expect(configurator.callsOf('setup')).toHaveLength(1);
  });

  it('refuses a bad spec before anything runs', async () => {
    const { runner, configurator, netns } = await make();
    const error = await rejection(
      runner.setup({ ...spec(A), ports: [{ label: 'http', value: 70000 }] }),
    );
    expect([error.code, error.field, error.message]).toEqual([
      'invalid-argument',
      'spec.ports[0].value',
      'invalid allocation spec: spec.ports[0].value should be a port number from 1 to 65535, got 70000',
    ]);
    expect([configurator.calls, netns.calls, runner.list()]).toEqual([[], [], []]);
  });

  it('uses a task driver’s namespace as given and never makes or removes it', async () => {
    const { runner, configurator, netns } = await make();
    netns.addPath('/proc/42/ns/net');
    await runner.setup(spec(A, { netnsPath: '/proc/42/ns/net' }));
    expect(netns.callsOf('create')).toEqual([]);
    expect(configurator.callsOf('setup')[0]?.netns).toBe('/proc/42/ns/net');
    expect(configurator.callsOf('setup')[0]?.spec).toEqual(spec(A));
    // Not the runner's own: the configurator leaves its defaults (IPv6's) as they are.
    expect(configurator.callsOf('setup')[0]?.ownNamespace).toBeUndefined();
    expect(runner.get(A)).toMatchObject({ netnsPath: '/proc/42/ns/net', netnsCreated: false });

    await runner.teardown(A);
    expect(netns.callsOf('remove')).toEqual([]);
    expect(netns.calls.every((c) => c.method === 'exists')).toBe(true);
  });

  it('refuses a task driver’s namespace that is not there', async () => {
    const { runner, configurator } = await make();
    const error = await rejection(runner.setup(spec(A, { netnsPath: '/proc/42/ns/net' })));
    expect([error.code, error.field, error.message]).toEqual([
      'invalid-argument',
      'spec.netnsPath',
      'invalid allocation spec: spec.netnsPath "/proc/42/ns/net" is not a network namespace',
    ]);
    expect([configurator.calls, runner.list()]).toEqual([[], []]);
  });

  it('fails a setup whose namespace was removed while the plugins ran, even when they succeeded', async () => {
    const { runner, configurator, netns } = await make();
    configurator.before = (call) => {
      if (call.method === 'setup') netns.delete(`alloc-${A}`);
    };
    const error = await rejection(runner.setup(spec(A)));
    expect([error.code, error.kind, error.message]).toEqual([
      'setup-failed',
      'internal',
      `setup of allocation "${A}" failed: namespace "/run/netns/alloc-${A}" was removed while the setup ran`,
    ]);
    // Rolled back: the configurator's teardown ran, no record.
    expect(configurator.calls.map((c) => c.method)).toEqual(['setup', 'teardown']);
    expect([runner.list(), configurator.attached.size]).toEqual([[], 0]);
  });

  it('names netnsPath when a task driver’s namespace went away during the setup', async () => {
    const { runner, configurator, netns } = await make();
    netns.addPath('/proc/42/ns/net');
    configurator.before = (call) => {
      if (call.method === 'setup') {
        netns.deletePath('/proc/42/ns/net');
        throw new Error('plugin "bridge" failed (ADD): failed to open netns');
      }
    };
    const error = await rejection(runner.setup(spec(A, { netnsPath: '/proc/42/ns/net' })));
    expect([error.code, error.field, error.message]).toEqual([
      'invalid-argument',
      'spec.netnsPath',
      `setup of allocation "${A}" failed: invalid allocation spec: netnsPath "/proc/42/ns/net" is not a network namespace: it was removed while the setup ran`,
    ]);
    expect(runner.list()).toEqual([]);
  });
});

describe('setup rollback', () => {
  it('leaves no record and no namespace when the configurator fails, and keeps its message', async () => {
    const { runner, configurator, netns, points } = await make();
    const cause = new ConfiguratorError(
      `setting up "${A}" in network "nomad" failed after 3 attempts: plugin "bridge" failed (ADD) for "${A}": failed to set bridge addr`,
      { code: 'setup-failed', allocId: A },
    );
    configurator.fail('setup', cause);

    const error = await rejection(runner.setup(spec(A)));

    expect([error.code, error.message, error.cause]).toEqual([
      'setup-failed',
      `setup of allocation "${A}" failed: ${cause.message}`,
      cause,
    ]);
    expect(configurator.calls.map((c) => [c.method, c.attachment])).toEqual([
      ['setup', undefined],
      ['teardown', undefined],
    ]);
    expect(netns.callsOf('remove')).toEqual([{ method: 'remove', arg: `alloc-${A}` }]);
    expect([...netns.names]).toEqual([]);
    expect(runner.list()).toEqual([]);
    expect(points).toEqual(['setup:after-intent', 'setup:after-netns']);
    expect(runner.stats()).toMatchObject({ setups: 0, setupFailures: 1, live: 0 });

    // Nothing is left that would make the next setup fail.
    await runner.setup(spec(A));
    expect(runner.get(A)?.phase).toBe('ready');
  });

  it('answers invalid-argument when the configurator finds the request at fault', async () => {
    const { runner, configurator } = await make();
    // Known when the spec is checked, refused by the setup (the conf dir changed in between).
    configurator.addNetwork('missing');
    configurator.fail(
      'setup',
      new ConfiguratorError('network "missing" is not the default network nor in /etc/cni', {
        code: 'network-not-found',
        path: ['network'],
        problem: ['"missing" is not the default network nor in /etc/cni'],
      }),
    );
    const error = await rejection(runner.setup(spec(A, { network: 'missing' })));
    expect([error.code, error.field, error.message]).toEqual([
      'invalid-argument',
      'spec.network',
      `setup of allocation "${A}" failed: network "missing" is not the default network nor in /etc/cni`,
    ]);
    expect(runner.list()).toEqual([]);
  });

  it('does not remove a namespace it did not make (one that was already there)', async () => {
    const { runner, configurator, netns } = await make();
    netns.add(`alloc-${A}`);
    const error = await rejection(runner.setup(spec(A)));
    expect([error.code, error.message]).toEqual([
      'setup-failed',
      `setup of allocation "${A}" failed: ip netns add alloc-${A} failed (exit status 1): Cannot create namespace file "/run/netns/alloc-${A}": File exists`,
    ]);
    expect(netns.callsOf('remove')).toEqual([]);
    expect([...netns.names]).toEqual([`alloc-${A}`]);
    expect(configurator.calls.map((c) => c.method)).toEqual(['teardown']);
    expect(runner.list()).toEqual([]);
  });

  it('says when the rollback failed too', async () => {
    const { runner, configurator } = await make();
    configurator.fail('setup', new Error('ADD failed'));
    configurator.fail('teardown', new Error('iptables-restore failed'));
    const error = await rejection(runner.setup(spec(A)));
    expect(error.message).toBe(
      `setup of allocation "${A}" failed: ADD failed; the rollback also failed: the configurator's teardown failed: iptables-restore failed`,
    );
    // The record goes anyway: the reconciler finds what the sweep left, as a leak.
    expect(runner.list()).toEqual([]);
  });

  it('undoes the ADD when the ready record cannot be written', async () => {
    const real = await openRunnerStore({ dataDir: dir });
    const store: RunnerStore = {
      ...real,
      put: (r) => (r.phase === 'ready' ? Promise.reject(new Error('MDB_MAP_FULL')) : real.put(r)),
    };
    const { runner, configurator } = await make({ store });
    const error = await rejection(runner.setup(spec(A)));
    expect(error.message).toBe(`setup of allocation "${A}" failed: MDB_MAP_FULL`);
    expect(configurator.calls.map((c) => [c.method, c.attachment?.allocId])).toEqual([
      ['setup', undefined],
      ['teardown', A],
    ]);
    expect([configurator.attached.size, runner.list()]).toEqual([0, []]);
  });

  it('rolls back after an abort and says it was aborted', async () => {
    const { runner, configurator, netns } = await make();
    const controller = new AbortController();
    configurator.before = (call) => {
      if (call.method === 'setup') {
        controller.abort();
        throw new ConfiguratorError(`setting up "${A}" in network "nomad" was cancelled: aborted`, {
          code: 'aborted',
        });
      }
    };
    const error = await rejection(runner.setup(spec(A), { signal: controller.signal }));
    expect([error.code, error.message]).toEqual([
      'aborted',
      `setup of allocation "${A}" was aborted: setting up "${A}" in network "nomad" was cancelled: aborted`,
    ]);
    expect([runner.list(), [...netns.names]]).toEqual([[], []]);
  });
});

describe('a full data dir', () => {
  const NO_SPACE = 'the data dir "DIR" has no space left (No space left on device)';
  const noSpace = (what: string) =>
    `${what} failed: ${NO_SPACE.replace('DIR', dir)}; nothing was changed, and writes work again once space is freed there`;

  async function makeFull(options: { readonly storeRetryMs?: number } = {}) {
    const store = fillable(await openRunnerStore({ dataDir: dir }), dir);
    const harness = await make({ store, storeRetryMs: 5_000, ...options });
    return { ...harness, store };
  }

  it('refuses a setup whose intent cannot be written, before anything runs', async () => {
    const { runner, configurator, netns, store } = await makeFull();
    store.full = true;
    const error = await rejection(runner.setup(spec(A)));
    expect([error.code, error.kind, error.message]).toEqual([
      'store-full',
      'exhausted',
      noSpace(`writing the record of allocation "${A}"`),
    ]);
    expect([configurator.calls, netns.calls, runner.list()]).toEqual([[], [], []]);
    expect(runner.stats().store).toEqual({
      writable: false,
      problem: NO_SPACE.replace('DIR', dir),
      sinceMs: 0,
      writeFailures: 1,
    });
    // Reads go on.
    expect(runner.get(A)).toBeUndefined();
  });

  it('rolls a setup back when its ready record cannot be written; the record goes once there is space', async () => {
    const { runner, configurator, netns, store, clock } = await makeFull();
    configurator.before = (call) => {
      if (call.method === 'setup') store.full = true;
    };
    const error = await rejection(runner.setup(spec(A)));
    expect([error.code, error.kind, error.message]).toEqual([
      'setup-failed',
      'exhausted',
      `setup of allocation "${A}" failed: ${noSpace(`writing the record of allocation "${A}"`)}; the rollback also failed: ${noSpace(`removing the record of allocation "${A}"`)}; the record goes once the data dir has space`,
    ]);
    expect(configurator.attached.size).toBe(0);
    expect([...netns.names]).toEqual([]);
    expect([runner.get(A)?.phase, runner.stats().unremovedRecords]).toEqual(['setting-up', 1]);

    // Still full: the retry probes and gives up for now.
    clock.advance(5_000);
    await settleRetry();
    expect([runner.get(A)?.phase, runner.stats().store.writable]).toEqual(['setting-up', false]);

    store.full = false;
    clock.advance(5_000);
    // close() waits for the round the timer started (it writes to the real store).
    await runner.close();
    expect([runner.list(), runner.stats().unremovedRecords, runner.stats().store.writable]).toEqual(
      [[], 0, true],
    );
    // Nothing ran again: the network was undone by the rollback.
    expect(configurator.calls.map((c) => c.method)).toEqual(['setup', 'teardown']);
  });

  it('a teardown that removed the network but not the record says so; the next operation removes the record', async () => {
    const { runner, configurator, store } = await makeFull({ storeRetryMs: 0 });
    await runner.setup(spec(A));
    configurator.before = (call) => {
      if (call.method === 'teardown') store.full = true;
    };
    const error = await rejection(runner.teardown(A));
    expect([error.code, error.kind, error.message]).toEqual([
      'teardown-failed',
      'exhausted',
      `teardown of allocation "${A}" removed its network, but not its record: ${noSpace(`removing the record of allocation "${A}"`)}; the record goes once the data dir has space`,
    ]);
    expect(runner.get(A)?.phase).toBe('tearing-down');
    configurator.before = undefined;
    store.full = false;
    const before = configurator.calls.length;
    // A new setup of the same id first removes the record (no DEL again), then sets up.
    await runner.setup(spec(A));
    expect(configurator.calls.slice(before).map((c) => c.method)).toEqual(['setup']);
    expect(runner.get(A)?.phase).toBe('ready');
  });

  it('a teardown refused for lack of space changes nothing', async () => {
    const { runner, configurator, store } = await makeFull();
    await runner.setup(spec(A));
    store.full = true;
    const before = configurator.calls.length;
    const error = await rejection(runner.teardown(A));
    expect([error.code, error.kind]).toEqual(['store-full', 'exhausted']);
    expect([configurator.calls.slice(before), runner.get(A)?.phase]).toEqual([[], 'ready']);
  });
});

/** Polls `condition` between event-loop turns (the fakes answer within a few). */
async function waitFor(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !condition(); i++) await setImmediate();
  expect(condition()).toBe(true);
}

/** Lets a store-retry round that only meets the fakes (a full store fails at once) run out. */
async function settleRetry(): Promise<void> {
  for (let i = 0; i < 20; i++) await setImmediate();
}

describe('the operation deadline', () => {
  /** A configurator call that never answers by itself: only its signal ends it. */
  function hang(method: ConfiguratorCall['method'], configurator: RecordingConfigurator) {
    const entered = createDeferred();
    configurator.before = (call, signal) => {
      if (call.method !== method) return;
      entered.resolve();
      return new Promise<void>((_, reject) => {
        signal?.addEventListener('abort', () => {
          reject(
            new ConfiguratorError(`${method} of "${call.allocId ?? ''}" was cancelled`, {
              code: 'aborted',
            }),
          );
        });
      });
    };
    return entered.promise;
  }

  it('stops a setup that runs past operationTimeoutMs, rolls it back and frees the turn', async () => {
    const { runner, configurator, netns, clock } = await make({ operationTimeoutMs: 60_000 });
    const entered = hang('setup', configurator);
    const setup = rejection(runner.setup(spec(A)));
    const queued = runner.teardown(A);
    await entered;
    clock.advance(59_999);
    expect(runner.stats().running).toBe(1);
    clock.advance(1);
    const error = await setup;
    expect([error.code, error.kind, error.message]).toEqual([
      'timed-out',
      'unavailable',
      `setup of allocation "${A}" ran past its deadline of 60000 ms (operationTimeoutMs) and was rolled back: setup of "${A}" was cancelled`,
    ]);
    // The teardown queued behind it ran; nothing is left.
    expect((await queued).known).toBe(false);
    expect([runner.list(), [...netns.names], configurator.attached.size]).toEqual([[], [], 0]);
  });

  it('stops a teardown that runs past it too', async () => {
    const { runner, configurator, clock } = await make({ operationTimeoutMs: 1_000 });
    await runner.setup(spec(A));
    const entered = hang('teardown', configurator);
    const teardown = rejection(runner.teardown(A));
    await entered;
    clock.advance(1_000);
    const error = await teardown;
    expect([error.code, error.kind, error.message]).toEqual([
      'timed-out',
      'unavailable',
      `teardown of allocation "${A}" failed: teardown of "${A}" was cancelled`,
    ]);
    configurator.before = undefined;
    expect((await runner.teardown(A)).known).toBe(true);
    expect(runner.list()).toEqual([]);
  });

  it('refuses a deadline that is not a positive whole number', async () => {
    const error = await rejection(make({ operationTimeoutMs: 0 }));
    expect([error.code, error.field, error.message]).toEqual([
      'invalid-argument',
      'operationTimeoutMs',
      'operationTimeoutMs 0 is not a positive whole number',
    ]);
  });
});

describe('teardown', () => {
  it('records the intent, runs the configurator with the stored attachment, removes the namespace and the record', async () => {
    const { runner, configurator, netns, points } = await make();
    await runner.setup(spec(A));
    const attachment = configurator.attached.get(A);
    points.length = 0;
    let phaseDuringDel: string | undefined;
    configurator.before = (call) => {
      if (call.method === 'teardown') phaseDuringDel = runner.get(A)?.phase;
    };

    const report = await runner.teardown(A);

    expect(report).toEqual({
      allocId: A,
      known: true,
      netnsRemoved: true,
      report: {
        allocId: A,
        delError: undefined,
        delRan: true,
        removed: { rules: [], chains: [], reservations: [], cacheFiles: [] },
      },
    });
    expect(phaseDuringDel).toBe('tearing-down');
    expect(configurator.callsOf('teardown')).toEqual([
      { method: 'teardown', allocId: A, attachment, netns: `/run/netns/alloc-${A}` },
    ]);
    expect(points).toEqual(['teardown:after-intent', 'teardown:after-del', 'teardown:after-netns']);
    expect([runner.get(A), [...netns.names], configurator.attached.size]).toEqual([
      undefined,
      [],
      0,
    ]);
  });

  it('succeeds for an unknown allocation, sweeping for its id and its namespace name', async () => {
    const { runner, configurator, netns } = await make();
    configurator.leak(A);
    netns.add(`alloc-${A}`);
    const report = await runner.teardown(A);
    expect(report).toMatchObject({ allocId: A, known: false, netnsRemoved: true });
    expect(report.report.removed.reservations).toHaveLength(1);
    expect(configurator.calls).toEqual([{ method: 'teardown', allocId: A, attachment: undefined }]);
    expect([...netns.names]).toEqual([]);

    // And again: nothing there, still a success.
    expect(await runner.teardown(A)).toMatchObject({ known: false, netnsRemoved: false });
  });

  it('leaves nothing when the namespace was deleted out of band', async () => {
    const { runner, configurator, netns } = await make();
    await runner.setup(spec(A));
    netns.delete(`alloc-${A}`);
    expect(await runner.teardown(A)).toMatchObject({ known: true, netnsRemoved: false });
    expect([runner.list(), configurator.attached.size]).toEqual([[], 0]);
  });

  it('keeps the record tearing-down when the configurator fails; the next teardown finishes', async () => {
    const { runner, configurator } = await make();
    await runner.setup(spec(A));
    const cause = new ConfiguratorError(
      `tearing down "${A}": state tagged with it could not be removed: iptables-restore: line 2 failed`,
      { code: 'teardown-failed' },
    );
    configurator.fail('teardown', cause);
    const error = await rejection(runner.teardown(A));
    expect([error.code, error.message, error.cause]).toEqual([
      'teardown-failed',
      `teardown of allocation "${A}" failed: ${cause.message}`,
      cause,
    ]);
    expect(runner.get(A)?.phase).toBe('tearing-down');
    expect(runner.get(A)?.attachment).toEqual(configurator.attached.get(A));

    expect(await runner.teardown(A)).toMatchObject({ known: true });
    expect(runner.list()).toEqual([]);
    expect(runner.stats()).toMatchObject({ teardowns: 1, teardownFailures: 1 });
  });

  it('refuses a bad allocation id', async () => {
    const { runner, configurator } = await make();
    const error = await rejection(runner.teardown('../etc'));
    expect([error.code, error.field, error.message]).toEqual([
      'invalid-argument',
      'allocId',
      'invalid allocation id: allocId "../etc" has characters other than [a-zA-Z0-9_.-] or starts with one of "_.-"',
    ]);
    expect(configurator.calls).toEqual([]);
  });
});

describe('forceCleanup', () => {
  it('runs the configurator’s sweep in the allocation’s turn, after the setup before it', async () => {
    const { runner, configurator } = await make();
    const hold = holdCalls(configurator, 'setup', [A]);
    const setup = runner.setup(spec(A));
    await hold.arrived(A);
    const cleanup = runner.forceCleanup(A, { dryRun: false, network: 'nomad' });
    await setImmediate();
    // Queued behind the setup: the sweep has not run.
    expect(configurator.calls.map((c) => c.method)).toEqual(['setup']);

    hold.release(A);
    await setup;
    const { known, report } = await cleanup;
    expect(known).toBe(true);
    expect(report).toMatchObject({ allocId: A, dryRun: false });
    expect(report.removed.reservations).toHaveLength(1);
    expect(configurator.callsOf('forceCleanup')).toEqual([
      { method: 'forceCleanup', allocId: A, dryRun: false, network: 'nomad' },
    ]);
    // The record stays: the operator asked for the host's state to go, not the allocation.
    expect([runner.get(A)?.phase, configurator.attached.has(A)]).toEqual(['ready', false]);
  });

  it('says known: false for an allocation without a record, and passes a dry run on', async () => {
    const { runner, configurator } = await make();
    configurator.leak(A);
    const dry = await runner.forceCleanup(A, { dryRun: true });
    expect([dry.known, dry.report.dryRun, configurator.attached.has(A)]).toEqual([
      false,
      true,
      true,
    ]);
    expect(configurator.callsOf('forceCleanup')).toEqual([
      { method: 'forceCleanup', allocId: A, dryRun: true },
    ]);
    expect((await runner.forceCleanup(A, { dryRun: false })).known).toBe(false);
    expect(configurator.attached.has(A)).toBe(false);
  });

  it('refuses a bad allocation id as the other operations do', async () => {
    const { runner, configurator } = await make();
    const error = await rejection(runner.forceCleanup('../etc', { dryRun: true }));
    expect([error.code, error.field, error.message]).toEqual([
      'invalid-argument',
      'allocId',
      'invalid allocation id: allocId "../etc" has characters other than [a-zA-Z0-9_.-] or starts with one of "_.-"',
    ]);
    expect(configurator.calls).toEqual([]);
  });

  it('gives the configurator’s error as is', async () => {
    const { runner, configurator } = await make();
    const cause = new ConfiguratorError(`cleaning up "${A}": iptables-restore failed`, {
      code: 'cleanup-failed',
    });
    configurator.fail('forceCleanup', cause);
    await expect(runner.forceCleanup(A, { dryRun: false })).rejects.toBe(cause);
  });
});

describe('check', () => {
  it('runs CHECK with the stored attachment', async () => {
    const { runner, configurator } = await make();
    await runner.setup(spec(A));
    expect(await runner.check(A)).toEqual({ allocId: A, ran: true });
    expect(configurator.callsOf('check')[0]?.attachment).toEqual(configurator.attached.get(A));
  });

  it('reports a failed CHECK with the configurator’s message, and unknown allocations', async () => {
    const { runner, configurator } = await make();
    await runner.setup(spec(A));
    configurator.fail('check', new Error('plugin "bridge" failed (CHECK): no eth0'));
    const failed = await rejection(runner.check(A));
    expect([failed.code, failed.message]).toEqual([
      'check-failed',
      `check of allocation "${A}" failed: plugin "bridge" failed (CHECK): no eth0`,
    ]);
    const missing = await rejection(runner.check(B));
    expect([missing.code, missing.message]).toEqual([
      'not-found',
      `allocation "${B}" is not set up`,
    ]);
  });
});

describe('concurrency', () => {
  it('runs the operations of one allocation one at a time, in order', async () => {
    const { runner, configurator } = await make();
    const hold = holdCalls(configurator, 'setup', [A]);
    const setup = runner.setup(spec(A));
    const teardown = runner.teardown(A);
    const again = runner.setup(spec(A, { jobId: 'next' }));
    await hold.arrived(A);
    expect(runner.stats()).toMatchObject({ running: 1, waiting: 2 });
    expect(configurator.calls.map((c) => c.method)).toEqual(['setup']);
    hold.release(A);
    await Promise.all([setup, teardown, again]);
    expect(configurator.calls.map((c) => c.method)).toEqual(['setup', 'teardown', 'setup']);
    expect(runner.get(A)?.spec.jobId).toBe('next');
  });

  it('runs different allocations in parallel, up to maxConcurrent', async () => {
    const { runner, configurator } = await make({ maxConcurrent: 2 });
    const hold = holdCalls(configurator, 'setup', [A, B, C]);
    const all = [A, B, C].map((id) => runner.setup(spec(id)));
    await Promise.all([hold.arrived(A), hold.arrived(B)]);
    expect(configurator.callsOf('setup').map((c) => c.allocId)).toEqual([A, B]);
    expect(runner.stats()).toMatchObject({ running: 2, waiting: 1 });

    hold.release(B);
    await hold.arrived(C);
    expect(configurator.callsOf('setup').map((c) => c.allocId)).toEqual([A, B, C]);
    hold.release(A);
    hold.release(C);
    await Promise.all(all);
    expect(runner.stats()).toMatchObject({ live: 3, running: 0, waiting: 0, setups: 3 });
  });

  it('drops a queued operation whose signal aborts before its turn', async () => {
    const { runner, configurator } = await make();
    const hold = holdCalls(configurator, 'setup', [A]);
    const setup = runner.setup(spec(A));
    await hold.arrived(A);
    const controller = new AbortController();
    const teardown = runner.teardown(A, { signal: controller.signal });
    controller.abort();
    const error = await rejection(teardown);
    expect([error.code, error.message]).toEqual([
      'aborted',
      `the operation on allocation "${A}" was aborted`,
    ]);
    hold.release(A);
    await setup;
    expect(configurator.calls.map((c) => c.method)).toEqual(['setup']);
    expect(runner.get(A)?.phase).toBe('ready');
  });
});

describe('a start with the restore in the background', () => {
  it('serves at once: a new allocation does not wait, one being restored waits for its own restore only', async () => {
    const first = await make({ maxConcurrent: 2 });
    for (const id of [A, B]) await first.runner.setup(spec(id));
    await first.runner.close();
    first.configurator.clearCalls();

    const { runner, configurator } = await make({ ...first, maxConcurrent: 2 });
    // Both restores' CHECKs hold until released: the restore is under way.
    const { arrived, release } = holdCalls(configurator, 'check', [A, B]);
    const background = runner.startInBackground();
    expect(background.restoring).toBe(2);
    await arrived(A);
    await arrived(B);
    expect([runner.isRestoring(A), runner.isRestoring(B), runner.stats().restoring]).toEqual([
      true,
      true,
      2,
    ]);
    // Reads answer, with the records as they are.
    expect(runner.list().map((r) => [r.allocId, r.phase])).toEqual([
      [B, 'ready'],
      [A, 'ready'],
    ]);
    // A new allocation is set up while both restores hold (their lane is not the operations').
    await runner.setup(spec(C));
    expect(runner.get(C)?.phase).toBe('ready');
    // A teardown of A waits behind A's restore, and only that one.
    let tornDown = false;
    const teardown = runner.teardown(A).then((r) => {
      tornDown = true;
      return r;
    });
    release(B);
    await waitFor(() => !runner.isRestoring(B));
    expect(tornDown).toBe(false);
    release(A);
    expect((await teardown).known).toBe(true);
    const report = await background.done;
    expect(report.restore.counts.kept).toBe(2);
    expect([runner.stats().restoring, runner.list().map((r) => r.allocId)]).toEqual([0, [B, C]]);
    const calls = configurator.calls.map((c) => [c.method, c.allocId]);
    // The recorded addresses are held first, then the restore and the new setup.
    expect(configurator.callsOf('holdAddresses').map((c) => c.held)).toEqual([[B, A]]);
    calls.shift();
    // The first reconcile (after the restore) and A's teardown may come in either order.
    expect(calls.slice(0, 3)).toEqual([
      ['check', B],
      ['check', A],
      ['setup', C],
    ]);
    expect(calls.slice(3).sort()).toEqual([
      ['reapLeaks', undefined],
      ['teardown', A],
    ]);
  });

  it('admits no operation before the recorded addresses are held', async () => {
    const first = await make();
    await first.runner.setup(spec(A));
    await first.runner.close();
    first.configurator.clearCalls();

    const { runner, configurator } = await make(first);
    const holding = createDeferred();
    const arrived = createDeferred();
    configurator.before = async (call) => {
      if (call.method !== 'holdAddresses') return;
      arrived.resolve();
      await holding.promise;
    };
    const background = runner.startInBackground();
    await arrived.promise;
    const setup = runner.setup(spec(C));
    await setImmediate();
    expect(configurator.calls.map((c) => c.method)).toEqual(['holdAddresses']);
    holding.resolve();
    await setup;
    await background.done;
    expect(configurator.callsOf('holdAddresses').map((c) => c.held)).toEqual([[A]]);
    expect(configurator.callsOf('setup').map((c) => c.allocId)).toEqual([C]);
  });

  it('with `after`, holds and restores nothing before it settles, answers meanwhile, and admits no operation before the holds', async () => {
    const first = await make();
    await first.runner.setup(spec(A));
    await first.runner.close();
    first.configurator.clearCalls();

    const { runner, configurator } = await make(first);
    const listening = createDeferred();
    const background = runner.startInBackground({ after: listening.promise });
    const setup = runner.setup(spec(C));
    await setImmediate();
    await setImmediate();
    // Nothing yet: no hold, no CHECK, no setup; what the store holds is listed all the same.
    expect(configurator.calls).toEqual([]);
    expect(runner.list().map((r) => r.allocId)).toEqual([A]);
    listening.resolve();
    await setup;
    await background.done;
    expect(configurator.calls.map((c) => c.method)[0]).toBe('holdAddresses');
    expect(configurator.callsOf('setup').map((c) => c.allocId)).toEqual([C]);
  });

  it('is stopped by close(): what was not restored is restored at the next start', async () => {
    const first = await make();
    await first.runner.setup(spec(A));
    await first.runner.close();
    const { runner, configurator } = await make(first);
    const arrived = createDeferred();
    // A CHECK that ends only when its signal aborts, as a plugin killed by it does.
    configurator.before = (call, signal) => {
      if (call.method !== 'check') return;
      arrived.resolve();
      return new Promise<void>((_, reject) => {
        signal?.addEventListener('abort', () => {
          reject(new ConfiguratorError('CHECK was cancelled', { code: 'aborted' }));
        });
      });
    };
    const background = runner.startInBackground();
    await arrived.promise;
    const closed = runner.close();
    const error = await rejection(background.done);
    expect([error.code, error.message]).toEqual([
      'shutting-down',
      'the allocation runner is shutting down',
    ]);
    await closed;
    // Untouched: the next start restores it.
    expect(runner.get(A)?.phase).toBe('ready');
  });
});

describe('restore', () => {
  it('keeps a ready allocation whose CHECK passes, with its address', async () => {
    const first = await make();
    const status = await first.runner.setup(spec(A));
    await first.runner.close();
    first.configurator.clearCalls();

    const { runner, configurator } = await make(first);
    const report = await runner.restore();
    expect(report.outcomes).toEqual([{ allocId: A, from: 'ready', result: 'kept', checked: true }]);
    expect(configurator.calls.map((c) => c.method)).toEqual(['check']);
    expect(runner.get(A)?.status).toEqual(status);
    expect(runner.stats()).toMatchObject({ restored: 1, live: 1 });
  });

  it('gives every CHECK of a restore one batch to share reads in; a CHECK outside a restore none', async () => {
    const first = await make();
    await first.runner.setup(spec(A));
    await first.runner.setup(spec(B));
    await first.runner.close();
    first.configurator.clearCalls();

    const { runner, configurator } = await make(first);
    await runner.restore();
    const [one, two] = configurator.callsOf('check').map((c) => c.batch);
    expect(one).toEqual({ kind: 'check-batch' });
    expect(two).toBe(one);
    configurator.clearCalls();
    await runner.check(A);
    expect(configurator.callsOf('check')[0]?.batch).toBeUndefined();
  });

  it('sets up again, in the same namespace and with the same address, when CHECK fails', async () => {
    const first = await make();
    const status = await first.runner.setup(spec(A));
    await first.runner.close();
    first.configurator.clearCalls();
    first.netns.clearCalls();

    const { runner, configurator, netns } = await make(first);
    configurator.fail('check', checkFailed('no eth0'));
    const report = await runner.restore();

    expect(report.outcomes).toEqual([
      {
        allocId: A,
        from: 'ready',
        result: 'recreated',
        checked: true,
        error: 'CHECK failed: no eth0',
      },
    ]);
    expect(configurator.calls.map((c) => c.method)).toEqual(['check', 'teardown', 'setup']);
    // The teardown leaves the addresses held; the setup re-claims exactly them.
    expect(configurator.callsOf('teardown')[0]?.keepHolds).toBe(true);
    expect(configurator.callsOf('setup')[0]?.reclaim).toEqual([status.address]);
    expect(configurator.callsOf('setup')[0]?.spec?.cniArgs).toBeUndefined();
    // The namespace stays (the tasks may run in it): no remove, no create.
    expect(netns.calls.filter((c) => c.method !== 'exists')).toEqual([]);
    expect(runner.get(A)).toMatchObject({ phase: 'ready', status: { address: status.address } });
    expect(runner.get(A)?.spec).toEqual(spec(A));
    expect(runner.stats()).toMatchObject({ recreated: 1, reclaimed: 1, addressesLost: 0 });
  });

  it('makes the namespace again when it is gone (a reboot)', async () => {
    const first = await make();
    const status = await first.runner.setup(spec(A));
    await first.runner.close();
    first.netns.delete(`alloc-${A}`);
    first.configurator.clearCalls();
    first.netns.clearCalls();

    const { runner, configurator, netns } = await make(first);
    const report = await runner.restore();
    expect(report.outcomes).toEqual([
      {
        allocId: A,
        from: 'ready',
        result: 'recreated',
        checked: false,
        error: `namespace "/run/netns/alloc-${A}" is gone`,
      },
    ]);
    expect(configurator.calls.map((c) => c.method)).toEqual(['teardown', 'setup']);
    expect(netns.calls.filter((c) => c.method !== 'exists')).toEqual([
      { method: 'remove', arg: `alloc-${A}` },
      { method: 'create', arg: `alloc-${A}` },
    ]);
    expect(runner.get(A)?.status?.address).toBe(status.address);
  });

  it('leaves a ready allocation alone when its CHECK could not run', async () => {
    const first = await make();
    await first.runner.setup(spec(A));
    const ready = first.runner.get(A);
    await first.runner.close();
    first.configurator.clearCalls();
    const { runner, configurator } = await make(first);
    configurator.fail(
      'check',
      new ConfiguratorError('CHECK of "x" could not run: plugin "bridge" did not start: EAGAIN', {
        code: 'unavailable',
        cause: new CniError('plugin "bridge" did not start: EAGAIN', {
          code: 'spawn',
          msg: 'EAGAIN',
        }),
      }),
    );
    const report = await runner.restore();
    expect(report.outcomes).toEqual([
      {
        allocId: A,
        from: 'ready',
        result: 'error',
        checked: false,
        error:
          'CHECK could not run: CHECK of "x" could not run: plugin "bridge" did not start: EAGAIN',
      },
    ]);
    expect(configurator.calls.map((c) => c.method)).toEqual(['check']);
    expect(runner.get(A)).toEqual(ready);
  });

  it('records failed, naming the address, an allocation whose address cannot be re-claimed', async () => {
    const first = await make();
    await first.runner.setup(spec(A));
    await first.runner.close();
    first.netns.delete(`alloc-${A}`);
    first.configurator.clearCalls();
    const warned: { message: string; meta: Record<string, unknown> | undefined }[] = [];
    const logger = {
      debug: () => undefined,
      warn: (message: string, meta?: Record<string, unknown>) => warned.push({ message, meta }),
    };
    const { runner, configurator } = await make({ ...first, logger });
    const lost =
      'setting up "6b235529-8111-4bbe-520b-d639b1d2a94e" in network "nomad" with its recorded address 172.26.64.2 failed: it is outside every range of network "nomad"\'s config';
    configurator.fail(
      'setup',
      new ConfiguratorError(lost, {
        code: 'address-lost',
        allocId: A,
        network: 'nomad',
        address: '172.26.64.2',
      }),
    );
    const report = await runner.restore();
    const why = `namespace "/run/netns/alloc-${A}" is gone; setting it up again with its recorded address 172.26.64.2 failed: setup of allocation "${A}" failed: ${lost}`;
    expect(report.outcomes).toEqual([
      { allocId: A, from: 'ready', result: 'failed', checked: false, error: why },
    ]);
    // Never any other address: one setup, and the rollback released the hold with the rest.
    expect(configurator.callsOf('setup').map((c) => c.reclaim)).toEqual([['172.26.64.2']]);
    expect(configurator.attached.size).toBe(0);
    expect(runner.get(A)).toMatchObject({ phase: 'failed', error: why });
    expect(runner.stats()).toMatchObject({ addressesLost: 1, reclaimed: 0, restoreFailures: 1 });
    expect(warned.filter((l) => l.message.includes('lost'))).toEqual([
      {
        message: 'restore: the allocation lost its recorded address',
        meta: {
          allocId: A,
          network: 'nomad',
          address: '172.26.64.2',
          reason: `setup of allocation "${A}" failed: ${lost}`,
        },
      },
    ]);
  });

  it('reports failed an allocation whose task driver namespace is gone, leaving nothing', async () => {
    const first = await make();
    first.netns.addPath('/proc/42/ns/net');
    await first.runner.setup(spec(A, { netnsPath: '/proc/42/ns/net' }));
    await first.runner.close();
    first.netns.deletePath('/proc/42/ns/net');

    const { runner, configurator } = await make(first);
    const report = await runner.restore();
    expect(report.outcomes).toEqual([
      {
        allocId: A,
        from: 'ready',
        result: 'failed',
        checked: false,
        error: 'namespace "/proc/42/ns/net" is gone',
      },
    ]);
    expect(configurator.attached.size).toBe(0);
    expect(runner.get(A)).toMatchObject({
      phase: 'failed',
      error: 'namespace "/proc/42/ns/net" is gone',
    });
    expect(runner.get(A)?.attachment).toBeUndefined();
    const error = await rejection(runner.check(A));
    expect([error.code, error.message]).toEqual([
      'failed',
      `allocation "${A}" failed: namespace "/proc/42/ns/net" is gone`,
    ]);

    // A teardown clears the failed record.
    await runner.teardown(A);
    expect(runner.list()).toEqual([]);
  });

  it('undoes an interrupted setup and reports it failed', async () => {
    // A crash after ADD, before the ready record: the plugins ran, the record says setting-up.
    await seed(record(A));
    const configurator = createRecordingConfigurator().leak(A);
    const netns = createRecordingNetns().add(`alloc-${A}`);
    const { runner } = await make({ configurator, netns });

    const report = await runner.restore();

    const why = 'setup was interrupted by a restart of the runner; what it had done was undone';
    expect(report.outcomes).toEqual([
      { allocId: A, from: 'setting-up', result: 'failed', checked: false, error: why },
    ]);
    expect(configurator.calls).toEqual([{ method: 'teardown', allocId: A, attachment: undefined }]);
    expect([configurator.attached.size, [...netns.names]]).toEqual([0, []]);
    expect(runner.get(A)).toEqual({
      ...record(A),
      phase: 'failed',
      error: why,
      updatedAtMs: 1_000,
    });

    // A new setup replaces the failed record.
    await runner.setup(spec(A));
    expect(runner.get(A)?.phase).toBe('ready');
  });

  it('finishes an interrupted setup when its spec asks for it', async () => {
    const finishing = spec(A, { interruptedSetup: 'finish' });
    await seed(record(A, { spec: finishing }));
    const configurator = createRecordingConfigurator().leak(A);
    const netns = createRecordingNetns().add(`alloc-${A}`);
    const { runner } = await make({ configurator, netns });

    const report = await runner.restore();
    expect(report.outcomes).toEqual([
      { allocId: A, from: 'setting-up', result: 'finished', checked: false },
    ]);
    expect(configurator.calls.map((c) => c.method)).toEqual(['teardown', 'setup']);
    expect(netns.calls.filter((c) => c.method !== 'exists')).toEqual([
      { method: 'remove', arg: `alloc-${A}` },
      { method: 'create', arg: `alloc-${A}` },
    ]);
    expect(runner.get(A)).toMatchObject({ phase: 'ready', spec: finishing });
  });

  it('finishes an interrupted teardown', async () => {
    const first = await make();
    await first.runner.setup(spec(A));
    const ready = first.runner.get(A) as AllocRecord;
    await first.runner.close();
    await seed({ ...ready, phase: 'tearing-down' });

    const { runner, configurator, netns } = await make(first);
    const report = await runner.restore();
    expect(report.outcomes).toEqual([
      { allocId: A, from: 'tearing-down', result: 'torn-down', checked: false },
    ]);
    expect(configurator.callsOf('teardown')[0]?.attachment).toEqual(ready.attachment);
    expect([runner.list(), [...netns.names], configurator.attached.size]).toEqual([[], [], 0]);
  });

  it('leaves a failed record for the agent to report', async () => {
    await seed(record(A, { phase: 'failed', error: 'it broke' }));
    const { runner, configurator } = await make();
    const report = await runner.restore();
    expect(report.outcomes).toEqual([
      { allocId: A, from: 'failed', result: 'already-failed', checked: false, error: 'it broke' },
    ]);
    expect(report.counts).toEqual({
      kept: 0,
      recreated: 0,
      finished: 0,
      failed: 0,
      'torn-down': 0,
      'already-failed': 1,
      error: 0,
    });
    expect(configurator.calls).toEqual([]);
  });

  it('settles a record left by a crash when an operation comes before restore', async () => {
    await seed(record(A));
    const configurator = createRecordingConfigurator().leak(A);
    const { runner } = await make({ configurator });
    await runner.setup(spec(A));
    expect(configurator.calls.map((c) => c.method)).toEqual(['teardown', 'setup']);
    expect(runner.get(A)?.phase).toBe('ready');
  });

  it('keeps a record it could not settle, and says why', async () => {
    await seed(record(A, { phase: 'tearing-down' }));
    const configurator = createRecordingConfigurator();
    configurator.fail('teardown', new Error('iptables is gone'));
    const { runner } = await make({ configurator });
    const report = await runner.restore();
    expect(report.outcomes).toEqual([
      {
        allocId: A,
        from: 'tearing-down',
        result: 'error',
        checked: false,
        error: `teardown of allocation "${A}" failed: iptables is gone`,
      },
    ]);
    expect(runner.get(A)?.phase).toBe('tearing-down');
  });
});

describe('reconcile', () => {
  it('reports leaks, orphan state and orphan namespaces without touching them', async () => {
    const { runner, configurator, netns } = await make({ reconcile: { mode: 'report' } });
    await runner.setup(spec(A));
    configurator.leak(B);
    configurator.orphans = {
      rules: [
        {
          family: 'ipv4',
          table: 'filter',
          chain: 'CNI-FORWARD',
          line: '-A CNI-FORWARD -s 172.26.64.99/32 -j ACCEPT',
        },
      ],
      chains: [],
      reservations: [],
      cacheFiles: [],
    };
    netns.add(`alloc-${C}`).add('alloc-').add('other-ns');

    const report = await runner.reconcile();

    expect(report).toEqual({
      mode: 'report',
      leakedAllocations: 1,
      orphanRules: 1,
      orphanChains: 0,
      orphanNamespaces: 1,
      reaped: 0,
      reapedNamespaces: 0,
      failed: [],
      durationMs: 0,
    });
    expect(configurator.callsOf('findLeaks')).toEqual([{ method: 'findLeaks', known: [A] }]);
    expect([...configurator.attached.keys()].sort()).toEqual([B, A].sort());
    expect([...netns.names].sort()).toEqual(
      ['alloc-', `alloc-${A}`, `alloc-${C}`, 'other-ns'].sort(),
    );
    expect(runner.stats()).toMatchObject({
      reconciles: 1,
      leaksFound: 1,
      leaksReaped: 0,
      orphanNamespacesFound: 1,
      leakedLeft: 1,
      strayNamespacesLeft: 1,
    });
    // Report mode counts the same leak at every pass; what is left stays what is there.
    await runner.reconcile();
    expect(runner.stats()).toMatchObject({ leaksFound: 2, leakedLeft: 1, strayNamespacesLeft: 1 });
  });

  it('reaps what belongs to no allocation, and only that', async () => {
    const { runner, configurator, netns } = await make({ reconcile: { mode: 'reap' } });
    await runner.setup(spec(A));
    configurator.leak(B);
    netns.add(`alloc-${C}`).add('other-ns');

    const report = await runner.reconcile();

    expect(report).toMatchObject({
      mode: 'reap',
      leakedAllocations: 1,
      reaped: 1,
      orphanNamespaces: 1,
      reapedNamespaces: 1,
    });
    expect(configurator.callsOf('reapLeaks')).toEqual([{ method: 'reapLeaks', known: [A] }]);
    expect([...configurator.attached.keys()]).toEqual([A]);
    expect([...netns.names].sort()).toEqual([`alloc-${A}`, 'other-ns']);
    expect(runner.stats()).toMatchObject({
      leaksReaped: 1,
      orphanNamespacesReaped: 1,
      leakedLeft: 0,
      strayNamespacesLeft: 0,
    });
  });

  it('counts in-flight setups as known, and sets up a new allocation beside the reap, sparing it', async () => {
    const { runner, configurator, netns } = await make();
    const setupHold = holdCalls(configurator, 'setup', [A]);
    const setupA = runner.setup(spec(A));
    await setupHold.arrived(A);

    // Hold the reaper in its scan: meanwhile a setup of B (unknown to this reconcile) runs.
    const reaping = createDeferred();
    const reaperIn = createDeferred();
    const before = configurator.before;
    configurator.before = async (call) => {
      if (call.method === 'reapLeaks') {
        reaperIn.resolve();
        await reaping.promise;
        return;
      }
      await before?.(call);
    };
    const reconcile = runner.reconcile();
    await reaperIn.promise;
    await runner.setup(spec(B));
    // B is set up while the reap is still in its scan.
    expect(runner.get(B)?.phase).toBe('ready');
    expect(netns.names.has(`alloc-${B}`)).toBe(true);
    expect(configurator.callsOf('reapLeaks')).toEqual([{ method: 'reapLeaks', known: [A] }]);

    reaping.resolve();
    expect(await reconcile).toMatchObject({ reaped: 0, orphanNamespaces: 0 });
    // The reap planned without B: it was spared, and its network is still there.
    expect(configurator.callsOf('reapBatch')).toEqual([]);
    expect(configurator.attached.has(B)).toBe(true);
    setupHold.release(A);
    await setupA;
    expect(runner.stats().live).toBe(2);
  });

  it('runs every intervalMs after start, and stops on close', async () => {
    const { runner, configurator, clock } = await make({
      reconcile: { mode: 'report', intervalMs: 60_000 },
    });
    const started = await runner.start();
    expect(started.restore.outcomes).toEqual([]);
    expect(started.reconcile.mode).toBe('report');
    expect(configurator.callsOf('findLeaks')).toHaveLength(1);
    expect(clock.pending).toBe(1);

    const next = createDeferred();
    configurator.before = (call) => {
      if (call.method === 'findLeaks') next.resolve();
    };
    clock.advance(60_000);
    await next.promise;
    expect(configurator.callsOf('findLeaks')).toHaveLength(2);

    await runner.close();
    expect(clock.pending).toBe(0);
  });
});

describe('options', () => {
  it('refuses an empty namespace prefix and a bad limit', async () => {
    const configurator = createRecordingConfigurator();
    const netns = createRecordingNetns();
    const refused = async (over: Partial<AllocRunnerOptions>) => {
      const e = await rejection(createAllocRunner({ configurator, netns, dataDir: dir, ...over }));
      return [e.code, e.field, e.message];
    };
    expect(await refused({ netnsPrefix: '' })).toEqual([
      'invalid-argument',
      'netnsPrefix',
      'netnsPrefix is empty; the runner needs a prefix of its own',
    ]);
    expect(await refused({ maxConcurrent: 0 })).toEqual([
      'invalid-argument',
      'maxConcurrent',
      'maxConcurrent 0 is not a positive whole number',
    ]);
  });
});

describe('close', () => {
  it('waits for work in flight and refuses new work', async () => {
    const { runner, configurator } = await make();
    const hold = holdCalls(configurator, 'setup', [A]);
    const setup = runner.setup(spec(A));
    await hold.arrived(A);

    let closed = false;
    const closing = runner.close().then(() => {
      closed = true;
    });
    const refused = await rejection(runner.setup(spec(B)));
    expect([refused.code, refused.message]).toEqual([
      'shutting-down',
      'the allocation runner is shutting down',
    ]);
    expect(closed).toBe(false);

    hold.release(A);
    await setup;
    await closing;
    expect(closed).toBe(true);

    // What the setup wrote is durable.
    const store = await openRunnerStore({ dataDir: dir });
    expect(store.get(A)?.phase).toBe('ready');
    await store.close();
  });
});
