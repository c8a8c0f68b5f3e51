// @allocnet/alloc-runner on the real configurator and the Debian plugins, in this process: a
// node namespace stands for the host (plugins run there, iptables through nsenter), the runner
// makes each allocation's namespace with `ip netns add` under its own prefix. Needs root and
// containernetworking-plugins; nothing runs in the root namespace.
import { execa } from 'execa';
import { requireNetworkTestHost } from '@allocnet/testns';
import { PLUGIN_DIR, allocSpec, createRunnerHost, pings } from './runner-host.js';
import type { RunnerHost } from './runner-host.js';

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

/** Sets one allocation (with a port) up and tears it down, so the bridge and the shared chains exist; returns the ruleset then. */
async function warmBaseline(): Promise<string> {
  const { runner } = await host.runner();
  const warm = allocSpec({ ports: [{ label: 'warm', value: 19999, to: 80 }] });
  await runner.setup(warm);
  await runner.teardown(warm.allocId);
  await runner.close();
  return host.ruleset();
}

describe('the runner on the real plugins', () => {
  it('gives an allocation its own namespace and network, and takes all of it back', async () => {
    const baseline = await warmBaseline();
    const { runner } = await host.runner();
    const spec = allocSpec({ ports: [{ label: 'http', value: 8080, to: 80 }] });

    const status = await runner.setup(spec);

    const name = `${host.netnsPrefix}${spec.allocId}`;
    expect(await host.namespaces()).toEqual([name]);
    expect(runner.get(spec.allocId)).toMatchObject({
      phase: 'ready',
      netnsPath: `/run/netns/${name}`,
      netnsCreated: true,
    });
    const inside = await execa('ip', ['-n', name, '-4', '-o', 'addr', 'show', 'eth0']);
    expect(inside.stdout).toContain(`inet ${status.address}/20`);
    expect(await pings(host.node, status.address)).toBe(true);
    expect(await runner.check(spec.allocId)).toEqual({ allocId: spec.allocId, ran: true });
    expect(await host.reservations()).toEqual({ [status.address]: spec.allocId });
    // The same spec again: the stored status, no second ADD (a second ADD would fail: eth0 exists).
    expect(await runner.setup(spec)).toEqual(status);

    const report = await runner.teardown(spec.allocId);
    expect(report).toMatchObject({
      known: true,
      netnsRemoved: true,
      report: { delError: undefined },
    });
    expect(report.report.removed).toEqual({
      rules: [],
      chains: [],
      reservations: [],
      cacheFiles: [],
    });
    expect(await host.ruleset()).toEqual(baseline);
    expect(await host.reservations()).toEqual({});
    expect(await host.namespaces()).toEqual([]);
    expect(runner.list()).toEqual([]);
  });

  it('leaves an IPv4-only interface without IPv6, in a namespace it made or a task driver’s', async () => {
    const { runner } = await host.runner();
    /** disable_ipv6 of `what` (an interface, or `default`), and whether `dev` has an IPv6 address. */
    const ipv6 = async (netns: string, what: string, dev = what) => {
      const sysctl = `net.ipv6.conf.${what}.disable_ipv6`;
      const r = await execa('nsenter', [`--net=${netns}`, '--', 'sysctl', '-n', sysctl]);
      const shown = await execa('nsenter', [`--net=${netns}`, '--', 'ip', '-6', '-o', 'addr', 'show', 'dev', dev]); // prettier-ignore
      return { disabled: r.stdout.trim(), addressed: shown.stdout.includes('inet6') };
    };
    const own = allocSpec();
    const status = await runner.setup(own);
    const made = `/run/netns/${host.netnsPrefix}${own.allocId}`;
    expect(await ipv6(made, 'eth0')).toEqual({ disabled: '1', addressed: false });
    // Made so by the namespace's default during the ADD, back on for later interfaces; lo keeps ::1.
    expect(await ipv6(made, 'default', 'lo')).toEqual({ disabled: '0', addressed: true });
    expect(await pings(host.node, status.address)).toBe(true);
    expect(await runner.check(own.allocId)).toMatchObject({ ran: true });

    // A task driver's namespace: its default untouched, the interface turned off after the ADD.
    const given = await host.lab.container('given');
    const driver = allocSpec({ netnsPath: given.path });
    const driven = await runner.setup(driver);
    expect(await ipv6(given.path, 'eth0')).toEqual({ disabled: '1', addressed: false });
    expect(await ipv6(given.path, 'default', 'eth0')).toMatchObject({ disabled: '0' });
    expect(await pings(host.node, driven.address)).toBe(true);

    await runner.teardown(driver.allocId);
    await runner.teardown(own.allocId);
    expect(await host.reservations()).toEqual({});
  });

  it('leaves IPv6 on an IPv4-only interface as the plugins make it when configured to', async () => {
    const { runner } = await host.runner({}, { ipv6OnIpv4Interfaces: true });
    const own = allocSpec();
    const status = await runner.setup(own);
    const made = `/run/netns/${host.netnsPrefix}${own.allocId}`;
    const given = await host.lab.container('given');
    const driver = allocSpec({ netnsPath: given.path });
    const driven = await runner.setup(driver);
    for (const netns of [made, given.path]) {
      const sysctl = 'net.ipv6.conf.eth0.disable_ipv6';
      const r = await execa('nsenter', [`--net=${netns}`, '--', 'sysctl', '-n', sysctl]);
      const shown = await execa('nsenter', [`--net=${netns}`, '--', 'ip', '-6', '-o', 'addr', 'show', 'dev', 'eth0']); // prettier-ignore
      expect([netns, r.stdout.trim(), shown.stdout]).toEqual([netns, '0', expect.stringContaining('inet6 fe80::')]); // prettier-ignore
    }
    expect(await pings(host.node, status.address)).toBe(true);
    expect(await pings(host.node, driven.address)).toBe(true);
    await runner.teardown(driver.allocId);
    await runner.teardown(own.allocId);
    expect(await host.reservations()).toEqual({});
  });

  it('restores 200 allocations after a restart with the same addresses and CHECK passing, then tears all down to the baseline', async () => {
    const baseline = await warmBaseline();
    const specs = Array.from({ length: 200 }, (_, i) =>
      allocSpec({ ports: [{ label: 'http', value: 20000 + i, to: 80 }] }),
    );
    const first = await host.runner();
    const statuses = await Promise.all(specs.map((s) => first.runner.setup(s)));
    expect(new Set(statuses.map((s) => s.address)).size).toBe(200);
    await first.runner.close();
    await first.configurator.close();

    const { runner } = await host.runner();
    const started = await runner.start();
    // Any other outcome, with why (its CHECK's error), before the counts.
    expect(started.restore.outcomes.filter((o) => o.result !== 'kept')).toEqual([]);
    expect(started.restore.counts).toMatchObject({ kept: 200, recreated: 0, failed: 0, error: 0 });
    expect(started.restore.outcomes.every((o) => o.checked)).toBe(true);
    expect(started.reconcile).toMatchObject({ leakedAllocations: 0, orphanNamespaces: 0 });
    expect(runner.list().map((r) => r.status?.address)).toEqual(
      runner.list().map((r) => statuses.find((s) => s.allocId === r.allocId)?.address),
    );
    expect(Object.keys(await host.reservations()).sort()).toEqual(
      statuses.map((s) => s.address).sort(),
    );
    expect(await pings(host.node, statuses[199]?.address ?? '')).toBe(true);

    await Promise.all(specs.map((s) => runner.teardown(s.allocId)));
    expect(await host.ruleset()).toEqual(baseline);
    expect(await host.reservations()).toEqual({});
    expect(await host.namespaces()).toEqual([]);
    expect(runner.stats()).toMatchObject({ live: 0, teardowns: 200, teardownFailures: 0 });
  }, 600_000);

  it('leaves nothing behind when the allocation’s namespace was deleted out of band', async () => {
    const baseline = await warmBaseline();
    const { runner } = await host.runner();
    const spec = allocSpec({ ports: [{ label: 'http', value: 8081, to: 80 }] });
    const status = await runner.setup(spec);
    await execa('ip', ['netns', 'del', `${host.netnsPrefix}${spec.allocId}`]);

    const report = await runner.teardown(spec.allocId);

    // Without the namespace, bridge's DEL cannot learn the addresses to un-masquerade; the
    // teardown removed that chain beside the DEL (native-del.ts): the audit found nothing left.
    expect(report).toMatchObject({ known: true, netnsRemoved: false });
    expect(report.report.delError).toBeUndefined();
    expect(report.report.removed.rules).toEqual([]);
    expect(await host.ruleset()).toEqual(baseline);
    expect(await host.reservations()).toEqual({});
    expect(await host.namespaces()).toEqual([]);
    expect((await host.ruleset()).includes(status.address)).toBe(false);
  });

  it('makes a lost namespace again at restore, with the same address, and traffic flows', async () => {
    await warmBaseline();
    const first = await host.runner();
    const spec = allocSpec();
    const status = await first.runner.setup(spec);
    await first.runner.close();
    // What a reboot does to the allocation: its namespace is gone (the node's state stays here).
    await execa('ip', ['netns', 'del', `${host.netnsPrefix}${spec.allocId}`]);

    const { runner } = await host.runner();
    const report = await runner.restore();
    expect(report.outcomes).toEqual([
      {
        allocId: spec.allocId,
        from: 'ready',
        result: 'recreated',
        checked: false,
        error: `namespace "/run/netns/${host.netnsPrefix}${spec.allocId}" is gone`,
      },
    ]);
    expect(runner.get(spec.allocId)?.status?.address).toBe(status.address);
    expect(await pings(host.node, status.address)).toBe(true);
    expect(await runner.check(spec.allocId)).toMatchObject({ ran: true });
    await runner.teardown(spec.allocId);
    expect(await host.reservations()).toEqual({});
  });

  it('sets an allocation up again in the same namespace when CHECK finds it broken', async () => {
    await warmBaseline();
    const first = await host.runner();
    const spec = allocSpec({ ports: [{ label: 'http', value: 8083, to: 80 }] });
    const status = await first.runner.setup(spec);
    await first.runner.close();
    // Break it while the agent is down: the allocation's interface disappears.
    const name = `${host.netnsPrefix}${spec.allocId}`;
    await execa('ip', ['-n', name, 'link', 'del', 'eth0']);
    const inode = (await execa('stat', ['-L', '-c', '%i', `/run/netns/${name}`])).stdout;

    const { runner } = await host.runner();
    const report = await runner.restore();
    expect(report.outcomes).toEqual([
      expect.objectContaining({
        allocId: spec.allocId,
        from: 'ready',
        result: 'recreated',
        checked: true,
      }),
    ]);
    expect(report.outcomes[0]?.error).toMatch(/^CHECK failed: /);
    // The same namespace (the tasks may run in it), the same address, and it works.
    expect((await execa('stat', ['-L', '-c', '%i', `/run/netns/${name}`])).stdout).toBe(inode);
    expect(runner.get(spec.allocId)?.status?.address).toBe(status.address);
    expect(await pings(host.node, status.address)).toBe(true);
    expect(await runner.check(spec.allocId)).toMatchObject({ ran: true });
    await runner.teardown(spec.allocId);
    expect(await host.reservations()).toEqual({});
    expect(await host.namespaces()).toEqual([]);
  });

  it('reports, then reaps, an allocation whose record is lost', async () => {
    const baseline = await warmBaseline();
    // One runner sets an allocation up; another on a fresh store (the record lost) sees a leak.
    const { runner: owner } = await host.runner();
    const spec = allocSpec({ ports: [{ label: 'http', value: 8082, to: 80 }] });
    await owner.setup(spec);
    await owner.close();

    const { runner: reporter } = await host.runner({
      dataDir: `${host.dataDir}-fresh`,
      reconcile: { mode: 'report', intervalMs: 0 },
    });
    expect(await reporter.reconcile()).toMatchObject({
      leakedAllocations: 1,
      orphanNamespaces: 1,
      reaped: 0,
      reapedNamespaces: 0,
      failed: [],
    });
    expect(await host.namespaces()).toEqual([`${host.netnsPrefix}${spec.allocId}`]);
    await reporter.close();

    const { runner: reaper } = await host.runner({ dataDir: `${host.dataDir}-fresh` });
    expect(await reaper.reconcile()).toMatchObject({
      leakedAllocations: 1,
      reaped: 1,
      orphanNamespaces: 1,
      reapedNamespaces: 1,
      failed: [],
    });
    expect(await host.ruleset()).toEqual(baseline);
    expect(await host.reservations()).toEqual({});
    expect(await host.namespaces()).toEqual([]);
  });
});
