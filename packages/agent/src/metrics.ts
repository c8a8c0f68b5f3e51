// Prometheus metrics: one registry per agent (never prom-client's global one, so that several
// agents, or tests, in one process do not share counters), served by metrics-server.ts.
import { basename } from 'node:path';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { RunnerStats } from '@allocnet/alloc-runner';
import type { PluginExec } from '@allocnet/cni';

/** What the agent records; each method is one observation. */
export interface AgentMetrics {
  readonly registry: Registry;
  /** A finished setup RPC: its duration and outcome, and the ADD retries it took. */
  setup(seconds: number, outcome: 'ok' | 'error', retries: number): void;
  teardown(seconds: number, outcome: 'ok' | 'error'): void;
  /** A failed RPC, by operation (`setup`, `reap-leaks`, …) and gRPC status name. */
  failure(op: string, code: string): void;
  /** One plugin process, from start of its stdin to its exit. */
  pluginExec(plugin: string, verb: string, seconds: number): void;
  /** One CNI server call (`invalid` for a request that did not decode), by its CNI code (0: ok). */
  cniCall(command: string, code: number, seconds: number): void;
  /** One DEL from allocnet-cni's queue, by what became of it. */
  cniQueueReplay(outcome: 'replayed' | 'failed' | 'dropped'): void;
  /** DELs still in allocnet-cni's queue after a replay (the ones that failed stay). */
  cniQueuePending(n: number): void;
}

export interface AgentMetricsOptions {
  /** The runner's counters, read at each scrape; undefined before the runner exists. */
  readonly stats: () => RunnerStats | undefined;
  readonly version: string;
  /** Node process metrics (CPU, memory, event loop, fds) with prefix `allocnet_`. Default true. */
  readonly processMetrics?: boolean;
  /** Records now by origin (`grpc`, or the CNI runtime: `nomad`, `kubernetes`, `podman`, `cni`). */
  readonly origins?: () => Readonly<Record<string, number>>;
}

const DURATION_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const PLUGIN_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export function createAgentMetrics(options: AgentMetricsOptions): AgentMetrics {
  const registry = new Registry();
  const registers = [registry];

  const setupDuration = new Histogram({
    name: 'allocnet_setup_duration_seconds',
    help: 'SetupAllocNetwork calls, from request to answer (retries and first-setup waits included), by outcome',
    labelNames: ['outcome'] as const,
    buckets: DURATION_BUCKETS,
    registers,
  });
  const teardownDuration = new Histogram({
    name: 'allocnet_teardown_duration_seconds',
    help: 'TeardownAllocNetwork calls, from request to answer (DEL and the leak audit included), by outcome',
    labelNames: ['outcome'] as const,
    buckets: DURATION_BUCKETS,
    registers,
  });
  const retries = new Counter({
    name: 'allocnet_setup_retries_total',
    help: 'CNI ADD attempts after the first one (each after a DEL and a 1-2 s wait)',
    registers,
  });
  const failures = new Counter({
    name: 'allocnet_operation_failures_total',
    help: 'RPCs that failed, by operation and gRPC status code',
    labelNames: ['op', 'code'] as const,
    registers,
  });

  // Leaks are counted in one place, the runner (its reconciler and the operators' ListLeaks and
  // ReapLeaks): a scrape adds what it counted since the last one.
  let countedFound = 0;
  let countedReaped = 0;
  new Counter({
    name: 'allocnet_leaks_found_total',
    help: 'Leaked allocations (host state tagged with an allocation the agent does not know) found by the reconciler, ListLeaks and ReapLeaks',
    registers,
    collect() {
      const found = options.stats()?.leaksFound ?? countedFound;
      if (found > countedFound) this.inc(found - countedFound);
      countedFound = found;
    },
  });
  new Counter({
    name: 'allocnet_leaks_reaped_total',
    help: 'Leaked allocations whose state was removed by the reconciler or ReapLeaks',
    registers,
    collect() {
      const reaped = options.stats()?.leaksReaped ?? countedReaped;
      if (reaped > countedReaped) this.inc(reaped - countedReaped);
      countedReaped = reaped;
    },
  });
  let countedNetnsFound = 0;
  let countedNetnsReaped = 0;
  new Counter({
    name: 'allocnet_stray_namespaces_found_total',
    help: "Namespaces named like the agent's allocations' that no allocation has, found by the reconciler, ListLeaks and ReapLeaks",
    registers,
    collect() {
      const found = options.stats()?.orphanNamespacesFound ?? countedNetnsFound;
      if (found > countedNetnsFound) this.inc(found - countedNetnsFound);
      countedNetnsFound = found;
    },
  });
  new Counter({
    name: 'allocnet_stray_namespaces_reaped_total',
    help: 'Stray namespaces removed by the reconciler (reap mode) or ReapLeaks',
    registers,
    collect() {
      const reaped = options.stats()?.orphanNamespacesReaped ?? countedNetnsReaped;
      if (reaped > countedNetnsReaped) this.inc(reaped - countedNetnsReaped);
      countedNetnsReaped = reaped;
    },
  });
  new Gauge({
    name: 'allocnet_leaked_allocations',
    help: 'Leaked allocations the last reconcile pass left on the node (report mode: all it found; reap mode: those it could not remove)',
    registers,
    collect() {
      this.set(options.stats()?.leakedLeft ?? 0);
    },
  });
  new Gauge({
    name: 'allocnet_stray_namespaces',
    help: 'Stray namespaces the last reconcile pass left on the node (report mode: all it found; reap mode: those it could not remove)',
    registers,
    collect() {
      this.set(options.stats()?.strayNamespacesLeft ?? 0);
    },
  });
  new Gauge({
    name: 'allocnet_live_allocations',
    help: 'Allocation networks set up and ready now',
    registers,
    collect() {
      this.set(options.stats()?.live ?? 0);
    },
  });
  new Gauge({
    name: 'allocnet_allocations',
    help: 'Allocation records by phase now (failed: restore could not keep them; a teardown clears them)',
    labelNames: ['phase'] as const,
    registers,
    collect() {
      const stats = options.stats();
      for (const phase of ['setting-up', 'ready', 'tearing-down', 'failed'] as const)
        this.set({ phase }, stats?.allocations[phase] ?? 0);
    },
  });
  new Gauge({
    name: 'allocnet_restoring_allocations',
    help: 'Allocations the restore after the start has not settled yet (the agent serves meanwhile; an operation on one of them waits for it)',
    registers,
    collect() {
      this.set(options.stats()?.restoring ?? 0);
    },
  });
  new Gauge({
    name: 'allocnet_store_writable',
    help: 'Whether the state store can be written now: 0 once a write found the data dir full, 1 again once a write (or the retry probe) succeeds',
    registers,
    collect() {
      this.set(options.stats()?.store.writable === false ? 0 : 1);
    },
  });
  let countedWriteFailures = 0;
  new Counter({
    name: 'allocnet_store_write_failures_total',
    help: 'State store writes that failed because the data dir was full or over quota (the call failed with RESOURCE_EXHAUSTED, nothing changed)',
    registers,
    collect() {
      const failed = options.stats()?.store.writeFailures ?? countedWriteFailures;
      if (failed > countedWriteFailures) this.inc(failed - countedWriteFailures);
      countedWriteFailures = failed;
    },
  });
  const pluginExec = new Histogram({
    name: 'allocnet_plugin_exec_duration_seconds',
    help: 'CNI plugin processes, from their stdin to their exit, by plugin type and CNI command',
    labelNames: ['plugin', 'verb'] as const,
    buckets: PLUGIN_BUCKETS,
    registers,
  });
  new Gauge({
    name: 'allocnet_allocations_by_origin',
    help: 'Allocation records now by who asked for them: grpc, or the CNI runtime (nomad, kubernetes, podman, cni)',
    labelNames: ['origin'] as const,
    registers,
    collect() {
      this.reset();
      for (const [origin, n] of Object.entries(options.origins?.() ?? {})) this.set({ origin }, n);
    },
  });
  const cniCalls = new Histogram({
    name: 'allocnet_cni_call_duration_seconds',
    help: 'CNI server calls from allocnet-cni, from request to answer, by CNI command and CNI error code (0: success)',
    labelNames: ['command', 'code'] as const,
    buckets: DURATION_BUCKETS,
    registers,
  });
  const cniReplays = new Counter({
    name: 'allocnet_cni_queue_replayed_total',
    help: 'DELs allocnet-cni queued while the agent was down, replayed by the agent, by outcome (failed ones stay queued)',
    labelNames: ['outcome'] as const,
    registers,
  });
  const cniPending = new Gauge({
    name: 'allocnet_cni_queue_pending',
    help: 'DELs left in allocnet-cni’s queue after the last replay (each failed and is tried again at the next)',
    registers,
  });
  new Gauge({
    name: 'allocnet_agent_info',
    help: 'Always 1; the agent version as a label',
    labelNames: ['version'] as const,
    registers,
  }).set({ version: options.version }, 1);
  if (options.processMetrics ?? true)
    collectDefaultMetrics({ register: registry, prefix: 'allocnet_' });

  return {
    registry,
    setup(seconds, outcome, n) {
      setupDuration.observe({ outcome }, seconds);
      if (n > 0) retries.inc(n);
    },
    cniCall(command, code, seconds) {
      cniCalls.observe({ command, code: String(code) }, seconds);
    },
    cniQueuePending(n) {
      cniPending.set(n);
    },
    cniQueueReplay(outcome) {
      cniReplays.inc({ outcome });
    },
    teardown(seconds, outcome) {
      teardownDuration.observe({ outcome }, seconds);
    },
    failure(op, code) {
      failures.inc({ op, code });
    },
    pluginExec(plugin, verb, seconds) {
      pluginExec.observe({ plugin, verb }, seconds);
    },
  };
}

/**
 * A `PluginExec` that times every plugin process (from its stdin to its exit, as the runtime's
 * own debug line does) into `observe`, by plugin type (the binary's name) and CNI command.
 * Wrapping the exec seam rather than reading the runtime's log lines keeps the metric independent
 * of log wording and level.
 */
export function timedPluginExec(
  exec: PluginExec,
  observe: (plugin: string, verb: string, seconds: number) => void,
  now: () => number = () => performance.now(),
): PluginExec {
  return {
    start(request) {
      const started = exec.start(request);
      const plugin = basename(request.path);
      const verb = request.env.CNI_COMMAND ?? 'UNKNOWN';
      return {
        async run(stdin) {
          const began = now();
          try {
            return await started.run(stdin);
          } finally {
            observe(plugin, verb, (now() - began) / 1000);
          }
        },
        cancel() {
          started.cancel();
        },
      };
    },
  };
}
