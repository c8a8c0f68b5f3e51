// An allocation with several networks (attachments) against the recording fakes of the
// configurator and of `ip netns`, with a real LMDB store: setup in order with each intent synced,
// rollback in reverse naming the failing attachment, teardown in reverse, CHECK of each, restore
// of each (interrupted attach and detach included), attach and detach, host ports over every
// attachment, a crash at each new crash point, the stats.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AllocNetworkSpec } from '@allocnet/cni-configurator';
import type { CrashPoint } from './crash.js';
import { attachmentsOf } from './record.js';
import type { AllocRecord } from './record.js';
import { createAllocRunner } from './runner.js';
import type { AllocRunner } from './runner.js';
import type { RunnerSpec } from './spec.js';
import { openRunnerStore } from './store.js';
import {
  createManualClock,
  createRecordingConfigurator,
  createRecordingNetns,
  fillable,
  runnerRejection,
} from './testing/index.js';
import type {
  ConfiguratorCall,
  FillableStore,
  RecordingConfigurator,
  RecordingNetns,
} from './testing/index.js';

const A = '6b235529-8111-4bbe-520b-d639b1d2a94e';
const B = '0c1d2e3f-0000-4000-8000-00000000000b';

/** A primary on the default network with a port, then `storage` and `vlan`. */
function three(allocId: string, extra: Partial<RunnerSpec> = {}): RunnerSpec {
  return {
    allocId,
    namespace: 'default',
    jobId: 'web',
    groupName: 'api',
    ports: [{ label: 'http', value: 28080, to: 8080 }],
    cniArgs: { team: 'a' },
    attachments: [{}, { network: 'storage' }, { network: 'vlan', cniArgs: { team: 'b' } }],
    ...extra,
  };
}

/** Another allocation (B) on the default network, mapping `ports`. */
function otherWith(...ports: { label: string; value: number }[]): RunnerSpec {
  return {
    allocId: B,
    namespace: 'default',
    jobId: 'x',
    groupName: 'y',
    ...(ports.length === 0 ? {} : { ports }),
  };
}

let dir: string;
let opened: AllocRunner[];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'allocnet-attachments-'));
  opened = [];
});
afterEach(async () => {
  for (const r of opened) await r.close();
  await rm(dir, { recursive: true, force: true });
});

interface Harness {
  runner: AllocRunner;
  configurator: RecordingConfigurator;
  netns: RecordingNetns;
  store: FillableStore;
  points: CrashPoint[];
}

function fakes(): { configurator: RecordingConfigurator; netns: RecordingNetns } {
  const configurator = createRecordingConfigurator()
    .addNetwork('storage')
    .addNetwork('vlan', ['macvlan', 'tuning'])
    .addNetwork('backup');
  return { configurator, netns: createRecordingNetns() };
}

/** A runner on the test's data dir; pass the fakes of a previous one to model the same host. */
async function make(
  host = fakes(),
  onCrash: (point: CrashPoint) => void = () => undefined,
): Promise<Harness> {
  const store = fillable(await openRunnerStore({ dataDir: dir }), dir);
  const points: CrashPoint[] = [];
  const runner = await createAllocRunner({
    dataDir: dir,
    store,
    clock: createManualClock(1_000),
    crashPoints: {
      reached: (p) => {
        points.push(p);
        onCrash(p);
      },
    },
    reconcile: { mode: 'reap', intervalMs: 0 },
    ...host,
  });
  opened.push(runner);
  return { runner, ...host, store, points };
}

const rejection = runnerRejection;

/** The configurator's setup and teardown calls, as [method, ifName, only, with an attachment]. */
function steps(configurator: RecordingConfigurator): unknown[] {
  return configurator.calls
    .filter((c) => c.method === 'setup' || c.method === 'teardown' || c.method === 'check')
    .map((c: ConfiguratorCall) =>
      c.method === 'setup'
        ? ['setup', c.spec?.ifName]
        : [c.method, c.only?.ifName ?? c.attachment?.ifName ?? '*', c.attachment !== undefined],
    );
}

/** Nothing of any allocation left: no record, no namespace, no network. */
function nothingLeft(h: Harness): unknown {
  return [h.runner.list(), [...h.netns.names], h.configurator.attached.size];
}

describe('setup of several attachments', () => {
  it('sets them up in order, each intent synced before its plugins run', async () => {
    const h = await make();
    const seen: unknown[] = [];
    h.configurator.before = (call) => {
      if (call.method !== 'setup') return;
      // What the store holds when the plugins of this attachment start, and what was checked.
      const rec = h.runner.get(A);
      seen.push([
        call.spec?.ifName,
        rec?.phase,
        (rec?.extra ?? []).map((e) => [e.spec.ifName, e.phase]),
        h.configurator.specChecks.length,
      ]);
    };
    const status = await h.runner.setup(three(A));
    expect(seen).toEqual([
      ['eth0', 'setting-up', [], 3],
      ['net1', 'setting-up', [['net1', 'setting-up']], 3],
      [
        'net2',
        'setting-up',
        [
          ['net1', 'ready'],
          ['net2', 'setting-up'],
        ],
        3,
      ],
    ]);
    expect(h.points).toEqual([
      'setup:after-intent',
      'setup:after-netns',
      'setup:after-add',
      'setup:after-attachment-intent',
      'setup:after-attachment-add',
      'setup:after-attachment-intent',
      'setup:after-attachment-add',
      'setup:after-ready',
    ]);
    const specs = h.configurator.callsOf('setup').map((c) => c.spec as AllocNetworkSpec);
    expect(
      specs.map((s) => [s.network, s.ifName, s.ports?.length, s.cniArgs, s.defaultRoute]),
    ).toEqual([
      [undefined, 'eth0', 1, { team: 'a' }, undefined],
      ['storage', 'net1', undefined, { team: 'a' }, false],
      ['vlan', 'net2', undefined, { team: 'b' }, false],
    ]);
    const rec = h.runner.get(A) as AllocRecord;
    expect(status).toEqual(rec.status);
    expect(
      attachmentsOf(rec).map((v) => [v.index, v.primary, v.network, v.ifName, v.phase, v.attached]),
    ).toEqual([
      [0, true, 'nomad', 'eth0', 'ready', false],
      [1, false, 'storage', 'net1', 'ready', false],
      [2, false, 'vlan', 'net2', 'ready', false],
    ]);
    expect(h.runner.stats().attachmentsByNetwork).toEqual({ nomad: 1, storage: 1, vlan: 1 });
  });

  it('rolls back in reverse when the second fails, naming it; nothing is left', async () => {
    const h = await make();
    h.configurator.before = (call) => {
      if (call.method === 'setup' && call.spec?.ifName === 'net1')
        throw new Error('plugin "bridge" failed (ADD): no such device');
    };
    const error = await rejection(h.runner.setup(three(A)));
    expect([error.code, error.message]).toEqual([
      'setup-failed',
      `setup of allocation "${A}" failed: attachment 1 (net1, network "storage"): plugin "bridge" failed (ADD): no such device`,
    ]);
    expect(steps(h.configurator)).toEqual([
      ['setup', 'eth0'],
      ['setup', 'net1'],
      ['teardown', 'net1', false],
      ['teardown', 'eth0', true],
    ]);
    expect(h.configurator.callsOf('teardown')[0]?.only).toEqual({
      network: 'storage',
      ifName: 'net1',
    });
    expect(h.configurator.callsOf('teardown')[1]?.only).toBeUndefined();
    expect(nothingLeft(h)).toEqual([[], [], 0]);
  });

  it('rolls back the third, then the second, then the primary', async () => {
    const h = await make();
    h.configurator.before = (call) => {
      if (call.method === 'setup' && call.spec?.ifName === 'net2')
        throw new Error('master "vlan0" not found');
    };
    const error = await rejection(h.runner.setup(three(A)));
    expect(error.message).toBe(
      `setup of allocation "${A}" failed: attachment 2 (net2, network "vlan"): master "vlan0" not found`,
    );
    expect(steps(h.configurator)).toEqual([
      ['setup', 'eth0'],
      ['setup', 'net1'],
      ['setup', 'net2'],
      ['teardown', 'net2', false],
      ['teardown', 'net1', true],
      ['teardown', 'eth0', true],
    ]);
    expect(nothingLeft(h)).toEqual([[], [], 0]);
  });

  it('refuses before anything runs what checkSpec refuses, naming the attachment’s field', async () => {
    const h = await make();
    const unknown = await rejection(
      h.runner.setup(three(A, { attachments: [{}, { network: 'nowhere' }] })),
    );
    expect([unknown.code, unknown.field]).toEqual([
      'invalid-argument',
      'spec.attachments[1].network',
    ]);
    const mac = await rejection(
      h.runner.setup(
        three(A, { attachments: [{}, { network: 'storage', mac: '02:00:00:00:00:01' }] }),
      ),
    );
    expect([mac.code, mac.field]).toEqual(['invalid-argument', 'spec.attachments[1].mac']);
    // The default network named, and left unnamed: one network twice.
    const twice = await rejection(
      h.runner.setup(three(A, { attachments: [{}, { network: 'nomad' }] })),
    );
    expect([twice.code, twice.field, twice.message]).toEqual([
      'invalid-argument',
      'spec.attachments[1].network',
      'invalid allocation spec: spec.attachments[1].network is network "nomad", as attachment 0 is (every attachment is in a different network)',
    ]);
    expect([h.configurator.calls, h.netns.calls, h.runner.list()]).toEqual([[], [], []]);
  });
});

describe('teardown and CHECK of several attachments', () => {
  it('tears down in reverse order, each secondary scoped to itself, the primary last', async () => {
    const h = await make();
    await h.runner.setup(three(A));
    h.configurator.clearCalls();
    const report = await h.runner.teardown(A);
    expect(steps(h.configurator)).toEqual([
      ['teardown', 'net2', true],
      ['teardown', 'net1', true],
      ['teardown', 'eth0', true],
    ]);
    expect(h.configurator.calls.map((c) => c.only?.network)).toEqual([
      'vlan',
      'storage',
      undefined,
    ]);
    expect(report.secondaries?.map((r) => r.delRan)).toEqual([true, true]);
    expect(nothingLeft(h)).toEqual([[], [], 0]);
  });

  it('CHECKs every attachment and names the first that fails', async () => {
    const h = await make();
    await h.runner.setup(three(A));
    h.configurator.clearCalls();
    expect(await h.runner.check(A)).toEqual({ allocId: A, ran: true });
    expect(steps(h.configurator)).toEqual([
      ['check', 'eth0', true],
      ['check', 'net1', true],
      ['check', 'net2', true],
    ]);
    // The storage network's interface went away out of band.
    await h.configurator.teardown(A, undefined, { only: { network: 'storage', ifName: 'net1' } });
    const error = await rejection(h.runner.check(A));
    expect([error.code, error.message]).toEqual([
      'check-failed',
      `check of allocation "${A}" failed: attachment 1 (net1, network "storage"): fake CHECK: allocation "${A}" has no network "storage" on "net1"`,
    ]);
  });
});

describe('restore of several attachments', () => {
  it('keeps them when every CHECK passes; sets all up again on their addresses when one fails', async () => {
    const first = await make();
    await first.runner.setup(three(A));
    const before = first.runner.get(A) as AllocRecord;
    const addresses = attachmentsOf(before).map((v) => v.attachment?.addresses);
    await first.runner.close();
    const host = { configurator: first.configurator, netns: first.netns };

    const kept = await make(host);
    const report = await kept.runner.restore();
    expect(report.counts.kept).toBe(1);
    expect(host.configurator.callsOf('check')).toHaveLength(3);
    await kept.runner.close();

    await host.configurator.teardown(A, undefined, { only: { network: 'vlan', ifName: 'net2' } });
    host.configurator.clearCalls();
    const again = await make(host);
    const start = await again.runner.start();
    expect(start.restore.outcomes[0]?.result).toBe('recreated');
    expect(start.restore.outcomes[0]?.error).toMatch(
      /^CHECK failed: attachment 2 \(net2, network "vlan"\): /,
    );
    // Held at start (every attachment's address), torn down keeping the holds, set up again.
    expect(host.configurator.callsOf('holdAddresses')[0]?.held).toEqual([A, A, A]);
    expect(
      host.configurator.callsOf('teardown').map((c) => [c.only?.ifName ?? 'eth0', c.keepHolds]),
    ).toEqual([
      ['net2', true],
      ['net1', true],
      ['eth0', true],
    ]);
    expect(
      host.configurator.callsOf('setup').map((c) => [c.spec?.ifName, c.reclaim, c.ownNamespace]),
    ).toEqual([
      ['eth0', addresses[0], true],
      ['net1', addresses[1], true],
      ['net2', addresses[2], true],
    ]);
    const after = again.runner.get(A) as AllocRecord;
    expect(attachmentsOf(after).map((v) => [v.ifName, v.phase, v.attachment?.addresses])).toEqual([
      ['eth0', 'ready', addresses[0]],
      ['net1', 'ready', addresses[1]],
      ['net2', 'ready', addresses[2]],
    ]);
    expect(again.runner.stats().reclaimed).toBe(1);
  });

  it('makes a lost namespace again with every interface', async () => {
    const first = await make();
    await first.runner.setup(three(A));
    await first.runner.close();
    first.netns.delete(`alloc-${A}`);
    const again = await make({ configurator: first.configurator, netns: first.netns });
    const report = await again.runner.restore();
    expect(report.outcomes[0]?.result).toBe('recreated');
    expect(first.configurator.attachmentsOf(A).map((a) => a.ifName)).toEqual([
      'eth0',
      'net1',
      'net2',
    ]);
    expect([...first.netns.names]).toEqual([`alloc-${A}`]);
  });

  it('undoes an interrupted attach and finishes an interrupted detach', async () => {
    const first = await make();
    await first.runner.setup(three(A));
    const rec = first.runner.get(A) as AllocRecord;
    await first.runner.close();
    const extra = rec.extra ?? [];
    // net1 was being detached; a fourth network was being attached (its plugins may have run).
    const host = { configurator: first.configurator, netns: first.netns };
    await host.configurator.setup(
      {
        allocId: A,
        namespace: 'default',
        jobId: 'web',
        groupName: 'api',
        network: 'backup',
        ifName: 'net3',
      },
      rec.netnsPath,
    );
    const store = await openRunnerStore({ dataDir: dir });
    await store.put({
      ...rec,
      extra: [
        { ...(extra[0] as NonNullable<AllocRecord['extra']>[number]), phase: 'tearing-down' },
        extra[1] as NonNullable<AllocRecord['extra']>[number],
        {
          spec: {
            allocId: A,
            namespace: 'default',
            jobId: 'web',
            groupName: 'api',
            network: 'backup',
            ifName: 'net3',
            defaultRoute: false,
          },
          phase: 'setting-up',
          attached: true,
        },
      ],
    });
    await store.close();
    host.configurator.clearCalls();
    const again = await make(host);
    const report = await again.runner.restore();
    expect(report.outcomes[0]?.result).toBe('kept');
    expect(
      host.configurator
        .callsOf('teardown')
        .map((c) => [c.only?.ifName, c.attachment !== undefined]),
    ).toEqual([
      ['net3', false],
      ['net1', true],
    ]);
    expect(attachmentsOf(again.runner.get(A) as AllocRecord).map((v) => v.ifName)).toEqual([
      'eth0',
      'net2',
    ]);
    expect(host.configurator.attachmentsOf(A).map((a) => a.ifName)).toEqual(['eth0', 'net2']);
  });

  it('reads a record without extra attachments as one attachment', async () => {
    const h = await make();
    await h.runner.setup({ allocId: A, namespace: 'default', jobId: 'web', groupName: 'api' });
    const rec = h.runner.get(A) as AllocRecord;
    expect(rec.extra).toBeUndefined();
    expect(attachmentsOf(rec).map((v) => [v.index, v.network, v.ifName, v.phase])).toEqual([
      [0, 'nomad', 'eth0', 'ready'],
    ]);
  });
});

describe('attach and detach', () => {
  const single: RunnerSpec = {
    allocId: A,
    namespace: 'default',
    jobId: 'web',
    groupName: 'api',
    ports: [{ label: 'http', value: 28080 }],
  };

  it('attaches a network on the next interface, idempotently, and detaches it', async () => {
    const h = await make();
    await h.runner.setup(single);
    h.configurator.clearCalls();
    const seen: unknown[] = [];
    h.configurator.before = (call) => {
      if (call.method === 'setup') seen.push(h.runner.get(A)?.extra?.map((e) => e.phase));
    };
    const attached = await h.runner.attach(A, { network: 'storage' });
    expect(seen).toEqual([['setting-up']]);
    expect(attached.alreadyAttached).toBe(false);
    expect(
      h.configurator
        .callsOf('setup')
        .map((c) => [c.spec?.network, c.spec?.ifName, c.spec?.defaultRoute, c.ownNamespace]),
    ).toEqual([['storage', 'net1', false, true]]);
    expect(attachmentsOf(attached.record).map((v) => [v.ifName, v.phase, v.attached])).toEqual([
      ['eth0', 'ready', false],
      ['net1', 'ready', true],
    ]);
    expect(h.points.slice(-2)).toEqual([
      'setup:after-attachment-intent',
      'setup:after-attachment-add',
    ]);

    h.configurator.clearCalls();
    const again = await h.runner.attach(A, { network: 'storage', ifName: 'net1' });
    const retried = await h.runner.attach(A, { network: 'storage' });
    expect([again.alreadyAttached, retried.alreadyAttached, h.configurator.calls]).toEqual([
      true,
      true,
      [],
    ]);

    const detached = await h.runner.detach(A, 'net1');
    expect(detached.report.delRan).toBe(true);
    expect(h.configurator.callsOf('teardown').map((c) => c.only)).toEqual([
      { network: 'storage', ifName: 'net1' },
    ]);
    expect(attachmentsOf(detached.record).map((v) => v.ifName)).toEqual(['eth0']);
    expect(h.configurator.attachmentsOf(A).map((a) => a.ifName)).toEqual(['eth0']);
    const twice = await rejection(h.runner.detach(A, 'net1'));
    expect([twice.code, twice.message]).toEqual([
      'not-found',
      `allocation "${A}" has no interface "net1"`,
    ]);
  });

  it('answers not-found, conflict and invalid-argument as the design says', async () => {
    const h = await make();
    const none = await rejection(h.runner.attach(A, { network: 'storage' }));
    expect(none.code).toBe('not-found');
    expect((await rejection(h.runner.detach(A, 'net1'))).code).toBe('not-found');
    await h.runner.setup(single);
    await h.runner.attach(A, { network: 'storage' });
    const primary = await rejection(h.runner.detach(A, 'eth0'));
    expect([primary.code, primary.kind]).toEqual(['conflict', 'conflict']);
    const other = await rejection(h.runner.attach(A, { network: 'vlan', ifName: 'net1' }));
    expect([other.code, other.message]).toEqual([
      'conflict',
      `allocation "${A}" already has interface "net1" (network "storage"); detach it first`,
    ]);
    const same = await rejection(h.runner.attach(A, { network: '' }));
    expect([same.code, same.field]).toEqual(['invalid-argument', 'attachment.network']);
    const unknown = await rejection(h.runner.attach(A, { network: 'nowhere' }));
    expect([unknown.code, unknown.field]).toEqual(['invalid-argument', 'attachment.network']);
    const route = await rejection(h.runner.attach(A, { network: 'vlan', defaultRoute: true }));
    expect([route.code, route.field]).toEqual(['invalid-argument', 'attachment.defaultRoute']);
    const typo = await rejection(h.runner.attach(A, { network: 'vlan', ifname: 'x' } as never));
    expect([typo.code, typo.field]).toEqual(['invalid-argument', 'attachment.ifname']);
    const limit = await rejection(h.runner.attach(A, { network: 'vlan' }, { maxAttachments: 2 }));
    expect([limit.code, limit.field]).toEqual(['invalid-argument', 'attachment']);
    expect(attachmentsOf(h.runner.get(A) as AllocRecord)).toHaveLength(2);
  });

  it('undoes a failed attach: the allocation stays as it was, the port is free', async () => {
    const h = await make();
    await h.runner.setup(single);
    h.configurator.fail('setup', new Error('master "vlan0" not found'));
    const error = await rejection(
      h.runner.attach(A, { network: 'vlan', ports: [{ label: 'db', value: 25432 }] }),
    );
    expect([error.code, error.message]).toEqual([
      'setup-failed',
      `attach of network "vlan" to allocation "${A}" (net1) failed: master "vlan0" not found`,
    ]);
    expect(h.runner.get(A)?.extra).toBeUndefined();
    expect(h.configurator.attachmentsOf(A).map((a) => a.ifName)).toEqual(['eth0']);
    await h.runner.setup({ ...single, allocId: B, ports: [{ label: 'db', value: 25432 }] });
  });
});

describe('host ports over every attachment', () => {
  it('claims the ports of each attachment, across a restart, and frees them on detach', async () => {
    const first = await make();
    await first.runner.setup(
      three(A, {
        attachments: [{}, { network: 'storage', ports: [{ label: 'nfs', value: 22049 }] }],
      }),
    );
    await first.runner.close();
    const h = await make({ configurator: first.configurator, netns: first.netns });
    await h.runner.start();
    const taken = await rejection(h.runner.setup(otherWith({ label: 'n', value: 22049 })));
    expect([taken.code, taken.field]).toEqual(['host-port-taken', 'spec.ports[0].value']);
    await h.runner.setup(otherWith());
    const viaAttach = await rejection(
      h.runner.attach(B, { network: 'vlan', ports: [{ label: 'web', value: 28080 }] }),
    );
    expect([viaAttach.code, viaAttach.field, viaAttach.message]).toEqual([
      'host-port-taken',
      'attachment.ports[0].value',
      `attach to allocation "${B}" refused: attachment.ports[0].value ("web"): host port 28080/tcp on every address is already mapped by allocation "${A}"`,
    ]);
    await h.runner.detach(A, 'net1');
    await h.runner.attach(B, { network: 'storage', ports: [{ label: 'n', value: 22049 }] });
  });

  it('refuses an attach of a host port another attachment of the allocation maps', async () => {
    const h = await make();
    await h.runner.setup(
      three(A, {
        attachments: [{}, { network: 'storage', ports: [{ label: 'nfs', value: 22049 }] }],
      }),
    );
    h.configurator.clearCalls();
    const primary = await rejection(
      h.runner.attach(A, { network: 'vlan', ports: [{ label: 'web', value: 28080 }] }),
    );
    expect([primary.code, primary.field, primary.message]).toEqual([
      'invalid-argument',
      'attachment.ports[0].value',
      'invalid attachment: attachment.ports[0].value maps host port 28080/tcp, as attachment 0 (eth0, network "nomad") does (a host port goes to one attachment)',
    ]);
    const secondary = await rejection(
      h.runner.attach(A, {
        network: 'vlan',
        ports: [
          { label: 'ok', value: 23000 },
          { label: 'nfs', value: 22049, hostIp: '10.0.0.1' },
        ],
      }),
    );
    expect([secondary.code, secondary.field, secondary.message]).toEqual([
      'invalid-argument',
      'attachment.ports[1].value',
      'invalid attachment: attachment.ports[1].value maps host port 22049/tcp, as attachment 1 (net1, network "storage") does (a host port goes to one attachment)',
    ]);
    expect(h.configurator.callsOf('setup')).toEqual([]);
    expect(h.runner.get(A)?.extra).toHaveLength(1);
    // The claims are as before: 23000 was not taken, 28080 and 22049 are still A's.
    await h.runner.setup(otherWith({ label: 'free', value: 23000 }));
    const held = await rejection(
      h.runner.attach(B, { network: 'vlan', ports: [{ label: 'web', value: 28080 }] }),
    );
    expect(held.code).toBe('host-port-taken');
  });
});

describe('an attach after a detach of a secondary the spec named', () => {
  it('names the attachment’s own fields, not the spec’s attachment at that index', async () => {
    const h = await make();
    await h.runner.setup(three(A));
    await h.runner.detach(A, 'net1');
    await h.runner.setup(otherWith({ label: 'b', value: 23000 }));
    // The allocation has 2 attachments, its spec names 3: the attach is attachment 2.
    const mac = await rejection(
      h.runner.attach(A, { network: 'storage', mac: '02:00:00:00:00:01' }),
    );
    expect([mac.code, mac.field]).toEqual(['invalid-argument', 'attachment.mac']);
    const taken = await rejection(
      h.runner.attach(A, { network: 'backup', ports: [{ label: 'x', value: 23000 }] }),
    );
    expect([taken.code, taken.field]).toEqual(['host-port-taken', 'attachment.ports[0].value']);
    const own = await rejection(
      h.runner.attach(A, { network: 'backup', ports: [{ label: 'web', value: 28080 }] }),
    );
    expect([own.code, own.field]).toEqual(['invalid-argument', 'attachment.ports[0].value']);
  });
});

describe('a crash at each new crash point', () => {
  for (const at of ['setup:after-attachment-intent', 'setup:after-attachment-add'] as const) {
    it(`leaves nothing after ${at} once restore ran`, async () => {
      const host = fakes();
      let crashed = false;
      // From the crash on, nothing the first runner does reaches the host or the disk.
      host.configurator.before = () => {
        if (crashed) throw new Error('crashed');
      };
      host.netns.before = () => {
        if (crashed) throw new Error('crashed');
      };
      const first = await make(host, (point) => {
        if (point === at && !crashed) {
          crashed = true;
          first.store.full = true;
        }
      });
      await rejection(first.runner.setup(three(A)));
      const left = first.runner.get(A) as AllocRecord;
      // Either way the second attachment's entry is recorded `setting-up` (its ADD may have run).
      expect([left.phase, left.extra?.map((e) => e.phase)]).toEqual(['setting-up', ['setting-up']]);
      expect(host.configurator.attachmentsOf(A).length).toBe(
        at === 'setup:after-attachment-intent' ? 1 : 2,
      );
      await first.runner.close();
      crashed = false;
      const again = await make(host);
      const report = await again.runner.restore();
      expect(report.outcomes[0]?.result).toBe('failed');
      await again.runner.teardown(A);
      expect(nothingLeft(again)).toEqual([[], [], 0]);
    });
  }
});

describe('an interrupted setup whose spec says finish', () => {
  it('is undone and set up again with every attachment', async () => {
    const host = fakes();
    let crashed = false;
    host.configurator.before = () => {
      if (crashed) throw new Error('crashed');
    };
    const first = await make(host, (point) => {
      if (point === 'setup:after-attachment-add' && !crashed) {
        crashed = true;
        first.store.full = true;
      }
    });
    await rejection(first.runner.setup(three(A, { interruptedSetup: 'finish' })));
    await first.runner.close();
    crashed = false;
    const again = await make(host);
    const report = await again.runner.restore();
    expect(report.outcomes[0]?.result).toBe('finished');
    expect(
      attachmentsOf(again.runner.get(A) as AllocRecord).map((v) => [v.ifName, v.phase]),
    ).toEqual([
      ['eth0', 'ready'],
      ['net1', 'ready'],
      ['net2', 'ready'],
    ]);
    expect(host.configurator.attachmentsOf(A).map((a) => a.ifName)).toEqual([
      'eth0',
      'net1',
      'net2',
    ]);
  });
});

describe('a detach that failed', () => {
  it('stays tearing-down until the next detach finishes it', async () => {
    const h = await make();
    await h.runner.setup(three(A));
    h.configurator.fail('teardown', new Error('iptables is locked'));
    const error = await rejection(h.runner.detach(A, 'net1'));
    expect([error.code, error.message]).toEqual([
      'teardown-failed',
      `detach of interface "net1" from allocation "${A}" failed: iptables is locked`,
    ]);
    expect(h.runner.get(A)?.extra?.map((e) => e.phase)).toEqual(['tearing-down', 'ready']);
    expect(h.runner.stats().attachmentsByNetwork).toEqual({ nomad: 1, vlan: 1 });
    const done = await h.runner.detach(A, 'net1');
    expect(attachmentsOf(done.record).map((v) => v.ifName)).toEqual(['eth0', 'net2']);
  });
});

describe('the reconciler', () => {
  it('counts every attachment of a live allocation as known, and reaps all of a leaked one', async () => {
    const h = await make();
    await h.runner.setup(three(A));
    const report = await h.runner.reconcile();
    expect([report.leakedAllocations, h.configurator.attachmentsOf(A)]).toEqual([
      0,
      expect.any(Array),
    ]);
    expect(h.configurator.attachmentsOf(A)).toHaveLength(3);
    // The record is lost: every network of the allocation is a leak, reaped together.
    const store = h.store;
    await store.remove(A);
    const reaped = await h.runner.reconcile();
    expect([reaped.leakedAllocations, reaped.reaped, h.configurator.attached.size]).toEqual([
      1, 1, 0,
    ]);
  });
});
