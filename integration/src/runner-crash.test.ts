// Crash tests of @allocnet/alloc-runner on the real plugins: a runner process (fixtures/
// runner-child.mjs, in the node namespace through nsenter) is killed with SIGKILL at each phase
// boundary of setup and teardown (ALLOCNET_CRASH_AT), with three allocations in flight; the next
// process restores. Afterwards every allocation is either fully set up (its record ready, CHECK
// passes, traffic flows, its reservation and namespace there) or fully gone (no namespace, no
// reservation, no rule naming it) — never half; and once all are torn down the node's ruleset is
// back at its baseline, IPAM is empty and no namespace is left. Needs root and the plugins.
import { execa } from 'execa';
import { requireNetworkTestHost } from '@allocnet/testns';
import type { AllocRecord, RunnerSpec } from '@allocnet/alloc-runner';
import { PLUGIN_DIR, allocSpec, createRunnerHost, pings } from './runner-host.js';
import type { ChildRun, ChildStep, RunnerHost } from './runner-host.js';

let host: RunnerHost;

beforeAll(async () => {
  await requireNetworkTestHost(['ip', 'iptables', 'nsenter', 'ping', `${PLUGIN_DIR}/bridge`]);
});

beforeEach(async () => {
  host = await createRunnerHost();
});

afterEach(async () => {
  await host.dispose();
});

interface Item {
  readonly ok: boolean;
  readonly value?: unknown;
  readonly error?: string;
}

/** Runs the child and insists it finished every step. */
async function run(steps: readonly ChildStep[]): Promise<ChildRun> {
  const r = await host.child(steps);
  if (r.exitCode !== 0 || r.steps.length !== steps.length) {
    throw new Error(
      `the runner process failed (exit ${String(r.exitCode)}, signal ${String(r.signal)}): ${r.stderr}`,
    );
  }
  return r;
}

function resultOf(r: ChildRun, op: string): unknown {
  return r.steps.find((s) => s.op === op)?.result;
}

/** The ruleset after an allocation with a port was set up and torn down (shared chains made). */
async function baseline(): Promise<string> {
  const warm = allocSpec({ ports: [{ label: 'warm', value: 19999, to: 80 }] });
  const r = await run([
    { op: 'start' },
    { op: 'setup', specs: [warm] },
    { op: 'teardown', ids: [warm.allocId] },
  ]);
  expect((resultOf(r, 'setup') as Item[])[0]?.ok).toBe(true);
  return host.ruleset();
}

function specs(policy: 'fail' | 'finish'): RunnerSpec[] {
  return [0, 1, 2].map((i) =>
    allocSpec({ ports: [{ label: 'http', value: 8080 + i, to: 80 }], interruptedSetup: policy }),
  );
}

/**
 * Restarts the runner (restore and reconcile), then checks that each allocation is fully there
 * or fully gone. Returns the ids that are there.
 */
async function restartAndVerify(ids: readonly string[]): Promise<string[]> {
  const r = await run([{ op: 'start' }, { op: 'check', ids }, { op: 'list' }]);
  const records = resultOf(r, 'list') as AllocRecord[];
  const checks = resultOf(r, 'check') as Item[];
  const rules = await host.ruleset();
  const reservations = await host.reservations();
  const namespaces = await host.namespaces();
  const there: string[] = [];
  for (const [i, id] of ids.entries()) {
    const rec = records.find((x) => x.allocId === id);
    const name = `${host.netnsPrefix}${id}`;
    if (rec?.phase === 'ready') {
      there.push(id);
      const address = rec.status?.address ?? '';
      expect([id, checks[i]?.ok, checks[i]?.error]).toEqual([id, true, undefined]);
      expect([id, await pings(host.node, address)]).toEqual([id, true]);
      expect([id, reservations[address]]).toEqual([id, id]);
      expect([id, namespaces.includes(name)]).toEqual([id, true]);
      expect([id, rules.includes(id)]).toEqual([id, true]);
    } else {
      // Gone: no record, or a failed one kept only to report it.
      expect([id, rec === undefined || rec.phase === 'failed']).toEqual([id, true]);
      expect([id, Object.values(reservations).includes(id)]).toEqual([id, false]);
      expect([id, namespaces.includes(name)]).toEqual([id, false]);
      expect([id, rules.includes(id)]).toEqual([id, false]);
    }
  }
  // No record of any other allocation, and none in a transitional phase.
  expect(
    records.filter(
      (x) => !ids.includes(x.allocId) || x.phase === 'setting-up' || x.phase === 'tearing-down',
    ),
  ).toEqual([]);
  return there;
}

/** Tears every allocation down (failed records included) and checks the node is at its baseline. */
async function tearDownAndCompare(ids: readonly string[], before: string): Promise<void> {
  const r = await run([{ op: 'teardown', ids }, { op: 'list' }]);
  expect((resultOf(r, 'teardown') as Item[]).filter((x) => !x.ok)).toEqual([]);
  expect(resultOf(r, 'list')).toEqual([]);
  expect(await host.ruleset()).toEqual(before);
  expect(await host.reservations()).toEqual({});
  expect(await host.namespaces()).toEqual([]);
}

describe('a runner killed during setup', () => {
  const cases = [
    'setup:after-intent',
    'setup:after-netns',
    'setup:after-add',
    'setup:after-ready',
  ].flatMap((point) => (['fail', 'finish'] as const).map((policy) => [point, policy] as const));

  it.each(cases)(
    'at %s (interruptedSetup: %s) leaves each allocation whole or gone',
    async (point, policy) => {
      const before = await baseline();
      const batch = specs(policy);
      const ids = batch.map((s) => s.allocId);

      const crashed = await host.child([{ op: 'start' }, { op: 'setup', specs: batch }], {
        crashAt: point,
      });
      expect([crashed.signal, crashed.steps.map((s) => s.op)]).toEqual(['SIGKILL', ['start']]);

      const there = await restartAndVerify(ids);
      if (policy === 'finish' || point === 'setup:after-ready') {
        // Finish sets every interrupted setup up again; after-ready, the killed one was done.
        expect(there.length).toBeGreaterThan(policy === 'finish' ? 2 : 0);
      } else {
        // At least the allocation that hit the crash point was undone and reported failed.
        expect(there.length).toBeLessThan(3);
      }
      await tearDownAndCompare(ids, before);
    },
  );
});

describe('a runner killed between two attachments', () => {
  it.each(['setup:after-attachment-intent', 'setup:after-attachment-add'])(
    'at %s leaves each allocation whole or gone, every network of it, and a teardown ends at the baseline',
    async (point) => {
      const before = await baseline();
      // A second network: a bridge of its own, host-local in the same IPAM dir (its reservations
      // are read with the default network's).
      await host.addBridgeNetwork('storage', 'a29rst0', '10.29.7.0/24');
      const batch = [0, 1, 2].map((i) =>
        allocSpec({
          ports: [{ label: 'http', value: 8090 + i, to: 80 }],
          attachments: [{}, { network: 'storage' }],
        }),
      );
      const ids = batch.map((s) => s.allocId);

      const crashed = await host.child([{ op: 'start' }, { op: 'setup', specs: batch }], {
        crashAt: point,
      });
      expect([crashed.signal, crashed.steps.map((s) => s.op)]).toEqual(['SIGKILL', ['start']]);

      const there = await restartAndVerify(ids);
      // The allocation that hit the crash point was undone and reported failed.
      expect(there.length).toBeLessThan(3);
      const interfaces = await Promise.all(
        there.map(async (id) => {
          const r = await execa('ip', ['-n', `${host.netnsPrefix}${id}`, '-o', 'link', 'show']);
          return r.stdout.includes(' net1@') || r.stdout.includes(' net1:');
        }),
      );
      expect(interfaces.every(Boolean)).toBe(true);
      await tearDownAndCompare(ids, before);
    },
  );
});

describe('a runner killed during teardown', () => {
  it.each(['teardown:after-intent', 'teardown:after-del', 'teardown:after-netns'])(
    'at %s leaves each allocation whole or gone, and a teardown after restart finishes',
    async (point) => {
      const before = await baseline();
      const batch = specs('fail');
      const ids = batch.map((s) => s.allocId);
      const set = await run([{ op: 'start' }, { op: 'setup', specs: batch }]);
      expect((resultOf(set, 'setup') as Item[]).filter((x) => !x.ok)).toEqual([]);

      const crashed = await host.child([{ op: 'start' }, { op: 'teardown', ids }], {
        crashAt: point,
      });
      expect([crashed.signal, crashed.steps.map((s) => s.op)]).toEqual(['SIGKILL', ['start']]);

      const there = await restartAndVerify(ids);
      // The allocation whose teardown hit the crash point was finished by restore.
      expect(there.length).toBeLessThan(3);
      await tearDownAndCompare(ids, before);
    },
  );
});
