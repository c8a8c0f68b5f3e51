// The runner's records and the configurator's reports as the .proto's messages.
import { attachmentsOf } from '@allocnet/alloc-runner';
import type {
  AllocPhase,
  AllocRecord,
  AttachmentView,
  StrayNamespace,
} from '@allocnet/alloc-runner';
import type {
  AllocNetworkStatus as RunnerNetworkStatus,
  HostState,
  Leak,
  NetworkCatalog,
} from '@allocnet/cni-configurator';
import type {
  AllocNetworkStatus,
  AttachmentStatus,
  DnsConfig as DnsConfigMessage,
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

function dnsMessage(status: RunnerNetworkStatus | undefined): DnsConfigMessage {
  return {
    servers: [...(status?.dns?.servers ?? [])],
    searches: [...(status?.dns?.searches ?? [])],
    options: [...(status?.dns?.options ?? [])],
  };
}

function portMappingMessages(
  status: RunnerNetworkStatus | undefined,
): NonNullable<AllocNetworkStatus['portMappings']> {
  return (status?.portMappings ?? []).map((m) => ({
    hostPort: m.hostPort,
    containerPort: m.containerPort,
    protocol: m.protocol,
    hostIp: m.hostIP ?? '',
  }));
}

/**
 * An attachment's interface as its recorded CNI result tells it: the interface named `ifName`
 * inside the attachment's namespace (`sandbox`), its addresses with their prefix length, MAC and
 * gateways; without a result (records written before results were kept), the status' addresses.
 */
function interfaceOf(view: AttachmentView): {
  addresses: string[];
  mac: string;
  gateways: string[];
} {
  const result = view.attachment?.result;
  const index =
    result?.interfaces.findIndex(
      (i) => i.name === view.ifName && i.sandbox === view.attachment?.netns,
    ) ?? -1;
  if (result === undefined || index < 0) {
    const bare = [view.status?.address ?? '', view.status?.addressIpv6 ?? ''];
    return { addresses: bare.filter((a) => a !== ''), mac: '', gateways: [] };
  }
  const ips = result.ips.filter((ip) => ip.interface === index);
  const gateways = ips.flatMap((ip) => (ip.gateway === undefined ? [] : [ip.gateway]));
  return {
    addresses: ips.map((ip) => ip.address),
    mac: result.interfaces[index]?.mac ?? '',
    gateways: [...new Set(gateways)],
  };
}

/** One attachment of a record as `AttachmentStatus`. */
function attachmentMessage(
  view: AttachmentView,
  defaultNetwork: string,
  restoring: boolean,
): AttachmentStatus {
  return {
    network: view.network || defaultNetwork,
    interfaceName: view.ifName,
    phase: restoring ? 'PHASE_RESTORING' : PHASES[view.phase],
    ...interfaceOf(view),
    dns: dnsMessage(view.status),
    portMappings: portMappingMessages(view.status),
    attached: view.attached,
  };
}

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
  const views = attachmentsOf(record);
  return {
    allocId: record.allocId,
    network: status?.network ?? (views[0]?.network || defaultNetwork),
    phase: restoring ? 'PHASE_RESTORING' : PHASES[record.phase],
    interfaceName: status?.interfaceName ?? '',
    address: status?.address ?? '',
    addressIpv6: status?.addressIpv6 ?? '',
    dns: dnsMessage(status),
    netnsPath: record.netnsPath,
    portMappings: portMappingMessages(status),
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
    attachments: views.map((view) => attachmentMessage(view, defaultNetwork, restoring)),
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
