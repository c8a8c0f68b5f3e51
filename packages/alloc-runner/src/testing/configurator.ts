import { isIP } from 'node:net';
import type {
  AllocAttachment,
  AllocNetworkSpec,
  AllocNetworkStatus,
  CheckBatch,
  CleanupReport,
  CniConfigurator,
  HoldReport,
  HostState,
  Leak,
  LeakReport,
  NetworkCatalog,
  ReapReport,
  SetupOutcome,
  TeardownReport,
} from '@allocnet/cni-configurator';
import { ConfiguratorError, portMappings, requestedPortMappings } from '@allocnet/cni-configurator';

/** The configurator's methods, and the fake's steps of one reapLeaks (`reapBatch`, `reapOrphans`). */
export type ConfiguratorMethod =
  | 'setup'
  | 'check'
  | 'teardown'
  | 'forceCleanup'
  | 'findLeaks'
  | 'reapLeaks'
  | 'holdAddresses'
  | 'reapBatch'
  | 'reapOrphans'
  | 'reload'
  | 'close';

/** One call the recording configurator saw. */
export interface ConfiguratorCall {
  readonly method: ConfiguratorMethod;
  readonly allocId?: string;
  /** setup: the spec as given. */
  readonly spec?: AllocNetworkSpec;
  /** setup: the namespace path; check/teardown: the attachment's. */
  readonly netns?: string;
  /** check/teardown: the attachment given (teardown: undefined for a sweep only). */
  readonly attachment?: AllocAttachment | undefined;
  /** check: the batch it shared reads with, when given one (a restore's). */
  readonly batch?: CheckBatch;
  /** findLeaks/reapLeaks: the known ids, sorted. */
  readonly known?: readonly string[];
  /** reapBatch: the batch's ids, as the fence let the reap take them. */
  readonly allocIds?: readonly string[];
  /** reapBatch, reapOrphans: the ids the fence spared by then, sorted. */
  readonly spared?: readonly string[];
  /** forceCleanup: whether it was a dry run, and the network when one was given. */
  readonly dryRun?: boolean;
  readonly network?: string;
  /** setup: true when the namespace was the runner's own (`SetupOptions.ownNamespace`). */
  readonly ownNamespace?: boolean;
  /** setup: the addresses it was to re-claim; teardown: whether it kept the holds. */
  readonly reclaim?: readonly string[];
  readonly keepHolds?: boolean;
  /** teardown: the one attachment it was about (`TeardownOptions.only`). */
  readonly only?: { readonly network: string; readonly ifName: string };
  /** holdAddresses: the allocation ids of the attachments given. */
  readonly held?: readonly string[];
}

/**
 * A hand-written fake of `CniConfigurator` that records every call and keeps a model of the host:
 * which allocations have which networks, on which interface (set up and not torn down, or planted
 * with `leak`). It acts like the real one where the runner depends on it: `setup` gives each
 * attachment the next address of 172.26.64.0/20 (or the first address to re-claim, the first of
 * its `ips`, or the `IP` CNI arg, as host-local does) and refuses one whose allocation already has
 * that network or that interface (a second ADD); `check` fails for an attachment that is not
 * there; `teardown` removes every network of the allocation whether or not an attachment is given
 * (the audit's sweep over every network), or with `only` that one attachment; `checkSpec` knows
 * the networks of its catalog (`addNetwork`; `mac` only where a `tuning` plugin is);
 * `findLeaks` / `reapLeaks` report / remove the allocations outside `known`. `reapLeaks` follows
 * the fence it is given as the real one does: it "scans" (the `reapLeaks` call's hold), plans the
 * allocations outside `known` and the fence's `spared`, takes them, removes them batch by batch
 * (each a `reapBatch` call, held by `before` like any other; `done` after it), then the orphans
 * (a `reapOrphans` call) only if `takeOrphans` gives it their turn. `portMappingsOf` and the
 * attachment's `portMappings` are the real configurator's (host IPs kept).
 */
export interface RecordingConfigurator extends CniConfigurator {
  readonly calls: readonly ConfiguratorCall[];
  /** The calls of one method, in order. */
  callsOf(method: ConfiguratorMethod): readonly ConfiguratorCall[];
  /** Allocations with a network on the modelled host, and the attachment of their first one. */
  readonly attached: ReadonlyMap<string, AllocAttachment>;
  /** Every attachment of the allocation on the modelled host, in the order they were set up. */
  attachmentsOf(allocId: string): readonly AllocAttachment[];
  /** The specs `checkSpec` was given, in order (a pure call: not in `calls`). */
  readonly specChecks: readonly AllocNetworkSpec[];
  /** Adds a network to the catalog (default plugins: bridge). */
  addNetwork(name: string, plugins?: readonly string[]): this;
  /** The next `times` calls of `method` throw `error` (after recording the call, before acting). */
  fail(method: ConfiguratorMethod, error: unknown, times?: number): this;
  /**
   * Awaited at the start of every call, after it is recorded: where tests hold a call. `signal`
   * is the one the call was given (setup, check, teardown), for a hold that honours it.
   */
  before: ((call: ConfiguratorCall, signal?: AbortSignal) => Promise<void> | void) | undefined;
  /** Plants a network for `allocId` that no runner made (a leak). */
  leak(allocId: string, address?: string): this;
  /** What `check` answers for `ran` (false: the network's config disables CHECK). Default true. */
  checkRan: boolean;
  /** The state that belongs to no allocation, reported by findLeaks and removed by reapLeaks. */
  orphans: HostState;
  /** Forgets the recorded calls. */
  clearCalls(): void;
}

export const emptyHostState: HostState = {
  rules: [],
  chains: [],
  reservations: [],
  cacheFiles: [],
};

function isEmptyState(state: HostState): boolean {
  return (
    state.rules.length +
      state.chains.length +
      state.reservations.length +
      state.cacheFiles.length ===
    0
  );
}

/** What the fake says the attachments leave tagged with their allocation, together. */
function stateOfAll(attachments: readonly AllocAttachment[]): HostState {
  const states = attachments.map(stateOf);
  return {
    rules: states.flatMap((s) => s.rules),
    chains: states.flatMap((s) => s.chains),
    reservations: states.flatMap((s) => s.reservations),
    cacheFiles: states.flatMap((s) => s.cacheFiles),
  };
}

/** The configurator's error for a spec it cannot take, naming the field. */
function badSpec(path: (string | number)[], problem: string, network?: string): ConfiguratorError {
  return new ConfiguratorError(`${path.join('.')} ${problem}`, {
    code: network === undefined ? 'invalid-argument' : 'network-not-found',
    path,
    problem: [problem],
    ...(network === undefined ? {} : { network }),
  });
}

/** What the fake says a network leaves tagged with an allocation. */
function stateOf(attachment: AllocAttachment): HostState {
  const address = attachment.addresses[0] ?? '';
  const comment = `name: "${attachment.network.name}" id: "${attachment.allocId}"`;
  return {
    rules: [
      {
        family: 'ipv4',
        table: 'nat',
        chain: 'POSTROUTING',
        line: `-A POSTROUTING -s ${address}/32 -m comment --comment "${comment.replaceAll('"', '\\"')}" -j CNI-fake`,
      },
    ],
    chains: [],
    reservations: [
      {
        network: attachment.network.name,
        address,
        path: `/var/run/cni/networks/${attachment.network.name}/${address}`,
        allocId: attachment.allocId,
        hold: false,
      },
    ],
    cacheFiles: [],
  };
}

export function createRecordingConfigurator(): RecordingConfigurator {
  const calls: ConfiguratorCall[] = [];
  // The first attachment of each allocation (`attached`), and all of them (`networks`).
  const attached = new Map<string, AllocAttachment>();
  const networks = new Map<string, AllocAttachment[]>();
  const specChecks: AllocNetworkSpec[] = [];
  const listOf = (allocId: string): AllocAttachment[] => networks.get(allocId) ?? [];
  /** Sets the allocation's attachments, keeping `attached` its first. */
  function setAll(allocId: string, list: AllocAttachment[]): void {
    const first = list[0];
    if (first === undefined) {
      networks.delete(allocId);
      attached.delete(allocId);
    } else {
      networks.set(allocId, list);
      attached.set(allocId, first);
    }
  }
  const isOf = (a: AllocAttachment, network: string, ifName: string) =>
    a.network.name === network && a.ifName === ifName;
  const failures: { method: ConfiguratorMethod; error: unknown }[] = [];
  let next = 2;

  async function enter(call: ConfiguratorCall, signal?: AbortSignal): Promise<void> {
    calls.push(call);
    await fake.before?.(call, signal);
    const i = failures.findIndex((f) => f.method === call.method);
    if (i >= 0) {
      const [failure] = failures.splice(i, 1);
      throw failure?.error;
    }
  }

  function attachmentFor(spec: AllocNetworkSpec, netns: string, address: string): AllocAttachment {
    const network = spec.network === undefined || spec.network === '' ? 'nomad' : spec.network;
    return {
      allocId: spec.allocId,
      network: { name: network, config: JSON.stringify({ cniVersion: '1.0.0', name: network }) },
      netns,
      ifName: spec.ifName ?? 'eth0',
      args: [
        ...Object.entries(spec.cniArgs ?? {}),
        ['NOMAD_NAMESPACE', spec.namespace],
        ['NOMAD_JOB', spec.jobId],
        ['NOMAD_GROUP', spec.groupName],
        ['NOMAD_ALLOC_ID', spec.allocId],
      ],
      portMappings: portMappings(spec, false),
      addresses: [address],
    };
  }

  function leaksOutside(known: Iterable<string>): Leak[] {
    const keep = new Set(known);
    return [...networks.entries()]
      .filter(([allocId]) => !keep.has(allocId))
      .map(([allocId, list]) => ({
        allocId,
        networks: list.map((a) => a.network.name),
        state: stateOfAll(list),
      }));
  }

  const catalog: { networks: NetworkCatalog['networks'][number][]; invalid: [] } = {
    networks: [
      { name: 'nomad', source: 'default', plugins: ['loopback', 'bridge', 'firewall', 'portmap'] },
    ],
    invalid: [],
  };

  function checkSpec(spec: AllocNetworkSpec): void {
    specChecks.push(spec);
    const name = spec.network === undefined || spec.network === '' ? 'nomad' : spec.network;
    const network = catalog.networks.find((n) => n.name === name);
    if (network === undefined) throw badSpec(['network'], `"${name}" is not known`, name);
    for (const [i, ip] of (spec.ips ?? []).entries())
      if (isIP(ip.split('/')[0] ?? '') === 0)
        throw badSpec(['ips', i], `${JSON.stringify(ip)} is not an IP address`);
    if (spec.mac !== undefined && !network.plugins.includes('tuning'))
      throw badSpec(['mac'], `cannot be asked for in network "${name}" (no plugin takes "mac")`);
  }

  const fake: RecordingConfigurator = {
    calls,
    callsOf: (method) => calls.filter((c) => c.method === method),
    attached,
    attachmentsOf: (allocId) => [...listOf(allocId)],
    specChecks,
    before: undefined,
    checkRan: true,
    orphans: emptyHostState,

    fail(method, error, times = 1) {
      for (let i = 0; i < times; i++) failures.push({ method, error });
      return fake;
    },

    leak(allocId, address = `172.26.79.${next++}`) {
      setAll(allocId, [
        attachmentFor(
          { allocId, namespace: 'default', jobId: 'leaked', groupName: 'leaked' },
          `/run/netns/gone-${allocId}`,
          address,
        ),
      ]);
      return fake;
    },

    addNetwork(name, plugins = ['bridge']) {
      catalog.networks.push({ name, source: `${name}.conflist`, plugins: [...plugins] });
      return fake;
    },

    checkSpec,

    clearCalls() {
      calls.length = 0;
    },

    catalog: () => catalog,

    // Pure, as the real one (host IPs kept): not a recorded call.
    portMappingsOf: (spec) => requestedPortMappings(spec, false),

    async reload() {
      await enter({ method: 'reload' });
      return catalog;
    },

    async setup(spec, netns, options): Promise<SetupOutcome> {
      await enter(
        {
          method: 'setup',
          allocId: spec.allocId,
          spec,
          netns,
          ...(options?.reclaim === undefined ? {} : { reclaim: options.reclaim }),
          ...(options?.ownNamespace === true ? { ownNamespace: true } : {}),
        },
        options?.signal,
      );
      const wanted = attachmentFor(spec, netns, '');
      if (
        listOf(spec.allocId).some(
          (a) => a.network.name === wanted.network.name || a.ifName === wanted.ifName,
        )
      ) {
        throw new Error(`fake ADD: allocation "${spec.allocId}" already has a network`);
      }
      const address =
        options?.reclaim?.[0] ??
        spec.ips?.[0]?.split('/')[0] ??
        spec.cniArgs?.IP ??
        `172.26.64.${next++}`;
      const attachment = attachmentFor(spec, netns, address);
      setAll(spec.allocId, [...listOf(spec.allocId), attachment]);
      const status: AllocNetworkStatus = {
        allocId: spec.allocId,
        network: attachment.network.name,
        interfaceName: attachment.ifName,
        address,
        addressIpv6: '',
        dns: undefined,
        portMappings: attachment.portMappings,
        attempts: 1,
      };
      return { status, attachment };
    },

    checkBatch() {
      return { kind: 'check-batch' };
    },

    async check(attachment, options) {
      await enter(
        {
          method: 'check',
          allocId: attachment.allocId,
          netns: attachment.netns,
          attachment,
          ...(options?.batch === undefined ? {} : { batch: options.batch }),
        },
        options?.signal,
      );
      const list = listOf(attachment.allocId);
      if (list.length === 0) {
        throw new Error(`fake CHECK: allocation "${attachment.allocId}" has no network`);
      }
      if (!list.some((a) => isOf(a, attachment.network.name, attachment.ifName))) {
        // As the real one finds it: the network is not as set up (`broken`).
        throw new ConfiguratorError(
          `fake CHECK: allocation "${attachment.allocId}" has no network "${attachment.network.name}" on "${attachment.ifName}"`,
          { code: 'check-failed' },
        );
      }
      return { ran: fake.checkRan };
    },

    async teardown(allocId, attachment, options): Promise<TeardownReport> {
      await enter(
        {
          method: 'teardown',
          allocId,
          attachment,
          ...(options?.keepHolds === true ? { keepHolds: true } : {}),
          ...(options?.only === undefined ? {} : { only: options.only }),
          ...(attachment === undefined ? {} : { netns: attachment.netns }),
        },
        options?.signal,
      );
      const only = options?.only;
      const all = listOf(allocId);
      const had = only === undefined ? all : all.filter((a) => isOf(a, only.network, only.ifName));
      setAll(
        allocId,
        all.filter((a) => !had.includes(a)),
      );
      return {
        allocId,
        delError: undefined,
        delRan: attachment !== undefined,
        // With the ADD's attachment the DEL removes it all; without it, the sweep does.
        removed: had.length > 0 && attachment === undefined ? stateOfAll(had) : emptyHostState,
      };
    },

    async forceCleanup(allocId, options = {}): Promise<CleanupReport> {
      await enter(
        {
          method: 'forceCleanup',
          allocId,
          dryRun: options.dryRun === true,
          ...(options.network === undefined ? {} : { network: options.network }),
        },
        options.signal,
      );
      const all = listOf(allocId);
      const had =
        options.network === undefined ? all : all.filter((a) => a.network.name === options.network);
      if (options.dryRun !== true)
        setAll(
          allocId,
          all.filter((a) => !had.includes(a)),
        );
      return {
        allocId,
        dryRun: options.dryRun === true,
        removed: had.length === 0 ? emptyHostState : stateOfAll(had),
      };
    },

    async findLeaks(known): Promise<LeakReport> {
      const ids = [...known].sort();
      await enter({ method: 'findLeaks', known: ids });
      return { leaks: leaksOutside(ids), orphans: fake.orphans };
    },

    async reapLeaks(known, options = {}): Promise<ReapReport> {
      const ids = [...known].sort();
      await enter({ method: 'reapLeaks', known: ids });
      const fence = options.fence;
      const spared = () => [...(fence?.spared ?? [])].sort();
      const planned = leaksOutside([...ids, ...spared()]);
      const taken = new Set(
        fence?.take(planned.map((l) => l.allocId)) ?? planned.map((l) => l.allocId),
      );
      const leaks = planned.filter((l) => taken.has(l.allocId));
      const size = options.batchSize ?? 500;
      const reaped: Leak[] = [];
      for (let i = 0; i < leaks.length; i += size) {
        const batch = leaks.slice(i, i + size);
        const allocIds = batch.map((l) => l.allocId);
        try {
          await enter({ method: 'reapBatch', allocIds, spared: spared() });
          for (const leak of batch) setAll(leak.allocId, []);
          reaped.push(...batch);
        } finally {
          fence?.done(allocIds);
        }
        // Per allocation, as the configurator did before it reaped in batches.
        batch.forEach((leak, j) => {
          options.onProgress?.({ done: i + j + 1, total: leaks.length, allocId: leak.allocId });
        });
      }
      let orphans = emptyHostState;
      const release = isEmptyState(fake.orphans)
        ? undefined
        : fence === undefined
          ? () => undefined
          : fence.takeOrphans();
      if (release !== undefined)
        try {
          await enter({ method: 'reapOrphans', spared: spared() });
          orphans = fake.orphans;
          fake.orphans = emptyHostState;
        } finally {
          release();
        }
      return { reaped, orphans, failed: [] };
    },

    async holdAddresses(attachments): Promise<HoldReport> {
      await enter({ method: 'holdAddresses', held: attachments.map((a) => a.allocId) });
      return {
        held: attachments.reduce((n, a) => n + a.addresses.length, 0),
        kept: 0,
        lost: [],
      };
    },

    async close() {
      await enter({ method: 'close' });
    },

    // The runner never warms the reap (the agent does, compose.ts): nothing to make up here.
    warmReap: () => Promise.resolve({ leaks: [], orphans: emptyHostState }),
  };
  return fake;
}
