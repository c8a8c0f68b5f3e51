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

type Registers = Registry[];

/**
 * A counter that mirrors a running total kept elsewhere (the runner's `stats()`): a scrape adds
 * what was counted since the last one; before the runner exists it stays where it is.
 */
function mirroredCounter(
  registers: Registers,
  name: string,
  help: string,
  read: () => number | undefined,
): void {
  let counted = 0;
  new Counter({
    name,
    help,
    registers,
    collect() {
      const total = read() ?? counted;
      if (total > counted) this.inc(total - counted);
      counted = total;
    },
  });
}

/** A gauge set at each scrape from `read`. */
function readGauge(registers: Registers, name: string, help: string, read: () => number): void {
  new Gauge({
    name,
    help,
    registers,
    collect() {
      this.set(read());
    },
  });
}

/** The scheduler's calls: setup and teardown durations, ADD retries, failed RPCs. */
function callMetrics(registers: Registers): Pick<AgentMetrics, 'setup' | 'teardown' | 'failure'> {
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
  return {
    setup(seconds, outcome, n) {
      setupDuration.observe({ outcome }, seconds);
      if (n > 0) retries.inc(n);
    },
    teardown(seconds, outcome) {
      teardownDuration.observe({ outcome }, seconds);
    },
    failure(op, code) {
      failures.inc({ op, code });
    },
  };
}

/**
 * The runner's counts, read at each scrape. Leaks are counted in one place, the runner (its
 * reconciler and the operators' ListLeaks and ReapLeaks).
 */
function runnerMetrics(registers: Registers, stats: () => RunnerStats | undefined): void {
  mirroredCounter(
    registers,
    'allocnet_leaks_found_total',
    'Leaked allocations (host state tagged with an allocation the agent does not know) found by the reconciler, ListLeaks and ReapLeaks',
    () => stats()?.leaksFound,
  );
  mirroredCounter(
    registers,
    'allocnet_leaks_reaped_total',
    'Leaked allocations whose state was removed by the reconciler or ReapLeaks',
    () => stats()?.leaksReaped,
  );
  mirroredCounter(
    registers,
    'allocnet_stray_namespaces_found_total',
    "Namespaces named like the agent's allocations' that no allocation has, found by the reconciler, ListLeaks and ReapLeaks",
    () => stats()?.orphanNamespacesFound,
  );
  mirroredCounter(
    registers,
    'allocnet_stray_namespaces_reaped_total',
    'Stray namespaces removed by the reconciler (reap mode) or ReapLeaks',
    () => stats()?.orphanNamespacesReaped,
  );
  readGauge(
    registers,
    'allocnet_leaked_allocations',
    'Leaked allocations the last reconcile pass left on the node (report mode: all it found; reap mode: those it could not remove)',
    () => stats()?.leakedLeft ?? 0,
  );
  mirroredCounter(
    registers,
    'allocnet_restore_addresses_reclaimed_total',
    'Allocations restore set up again with exactly their recorded addresses (held at start, re-claimed from host-local)',
    () => stats()?.reclaimed,
  );
  mirroredCounter(
    registers,
    'allocnet_restore_addresses_lost_total',
    'Recorded addresses restore could not give back (outside the network’s ranges now, reserved by another allocation, or refused by the IPAM plugin): the allocation is FAILED, naming the address',
    () => stats()?.addressesLost,
  );
  readGauge(
    registers,
    'allocnet_stray_namespaces',
    'Stray namespaces the last reconcile pass left on the node (report mode: all it found; reap mode: those it could not remove)',
    () => stats()?.strayNamespacesLeft ?? 0,
  );
  readGauge(
    registers,
    'allocnet_live_allocations',
    'Allocation networks set up and ready now',
    () => stats()?.live ?? 0,
  );
  new Gauge({
    name: 'allocnet_allocations',
    help: 'Allocation records by phase now (failed: restore could not keep them; a teardown clears them)',
    labelNames: ['phase'] as const,
    registers,
    collect() {
      const now = stats();
      for (const phase of ['setting-up', 'ready', 'tearing-down', 'failed'] as const)
        this.set({ phase }, now?.allocations[phase] ?? 0);
    },
  });
  new Gauge({
    name: 'allocnet_attachments',
    help: 'Ready networks of ready allocations now (the primary and each secondary), by network',
    labelNames: ['network'] as const,
    registers,
    collect() {
      // A network with none left drops out rather than showing 0 for ever.
      this.reset();
      for (const [network, n] of Object.entries(stats()?.attachmentsByNetwork ?? {}))
        this.set({ network }, n);
    },
  });
  readGauge(
    registers,
    'allocnet_restoring_allocations',
    'Allocations the restore after the start has not settled yet (the agent serves meanwhile; an operation on one of them waits for it)',
    () => stats()?.restoring ?? 0,
  );
  readGauge(
    registers,
    'allocnet_store_writable',
    'Whether the state store can be written now: 0 once a write found the data dir full, 1 again once a write (or the retry probe) succeeds',
    () => (stats()?.store.writable === false ? 0 : 1),
  );
  mirroredCounter(
    registers,
    'allocnet_store_write_failures_total',
    'State store writes that failed because the data dir was full or over quota (the call failed with RESOURCE_EXHAUSTED, nothing changed)',
    () => stats()?.store.writeFailures,
  );
}

/** Plugin processes, timed by `timedPluginExec`. */
function pluginMetrics(registers: Registers): Pick<AgentMetrics, 'pluginExec'> {
  const pluginExec = new Histogram({
    name: 'allocnet_plugin_exec_duration_seconds',
    help: 'CNI plugin processes, from their stdin to their exit, by plugin type and CNI command',
    labelNames: ['plugin', 'verb'] as const,
    buckets: PLUGIN_BUCKETS,
    registers,
  });
  return {
    pluginExec(plugin, verb, seconds) {
      pluginExec.observe({ plugin, verb }, seconds);
    },
  };
}

/** Records by who asked for them: gRPC, or a CNI runtime through the CNI door. */
function originMetrics(
  registers: Registers,
  origins: (() => Readonly<Record<string, number>>) | undefined,
): void {
  new Gauge({
    name: 'allocnet_allocations_by_origin',
    help: 'Allocation records now by who asked for them: grpc, or the CNI runtime (nomad, kubernetes, podman, cni)',
    labelNames: ['origin'] as const,
    registers,
    collect() {
      this.reset();
      for (const [origin, n] of Object.entries(origins?.() ?? {})) this.set({ origin }, n);
    },
  });
}

/** The CNI door: its calls, and the replay of allocnet-cni's DEL queue. */
function cniMetrics(
  registers: Registers,
): Pick<AgentMetrics, 'cniCall' | 'cniQueueReplay' | 'cniQueuePending'> {
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
  return {
    cniCall(command, code, seconds) {
      cniCalls.observe({ command, code: String(code) }, seconds);
    },
    cniQueueReplay(outcome) {
      cniReplays.inc({ outcome });
    },
    cniQueuePending(n) {
      cniPending.set(n);
    },
  };
}

/**
 * The agent's metrics in a registry of its own, by family: the calls, the runner's counts, the
 * plugin processes, the origins, the CNI door, the version, and Node's process metrics.
 */
export function createAgentMetrics(options: AgentMetricsOptions): AgentMetrics {
  const registry = new Registry();
  const registers = [registry];
  const calls = callMetrics(registers);
  runnerMetrics(registers, options.stats);
  const plugins = pluginMetrics(registers);
  originMetrics(registers, options.origins);
  const cni = cniMetrics(registers);
  new Gauge({
    name: 'allocnet_agent_info',
    help: 'Always 1; the agent version as a label',
    labelNames: ['version'] as const,
    registers,
  }).set({ version: options.version }, 1);
  if (options.processMetrics ?? true)
    collectDefaultMetrics({ register: registry, prefix: 'allocnet_' });
  return { registry, ...calls, ...plugins, ...cni };
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
