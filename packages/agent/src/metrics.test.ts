import type { RunnerStats } from '@allocnet/alloc-runner';
import type { PluginExec, PluginStartRequest } from '@allocnet/cni';
import { createAgentMetrics, timedPluginExec } from './metrics.js';

function stats(extra: Partial<RunnerStats> = {}): RunnerStats {
  return {
    allocations: { 'setting-up': 1, ready: 3, 'tearing-down': 0, failed: 2 },
    live: 3,
    attachmentsByNetwork: { nomad: 3, storage: 1 },
    running: 0,
    waiting: 0,
    restoring: 0,
    setups: 0,
    setupFailures: 0,
    teardowns: 0,
    teardownFailures: 0,
    checks: 0,
    checkFailures: 0,
    restored: 0,
    recreated: 0,
    reclaimed: 0,
    addressesLost: 0,
    restoreFailures: 0,
    reconciles: 0,
    reconcileFailures: 0,
    leaksFound: 0,
    leaksReaped: 0,
    orphanNamespacesFound: 0,
    orphanNamespacesReaped: 0,
    leakedLeft: 0,
    strayNamespacesLeft: 0,
    store: { writable: true, writeFailures: 0 },
    unremovedRecords: 0,
    ...extra,
  };
}

/** The sample lines of one metric family, without HELP and TYPE. */
async function samples(
  metrics: ReturnType<typeof createAgentMetrics>,
  name: string,
): Promise<string[]> {
  const text = await metrics.registry.getSingleMetricAsString(name);
  return text.split('\n').filter((l) => l !== '' && !l.startsWith('#'));
}

describe('createAgentMetrics', () => {
  it('records setups, teardowns, retries and failures', async () => {
    const m = createAgentMetrics({ stats: () => stats(), version: '1.2.3', processMetrics: false });
    m.setup(0.3, 'ok', 0);
    m.setup(2.2, 'ok', 1);
    m.setup(7, 'error', 2);
    m.teardown(0.4, 'ok');
    m.failure('setup', 'INTERNAL');
    m.failure('setup', 'INTERNAL');
    m.failure('teardown', 'UNAVAILABLE');
    expect(await samples(m, 'allocnet_setup_retries_total')).toEqual([
      'allocnet_setup_retries_total 3',
    ]);
    expect(await samples(m, 'allocnet_operation_failures_total')).toEqual([
      'allocnet_operation_failures_total{op="setup",code="INTERNAL"} 2',
      'allocnet_operation_failures_total{op="teardown",code="UNAVAILABLE"} 1',
    ]);
    const setup = await samples(m, 'allocnet_setup_duration_seconds');
    expect(setup).toContain('allocnet_setup_duration_seconds_bucket{le="0.5",outcome="ok"} 1');
    expect(setup).toContain('allocnet_setup_duration_seconds_bucket{le="2.5",outcome="ok"} 2');
    expect(setup).toContain('allocnet_setup_duration_seconds_count{outcome="ok"} 2');
    expect(setup).toContain('allocnet_setup_duration_seconds_bucket{le="5",outcome="error"} 0');
    expect(setup).toContain('allocnet_setup_duration_seconds_bucket{le="10",outcome="error"} 1');
    expect(setup).toContain('allocnet_setup_duration_seconds_sum{outcome="error"} 7');
    expect(await samples(m, 'allocnet_teardown_duration_seconds')).toContain(
      'allocnet_teardown_duration_seconds_count{outcome="ok"} 1',
    );
    expect(await samples(m, 'allocnet_agent_info')).toEqual([
      'allocnet_agent_info{version="1.2.3"} 1',
    ]);
  });

  it('says how many queued DELs the last replay left', async () => {
    const m = createAgentMetrics({ stats: () => stats(), version: '1', processMetrics: false });
    expect(await samples(m, 'allocnet_cni_queue_pending')).toEqual([
      'allocnet_cni_queue_pending 0',
    ]);
    m.cniQueueReplay('failed');
    m.cniQueuePending(2);
    expect(await samples(m, 'allocnet_cni_queue_pending')).toEqual([
      'allocnet_cni_queue_pending 2',
    ]);
    m.cniQueuePending(0);
    expect(await samples(m, 'allocnet_cni_queue_pending')).toEqual([
      'allocnet_cni_queue_pending 0',
    ]);
  });

  it('reads live allocations and records by phase from the runner at each scrape', async () => {
    let now = stats();
    const m = createAgentMetrics({ stats: () => now, version: '0', processMetrics: false });
    expect(await samples(m, 'allocnet_live_allocations')).toEqual(['allocnet_live_allocations 3']);
    expect(await samples(m, 'allocnet_allocations')).toEqual([
      'allocnet_allocations{phase="setting-up"} 1',
      'allocnet_allocations{phase="ready"} 3',
      'allocnet_allocations{phase="tearing-down"} 0',
      'allocnet_allocations{phase="failed"} 2',
    ]);
    now = stats({ live: 0 });
    expect(await samples(m, 'allocnet_live_allocations')).toEqual(['allocnet_live_allocations 0']);
  });

  it('counts ready attachments by network, dropping a network that has none left', async () => {
    let now = stats();
    const m = createAgentMetrics({ stats: () => now, version: '0', processMetrics: false });
    expect(await samples(m, 'allocnet_attachments')).toEqual([
      'allocnet_attachments{network="nomad"} 3',
      'allocnet_attachments{network="storage"} 1',
    ]);
    now = stats({ attachmentsByNetwork: { nomad: 2 } });
    expect(await samples(m, 'allocnet_attachments')).toEqual([
      'allocnet_attachments{network="nomad"} 2',
    ]);
  });

  it('says whether the state store is writable, and counts the writes a full data dir refused', async () => {
    let now = stats();
    const m = createAgentMetrics({ stats: () => now, version: '0', processMetrics: false });
    expect(await samples(m, 'allocnet_store_writable')).toEqual(['allocnet_store_writable 1']);
    expect(await samples(m, 'allocnet_store_write_failures_total')).toEqual([
      'allocnet_store_write_failures_total 0',
    ]);
    now = stats({
      store: {
        writable: false,
        problem: 'the data dir "/d" has no space left',
        sinceMs: 5,
        writeFailures: 3,
      },
    });
    expect(await samples(m, 'allocnet_store_writable')).toEqual(['allocnet_store_writable 0']);
    expect(await samples(m, 'allocnet_store_write_failures_total')).toEqual([
      'allocnet_store_write_failures_total 3',
    ]);
    now = stats({ store: { writable: true, writeFailures: 3 } });
    expect(await samples(m, 'allocnet_store_writable')).toEqual(['allocnet_store_writable 1']);
    expect(await samples(m, 'allocnet_store_write_failures_total')).toEqual([
      'allocnet_store_write_failures_total 3',
    ]);
  });

  it('says what the last reconcile pass left on the node, now', async () => {
    let now = stats();
    const m = createAgentMetrics({ stats: () => now, version: '0', processMetrics: false });
    expect(await samples(m, 'allocnet_leaked_allocations')).toEqual([
      'allocnet_leaked_allocations 0',
    ]);
    now = stats({ leaksFound: 9, leakedLeft: 3, strayNamespacesLeft: 2 });
    expect(await samples(m, 'allocnet_leaked_allocations')).toEqual([
      'allocnet_leaked_allocations 3',
    ]);
    expect(await samples(m, 'allocnet_stray_namespaces')).toEqual(['allocnet_stray_namespaces 2']);
    now = stats({ leaksFound: 9 });
    expect(await samples(m, 'allocnet_leaked_allocations')).toEqual([
      'allocnet_leaked_allocations 0',
    ]);
  });

  it("counts the leaks the runner counted (its reconciler's and the operators')", async () => {
    let now = stats({ leaksFound: 5, leaksReaped: 4 });
    const m = createAgentMetrics({ stats: () => now, version: '0', processMetrics: false });
    expect(await samples(m, 'allocnet_leaks_found_total')).toEqual([
      'allocnet_leaks_found_total 5',
    ]);
    expect(await samples(m, 'allocnet_leaks_reaped_total')).toEqual([
      'allocnet_leaks_reaped_total 4',
    ]);
    now = stats({
      leaksFound: 7,
      leaksReaped: 4,
      orphanNamespacesFound: 2,
      orphanNamespacesReaped: 1,
    });
    expect(await samples(m, 'allocnet_stray_namespaces_found_total')).toEqual([
      'allocnet_stray_namespaces_found_total 2',
    ]);
    expect(await samples(m, 'allocnet_stray_namespaces_reaped_total')).toEqual([
      'allocnet_stray_namespaces_reaped_total 1',
    ]);
    expect(await samples(m, 'allocnet_leaks_found_total')).toEqual([
      'allocnet_leaks_found_total 7',
    ]);
    // Scraped again without a change: nothing counted twice.
    expect(await samples(m, 'allocnet_leaks_found_total')).toEqual([
      'allocnet_leaks_found_total 7',
    ]);
  });

  it('counts the allocations restore re-claimed and the addresses it lost', async () => {
    let now = stats({ reclaimed: 28, addressesLost: 2 });
    const m = createAgentMetrics({ stats: () => now, version: '1', processMetrics: false });
    expect(await samples(m, 'allocnet_restore_addresses_reclaimed_total')).toEqual([
      'allocnet_restore_addresses_reclaimed_total 28',
    ]);
    expect(await samples(m, 'allocnet_restore_addresses_lost_total')).toEqual([
      'allocnet_restore_addresses_lost_total 2',
    ]);
    now = stats({ reclaimed: 28, addressesLost: 3 });
    expect(await samples(m, 'allocnet_restore_addresses_lost_total')).toEqual([
      'allocnet_restore_addresses_lost_total 3',
    ]);
  });

  it('has no runner counters before the runner exists', async () => {
    const m = createAgentMetrics({ stats: () => undefined, version: '0', processMetrics: false });
    expect(await samples(m, 'allocnet_live_allocations')).toEqual(['allocnet_live_allocations 0']);
  });

  it('keeps each agent in its own registry, with process metrics when asked', async () => {
    const a = createAgentMetrics({ stats: () => undefined, version: '0', processMetrics: true });
    const b = createAgentMetrics({ stats: () => undefined, version: '0', processMetrics: false });
    a.failure('setup', 'INTERNAL');
    expect(await samples(b, 'allocnet_operation_failures_total')).toEqual([]);
    expect(await a.registry.metrics()).toContain('allocnet_process_cpu_user_seconds_total');
    expect(await b.registry.metrics()).not.toContain('allocnet_process_cpu_user_seconds_total');
  });
});

describe('timedPluginExec', () => {
  it('times each plugin run by the binary name and CNI command', async () => {
    const started: PluginStartRequest[] = [];
    const exec: PluginExec = {
      start(request) {
        started.push(request);
        return {
          run: () => {
            clock += 250;
            return Promise.resolve({ kind: 'exited', exitCode: 0, stdout: '{}', stderr: '' });
          },
          cancel() {
            // Nothing started.
          },
        };
      },
    };
    let clock = 1000;
    const seen: [string, string, number][] = [];
    const timed = timedPluginExec(
      exec,
      (p, v, s) => seen.push([p, v, s]),
      () => clock,
    );
    const request = { path: '/usr/lib/cni/bridge', env: { CNI_COMMAND: 'ADD' }, timeoutMs: 1000 };
    await timed.start(request).run('{}');
    expect(started).toEqual([request]);
    expect(seen).toEqual([['bridge', 'ADD', 0.25]]);
  });

  it('times a failed run too', async () => {
    const exec: PluginExec = {
      start: () => ({
        run: () => Promise.reject(new Error('spawn failed')),
        cancel() {
          // Nothing started.
        },
      }),
    };
    const seen: string[] = [];
    const timed = timedPluginExec(
      exec,
      (p, v) => seen.push(`${p} ${v}`),
      () => 0,
    );
    await expect(
      timed
        .start({ path: '/opt/cni/bin/portmap', env: { CNI_COMMAND: 'DEL' }, timeoutMs: 1 })
        .run(''),
    ).rejects.toThrow('spawn failed');
    expect(seen).toEqual(['portmap DEL']);
  });
});
