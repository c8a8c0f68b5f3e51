// The runner's records and the configurator's reports as the .proto's messages.
import type { AllocPhase, AllocRecord, StrayNamespace } from '@allocnet/alloc-runner';
import type { HostState, Leak, NetworkCatalog } from '@allocnet/cni-configurator';
import type {
  AllocNetworkStatus,
  HostState as HostStateMessage,
  InvalidConfigFile,
  Leak as LeakMessage,
  NetworkInfo,
  Phase,
  StrayNamespace as StrayNamespaceMessage,
} from '@allocnet/proto';

const PHASES: Readonly<Record<AllocPhase, Phase>> = {
  'setting-up': 'PHASE_SETTING_UP',
  ready: 'PHASE_READY',
  'tearing-down': 'PHASE_TEARING_DOWN',
  failed: 'PHASE_FAILED',
};

/**
 * An allocation's record as `AllocNetworkStatus`. A record that is not ready has no status from
 * the plugins: its network is the one its spec asked for (`defaultNetwork` when none). `origin`
 * is set only for an attachment a runtime asked for through the CNI server; for one set up over
 * gRPC it stays unset (nothing on the wire: the receiver reads `null`).
 */
export function statusMessage(
  record: AllocRecord,
  defaultNetwork: string,
  restoring = false,
): AllocNetworkStatus {
  const status = record.status;
  const origin = record.spec.origin;
  const attempts = status?.attempts ?? 0;
  return {
    allocId: record.allocId,
    network: status?.network ?? (record.spec.network || defaultNetwork),
    phase: restoring ? 'PHASE_RESTORING' : PHASES[record.phase],
    interfaceName: status?.interfaceName ?? '',
    address: status?.address ?? '',
    addressIpv6: status?.addressIpv6 ?? '',
    dns: {
      servers: [...(status?.dns?.servers ?? [])],
      searches: [...(status?.dns?.searches ?? [])],
      options: [...(status?.dns?.options ?? [])],
    },
    netnsPath: record.netnsPath,
    portMappings: (status?.portMappings ?? []).map((m) => ({
      hostPort: m.hostPort,
      containerPort: m.containerPort,
      protocol: m.protocol,
      hostIp: m.hostIP ?? '',
    })),
    attempts,
    retryCount: Math.max(0, attempts - 1),
    updatedAtUnixMs: record.updatedAtMs,
    error: record.error ?? '',
    netnsCreatedByAgent: record.netnsCreated,
    ...(origin === undefined
      ? {}
      : {
          origin: {
            runtime: origin.runtime,
            containerId: origin.containerId,
            ifname: origin.ifName,
          },
        }),
  };
}

export function hostStateMessage(state: HostState): HostStateMessage {
  return {
    rules: state.rules.map((r) => ({
      family: r.family,
      table: r.table,
      chain: r.chain,
      line: r.line,
    })),
    chains: state.chains.map((c) => ({ family: c.family, table: c.table, chain: c.chain })),
    reservations: state.reservations.map((r) => ({
      network: r.network,
      address: r.address,
      path: r.path,
      allocId: r.allocId,
    })),
    cacheFiles: [...state.cacheFiles],
  };
}

export function leakMessage(leak: Leak): LeakMessage {
  return {
    allocId: leak.allocId,
    networks: [...leak.networks],
    state: hostStateMessage(leak.state),
  };
}

export function strayNamespaceMessage(ns: StrayNamespace): StrayNamespaceMessage {
  return { name: ns.name, path: ns.path, allocId: ns.allocId, reason: ns.reason };
}

export function catalogMessages(catalog: NetworkCatalog): {
  networks: NetworkInfo[];
  invalidFiles: InvalidConfigFile[];
} {
  return {
    networks: catalog.networks.map((n) => ({
      name: n.name,
      source: n.source,
      plugins: [...n.plugins],
    })),
    invalidFiles: catalog.invalid.map((i) => ({ file: i.file, reason: i.reason })),
  };
}

/** Counts of each kind of state, for log lines. */
export function stateCounts(state: HostState): Record<string, number> {
  return {
    rules: state.rules.length,
    chains: state.chains.length,
    reservations: state.reservations.length,
    cacheFiles: state.cacheFiles.length,
  };
}
