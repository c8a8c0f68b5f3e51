import type { FieldPath } from '@allocnet/base';
import type { CniArgs, CniResult, CniRuntime, Logger } from '@allocnet/cni';
import type { Family } from '@allocnet/iptables-node';
import type { IpNetnsManager } from '@allocnet/netns';
import type { IptablesState } from './iptables-state.js';
import type { NodeKernel } from './node.js';
import type {
  CleanupReport,
  HostState,
  LeakReport,
  ReapFence,
  ReapProgress,
  ReapReport,
} from './host-state.js';
import type { RouteReader } from './route-reader.js';

export type { IptablesState } from './iptables-state.js';

export type {
  CleanupReport,
  FoundChain,
  FoundReservation,
  FoundRule,
  HostState,
  Leak,
  LeakReport,
  ReapFence,
  ReapProgress,
  ReapReport,
} from './host-state.js';

/** One port of an allocation (Nomad's `AllocatedPortMapping`). */
export interface AllocPort {
  readonly label: string;
  /** The host port, 1–65535. */
  readonly value: number;
  /** The port inside the allocation; below 1 (or absent) means `value`. */
  readonly to?: number;
  /** The host address the port binds to; empty or absent means every address. */
  readonly hostIp?: string;
  /** One protocol only (a CNI runtime's mapping); absent means tcp and udp, Nomad's rule. */
  readonly protocol?: 'tcp' | 'udp';
}

/** A port of a legacy per-network port list (Nomad's `Port`); it never carries a host IP. */
export interface LegacyPort {
  readonly label: string;
  readonly value: number;
  readonly to?: number;
}

/** A legacy network of an allocation: only its ports matter here. */
export interface LegacyNetwork {
  readonly reservedPorts?: readonly LegacyPort[];
  readonly dynamicPorts?: readonly LegacyPort[];
}

/** What the configurator needs to know about an allocation to give it a network. */
export interface AllocNetworkSpec {
  /** The allocation id: the CNI container id, in every tag the plugins write. */
  readonly allocId: string;
  /** Workload identity, passed to the plugins as NOMAD_* CNI args. */
  readonly region?: string;
  readonly namespace: string;
  readonly jobId: string;
  readonly groupName: string;
  /** The network: empty or absent means the embedded default bridge network. */
  readonly network?: string;
  /** The allocation's ports; when there are any, `legacyNetworks` is not used. */
  readonly ports?: readonly AllocPort[];
  readonly legacyNetworks?: readonly LegacyNetwork[];
  /** The user's CNI args for this network; NOMAD_* and IgnoreUnknown are refused. */
  readonly cniArgs?: Readonly<Record<string, string>>;
  /**
   * The interface inside the namespace (CNI_IFNAME); absent means the configurator's (`eth0`).
   * A CNI runtime names it; Nomad's allocations leave it out.
   */
  readonly ifName?: string;
  /**
   * Addresses to ask the network's IPAM for (with or without a prefix length): through the `ips`
   * capability (`runtimeConfig.ips`) of the plugins that declare it, else, in a network that uses
   * host-local, through `args.cni.ips` of the plugin carrying it. A reclaim's recorded addresses
   * (`SetupOptions.reclaim`) win over these. host-local refuses one outside its ranges or taken.
   */
  readonly ips?: readonly string[];
  /** A MAC address for the interface, through the `mac` capability (tuning). */
  readonly mac?: string;
  /**
   * `false`: once the ADD succeeded, the default routes (v4, v6) through this interface inside
   * the namespace are deleted and left out of the recorded result (CHECK validates its routes).
   * `true` or absent: the routes stay as the plugins made them.
   */
  readonly defaultRoute?: boolean;
}

/** One entry of portmap's `portMappings` capability (camelCase, as portmap reads it). */
export interface PortMapping {
  readonly hostPort: number;
  readonly containerPort: number;
  readonly protocol: 'tcp' | 'udp';
  /** Present only when the port names a host address (and host IPs are not ignored). */
  readonly hostIP?: string;
}

/** A port mapping a spec asks for, with the spec's field that asks for it and the port's label. */
export interface RequestedPortMapping extends PortMapping {
  /** `['ports', 0, 'value']`, `['legacyNetworks', 0, 'reservedPorts', 1, 'value']`. */
  readonly field: FieldPath;
  readonly label: string;
}

export interface DnsConfig {
  readonly servers: readonly string[];
  readonly searches: readonly string[];
  readonly options: readonly string[];
}

/** What a setup gave the allocation. */
export interface AllocNetworkStatus {
  readonly allocId: string;
  readonly network: string;
  /** The interface the address was picked from. */
  readonly interfaceName: string;
  /** Its first IPv4 address (no prefix length), or empty. */
  readonly address: string;
  /** Its first IPv6 address (no prefix length), or empty. */
  readonly addressIpv6: string;
  /** From the result's DNS; undefined when the plugins gave none. */
  readonly dns: DnsConfig | undefined;
  readonly portMappings: readonly PortMapping[];
  /** ADD attempts it took (1 when the first one succeeded). */
  readonly attempts: number;
}

/** The network configuration an allocation was set up with, kept for its CHECK and DEL. */
export interface NetworkSnapshot {
  readonly name: string;
  /** The configuration list as JSON text, exactly as the plugins were given it. */
  readonly config: string;
}

/**
 * Everything CHECK and DEL need, recorded at setup: the runner stores it durably so that a
 * teardown after a restart (or a config change) acts with exactly what the ADD used.
 */
export interface AllocAttachment {
  readonly allocId: string;
  readonly network: NetworkSnapshot;
  readonly netns: string;
  readonly ifName: string;
  readonly args: CniArgs;
  readonly portMappings: readonly PortMapping[];
  /** Every address the result gave (no prefix length): what the leak audit looks for. */
  readonly addresses: readonly string[];
  /**
   * The chain's result (absent in records written before it was kept): a CNI runtime's answer.
   * Without the default routes a `defaultRoute: false` setup deleted.
   */
  readonly result?: CniResult;
  /**
   * The `ips` and `mac` capability args the ADD passed (the spec's `ips`, `mac`): CHECK and DEL
   * get them too, as libcni gives every verb the same runtime config. Absent when none went.
   */
  readonly requested?: { readonly ips?: readonly string[]; readonly mac?: string };
}

export interface SetupOutcome {
  readonly status: AllocNetworkStatus;
  readonly attachment: AllocAttachment;
}

export interface TeardownReport {
  readonly allocId: string;
  /** The DEL's outcome: undefined when it succeeded (or there was nothing to DEL). */
  readonly delError: string | undefined;
  /** Whether a DEL ran at all (false without an attachment: only the sweep). */
  readonly delRan: boolean;
  /** What the audit found after the DEL and removed. Empty when the DEL left nothing. */
  readonly removed: HostState;
}

/** The embedded default bridge network (Nomad's). */
export interface DefaultNetworkOptions {
  /** Network name. Default `nomad`. */
  readonly name?: string;
  /** Bridge name. Default `nomad`. */
  readonly bridge?: string;
  /** IPv4 subnet. Default `172.26.64.0/20`. */
  readonly subnet?: string;
  /** IPv6 subnet; none by default. */
  readonly ipv6Subnet?: string;
  /** Default false. */
  readonly hairpinMode?: boolean;
  /** The bridge's MTU; the plugin's default when absent. */
  readonly mtu?: number;
  /** host-local's data directory. Default `/var/run/cni`. */
  readonly ipamDataDir?: string;
  /** The firewall plugin's admin chain. Default `NOMAD-ADMIN`. */
  readonly adminChain?: string;
}

export interface RetryOptions {
  /** ADD attempts. Default 3. */
  readonly attempts?: number;
  /** Wait before the next attempt. Default 1 000 ms. */
  readonly delayMs?: number;
  /** Up to this much more, at random. Default 1 000 ms (0–999 ms). */
  readonly jitterMs?: number;
}

export interface CniConfiguratorOptions {
  readonly runtime: CniRuntime;
  /** iptables of the node (the namespace the plugins run in), per family. */
  readonly iptables: Readonly<Record<Family, IptablesState>>;
  readonly defaultNetwork?: DefaultNetworkOptions;
  /** Named networks; none when absent. */
  readonly confDir?: string;
  /**
   * Runs what a setup does inside the allocation's namespace besides the plugins (deleting the
   * default routes of a `defaultRoute: false` attachment). Default `createIpNetnsManager()`.
   */
  readonly sandbox?: Pick<IpNetnsManager, 'deleteDefaultRoutes'>;
  /**
   * What a setup changes in the node's namespace besides iptables (portmap's route_localnet and
   * stale UDP conntrack entries). Default: the namespace of `iptables.ipv4`.
   */
  readonly node?: NodeKernel;
  /** Watch `confDir` and re-read it before the next operation after a change. Default true. */
  readonly watchConfDir?: boolean;
  /** Drop every port's host IP. Default false. */
  readonly ignoreHostIps?: boolean;
  /**
   * Leave IPv6 on the interface of a network that gives only IPv4, as the plugins make it (a
   * link-local address, router solicitations). Default false: such an interface has no IPv6
   * (ipv6-off.ts).
   */
  readonly ipv6OnIpv4Interfaces?: boolean;
  /** The interface inside the allocation. Default `eth0`. */
  readonly ifName?: string;
  /** NOMAD_REGION when a spec gives none. Default `global`. */
  readonly region?: string;
  readonly retry?: RetryOptions;
  /** A number in [0, 1). Default Math.random. */
  readonly random?: () => number;
  /** Default setTimeout. */
  readonly sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /**
   * What CHECK reads links, addresses and routes through (rtnetlink; a fake in unit tests).
   * Default the real one, reading the node's links in `iptables.ipv4.netns` (this process's
   * namespace when it has none): where the plugins run, and so the bridge and the host veths.
   */
  readonly routeReader?: RouteReader;
  readonly logger?: Logger;
}

export interface OperationOptions {
  readonly signal?: AbortSignal;
}

/** What `checkBatch` gives: pass it to the CHECKs that share its reads. */
export interface CheckBatch {
  readonly kind: 'check-batch';
}

export interface CheckOptions extends OperationOptions {
  /** Share reads with the other CHECKs of this batch (see `checkBatch`). */
  readonly batch?: CheckBatch;
}

export interface SetupOptions extends OperationOptions {
  /**
   * Set the allocation up with exactly these addresses (its recorded ones, v4 and v6: restore's
   * reclaim, holds.ts): in a network that uses host-local, they are asked for in the ADD (the
   * record keeps the config as it is), their holds removed right before it, in the directory's
   * room. An address outside the network's ranges or reserved by another allocation fails the
   * setup with `address-lost` before any plugin runs; host-local refusing one fails the ADD.
   */
  readonly reclaim?: readonly string[];
  /**
   * The namespace is the caller's own, made for this allocation (the runner's, not a task
   * driver's or a runtime's). In a network that gives only IPv4 (`NetworkFacts.ipv4Only`), the
   * interface the ADD makes is left without IPv6 either way (ipv6-off.ts); in the caller's own
   * namespace it is made so (the namespace's default, while the ADD runs), elsewhere it is turned
   * off after the ADD. Default false.
   */
  readonly ownNamespace?: boolean;
}

export interface TeardownOptions extends OperationOptions {
  /**
   * Leave the attachment's addresses held (holds.ts) for a reclaim that follows: its own
   * reservations become holds before the DEL, and the audit leaves holds. Default false: a
   * teardown removes the allocation's holds with the rest.
   */
  readonly keepHolds?: boolean;
  /**
   * The teardown is about this one attachment of the allocation (a secondary network): the DEL
   * from the CNI cache (without an attachment) only for this network and interface, and the
   * sweeps and the audit only in this network, so that nothing of the allocation's other
   * networks is touched. `network` as a spec names it (empty: the default network). Absent: the
   * audit covers every managed network (the primary's teardown, always the last).
   */
  readonly only?: { readonly network: string; readonly ifName: string };
}

/** A recorded address that cannot be held or reclaimed, and why. */
export interface LostAddress {
  readonly allocId: string;
  readonly network: string;
  readonly address: string;
  readonly reason: string;
}

export interface HoldReport {
  /** Hold files written. */
  readonly held: number;
  /** Addresses whose reservation (or hold) of the allocation was still there. */
  readonly kept: number;
  /** Addresses outside the network's ranges now, or reserved by another allocation. */
  readonly lost: readonly LostAddress[];
}

/** A network the configurator can set allocations up in. */
export interface NetworkInfo {
  readonly name: string;
  /** `default` for the embedded network, else the file it came from. */
  readonly source: string;
  readonly plugins: readonly string[];
}

export interface NetworkCatalog {
  readonly networks: readonly NetworkInfo[];
  /** Files of the conf dir that are not networks, with the reason. */
  readonly invalid: readonly { readonly file: string; readonly reason: string }[];
}

/** One allocation's network: what the runner does for each allocation it runs. */
export interface AllocNetworking {
  /**
   * The port mappings a setup of `spec` would give portmap (host IPs dropped when the
   * configurator ignores them), each with the field asking for it: pure and synchronous, for the
   * runner's host-port claims. Throws `invalid-argument` when two of its ports claim one host port.
   */
  portMappingsOf(spec: AllocNetworkSpec): readonly RequestedPortMapping[];
  /**
   * Checks `spec` against the current catalog, synchronously: `invalid-argument` naming the field
   * for a bad value (decodeSpec), an unknown network (`network`), addresses or a MAC the network
   * cannot take (`ips`, `ips[1]`, `mac`). What a setup of it would refuse before any plugin runs.
   */
  checkSpec(spec: AllocNetworkSpec): void;
  /**
   * Gives the allocation its network in `netns`: host prerequisites, ADD with retry (a DEL
   * between attempts), then the status and the attachment to keep for CHECK and DEL.
   */
  setup(spec: AllocNetworkSpec, netns: string, options?: SetupOptions): Promise<SetupOutcome>;
  /**
   * CHECK with exactly what the ADD used: the plugins' CHECK, or what it verifies read here
   * (check.ts). CHECKs given the same `batch` share their reads of iptables and host-local.
   */
  check(attachment: AllocAttachment, options?: CheckOptions): Promise<{ readonly ran: boolean }>;
  /**
   * A batch for CHECKs of many allocations at once (a restore's): they share one read of each
   * iptables table and host-local directory, taken when the first needs it, so each sees the
   * node as it was then. Drop it when they are done (it holds those reads).
   */
  checkBatch(): CheckBatch;
  /**
   * DEL with what the ADD used (when the attachment is known), then, always, the audit: whatever
   * is still tagged with the allocation is removed. Throws only when the audit could not remove it.
   */
  teardown(
    allocId: string,
    attachment: AllocAttachment | undefined,
    options?: TeardownOptions,
  ): Promise<TeardownReport>;
  /**
   * Holds the recorded addresses of `attachments` in their networks' host-local directories
   * where no reservation is (holds.ts): call it before any setup runs after a start, so that no
   * new allocation is handed a recorded address. Quick: one small file per address.
   */
  holdAddresses(
    attachments: readonly AllocAttachment[],
    options?: OperationOptions,
  ): Promise<HoldReport>;
}

/** State on the host that no live allocation accounts for: what reconcilers and operators clean. */
export interface LeakSweeper {
  /** Everything tagged with an allocation id outside `known`, and state that belongs to no one. */
  findLeaks(known: Iterable<string>, options?: OperationOptions): Promise<LeakReport>;
  /** Removes what `findLeaks` finds, in batches, reporting progress. */
  reapLeaks(
    known: Iterable<string>,
    options?: OperationOptions & {
      readonly onProgress?: (progress: ReapProgress) => void;
      readonly batchSize?: number;
      /** Operations running beside the reap (see ReapFence); default none. */
      readonly fence?: ReapFence;
    },
  ): Promise<ReapReport>;
  /** The audit's sweep without a DEL: for operators, idempotent. */
  forceCleanup(
    allocId: string,
    options?: OperationOptions & { readonly network?: string; readonly dryRun?: boolean },
  ): Promise<CleanupReport>;
}

export interface CniConfigurator extends AllocNetworking, LeakSweeper {
  /** The networks as of the last read of the conf dir. */
  catalog(): NetworkCatalog;
  /**
   * Runs a reap's parse, plan, removal and report over `allocations` made-up leaked allocations
   * in the plugins' full shape, in memory and in slices (warm.ts): nothing on the host changes.
   * The removal's transactions are built and never sent; the only reads are the IPv4 ruleset's
   * generation and one chain's handles through netlink, as a removal reads them. For a process
   * to run that code once before an operator's first reap does; resolves the made-up leaks'
   * report (empty when no managed network has an IPv4 subnet).
   */
  warmReap(allocations: number): Promise<LeakReport>;
  /** Re-reads the conf dir now (between operations: each operation reads the catalog once). */
  reload(): Promise<NetworkCatalog>;
  /** Stops watching the conf dir. */
  close(): Promise<void>;
}
