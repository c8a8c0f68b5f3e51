import type { FieldPath } from '@allocnet/base';
import type { CniArgs, CniResult, CniRuntime, Logger } from '@allocnet/cni';
import type { Family, Iptables } from '@allocnet/iptables-node';

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
  /** Addresses asked for through the CNI `ips` capability (or host-local's `args.cni.ips`). */
  readonly ips?: readonly string[];
  /** A MAC address asked for through the CNI `mac` capability (tuning). */
  readonly mac?: string;
  /** `false`: the default routes via this interface are deleted after the ADD (and from the result). */
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
  /** The chain's result (absent in records written before it was kept): a CNI runtime's answer. */
  readonly result?: CniResult;
}

export interface SetupOutcome {
  readonly status: AllocNetworkStatus;
  readonly attachment: AllocAttachment;
}

/** One iptables rule as found, in iptables-save form (`-A CHAIN …`). */
export interface FoundRule {
  readonly family: Family;
  readonly table: string;
  readonly chain: string;
  /** `-A <chain> <spec>` with iptables-save quoting. */
  readonly line: string;
}

export interface FoundChain {
  readonly family: Family;
  readonly table: string;
  readonly chain: string;
}

/** A host-local reservation file. */
export interface FoundReservation {
  readonly network: string;
  readonly address: string;
  readonly path: string;
  readonly allocId: string;
  /** allocnet's own hold (ipam.ts), not host-local's reservation. */
  readonly hold: boolean;
}

/** State tagged with an allocation (or, for `orphans`, with no one). */
export interface HostState {
  readonly rules: readonly FoundRule[];
  readonly chains: readonly FoundChain[];
  readonly reservations: readonly FoundReservation[];
  /** libcni cache files (results and ADD markers). */
  readonly cacheFiles: readonly string[];
}

export interface CleanupReport {
  readonly allocId: string;
  readonly dryRun: boolean;
  /** What was removed, or with `dryRun`, what would be. */
  readonly removed: HostState;
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

/** One allocation id with state on this host, outside the known set. */
export interface Leak {
  readonly allocId: string;
  readonly networks: readonly string[];
  readonly state: HostState;
}

export interface LeakReport {
  readonly leaks: readonly Leak[];
  /**
   * State that belongs to no allocation: firewall accept rules for addresses of a managed network
   * that no reservation holds, CNI chains nothing jumps to.
   */
  readonly orphans: HostState;
}

export interface ReapProgress {
  readonly done: number;
  readonly total: number;
  readonly allocId: string | undefined;
}

export interface ReapReport {
  readonly reaped: readonly Leak[];
  readonly orphans: HostState;
  /** Allocation ids whose state could not be removed, with the reason. */
  readonly failed: readonly { readonly allocId: string; readonly error: string }[];
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

/**
 * What the configurator uses of one family's iptables: eight members of
 * `@allocnet/iptables-node`'s `Iptables`, typed as there, so `createIptables()` is one and a test
 * fake needs only these. Changes are `restore` batches, but for the host prerequisites' fallback.
 */
export interface IptablesState {
  readonly family: Iptables['family'];
  /** The sweep's scan and the host prerequisites (with `lines`, only lines kept are parsed). */
  readonly save: Iptables['save'];
  /**
   * The sweep's removals (each table all or nothing: `perTable`) and the host prerequisites (one
   * batch, all or nothing).
   */
  readonly restore: Iptables['restore'];
  /** CHECK and the teardown audit read single chains (`not-found`: no such chain). */
  readonly listRules: Iptables['listRules'];
  /** The teardown audit's cheap questions. */
  readonly chainExists: Iptables['chainExists'];
  /** Host prerequisites, piece by piece, when their batch lost a race (host.ts). */
  readonly ruleExists: Iptables['ruleExists'];
  readonly newChain: Iptables['newChain'];
  readonly append: Iptables['append'];
  /** A leak reap's scan and removal by rule handle (sweep.ts); without them, iptables-restore. */
  readonly saveAt?: Iptables['saveAt'];
  readonly removeAt?: Iptables['removeAt'];
}

export interface CniConfiguratorOptions {
  readonly runtime: CniRuntime;
  /** iptables of the node (the namespace the plugins run in), per family. */
  readonly iptables: Readonly<Record<Family, IptablesState>>;
  readonly defaultNetwork?: DefaultNetworkOptions;
  /** Named networks; none when absent. */
  readonly confDir?: string;
  /** Watch `confDir` and re-read it before the next operation after a change. Default true. */
  readonly watchConfDir?: boolean;
  /** Drop every port's host IP. Default false. */
  readonly ignoreHostIps?: boolean;
  /** The interface inside the allocation. Default `eth0`. */
  readonly ifName?: string;
  /** NOMAD_REGION when a spec gives none. Default `global`. */
  readonly region?: string;
  readonly retry?: RetryOptions;
  /** A number in [0, 1). Default Math.random. */
  readonly random?: () => number;
  /** Default setTimeout. */
  readonly sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  readonly logger?: Logger;
}

export interface OperationOptions {
  readonly signal?: AbortSignal;
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
   * from the CNI cache (when no attachment is given) only for this network and interface, the
   * sweeps and the audit only in this network. Absent: the audit covers every managed network.
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
   * Checks `spec` against the current catalog, synchronously: throws the configurator's
   * `invalid-argument` naming the field for an unknown network (`network`), `ips` or `mac` the
   * network cannot take, a bad `ips` or `mac` value. Runs nothing.
   */
  checkSpec(spec: AllocNetworkSpec): void;
  /**
   * The port mappings a setup of `spec` would give portmap (host IPs dropped when the
   * configurator ignores them), each with the field asking for it: pure and synchronous, for the
   * runner's host-port claims. Throws `invalid-argument` when two of its ports claim one host port.
   */
  portMappingsOf(spec: AllocNetworkSpec): readonly RequestedPortMapping[];
  /**
   * Gives the allocation its network in `netns`: host prerequisites, ADD with retry (a DEL
   * between attempts), then the status and the attachment to keep for CHECK and DEL.
   */
  setup(spec: AllocNetworkSpec, netns: string, options?: SetupOptions): Promise<SetupOutcome>;
  /** CHECK with exactly what the ADD used. */
  check(
    attachment: AllocAttachment,
    options?: OperationOptions,
  ): Promise<{ readonly ran: boolean }>;
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

/**
 * How a reap keeps clear of the operations that run while it does (the runner's reap guard gives
 * one; without one, nothing is spared and nothing waits). A reap scans, plans, then removes batch
 * by batch, and asks the fence at two points:
 * - when it has planned, it `take`s the leaked ids it means to remove: those already `spared`
 *   stay; from then on an operation on a taken id waits until the reap calls `done` for its batch;
 * - before the orphans (state no id can be read from), `takeOrphans`: undefined when an
 *   operation ran during the reap (the orphans stay for the next pass), else the reap holds every
 *   operation until it calls the release it is given.
 */
export interface ReapFence {
  /**
   * Ids outside `known` with an operation begun during the reap: alive, their state (old or new)
   * never removed by it. Live: it grows while the reap runs; read it when planning.
   */
  readonly spared: ReadonlySet<string>;
  /** Takes planned ids for removal: resolves those not spared, which are the reap's from now. */
  take(allocIds: readonly string[]): readonly string[];
  /** The taken ids' batch is done (removed, or failed): operations on them may go on. */
  done(allocIds: readonly string[]): void;
  /** The orphans' turn: its release, or undefined when they are to stay for the next pass. */
  takeOrphans(): (() => void) | undefined;
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
  /** Re-reads the conf dir now (between operations: each operation reads the catalog once). */
  reload(): Promise<NetworkCatalog>;
  /** Stops watching the conf dir. */
  close(): Promise<void>;
}
