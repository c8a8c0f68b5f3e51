// What the configurator's operations share: the options (checked, defaults filled in), the
// seams (CNI runtime, iptables per family, logger, sleep and randomness), the network catalog,
// the batched chain reader, and the caches of what is parsed from network configs.
// configurator.ts builds one context per configurator and hands it to setup.ts, check.ts,
// teardown.ts and leaks.ts; what they share is visible here, and state one of them keeps for
// itself (setup's gates, CHECK's chains) stays in that module.
//
// Concurrency: operations run in parallel and all use this object. Nothing in it but the rooms
// (room.ts, the rule written there) is a lock or needs one: the catalog swaps whole snapshots (an operation keeps the one it took at its start);
// the caches are filled synchronously by pure functions of a config's bytes (two operations that
// miss at once compute the same value); the chain reader shares reads between concurrent callers
// (chain-reader.ts).
import { setTimeout as wait } from 'node:timers/promises';
import { parseNetworkConfigText, silentLogger } from '@allocnet/cni';
import type { Attachment, CniCache, CniRuntime, Logger, NetworkConfig } from '@allocnet/cni';
import type { Family } from '@allocnet/iptables-node';
import { createIpNetnsManager } from '@allocnet/netns';
import { batchedChainReader } from './chain-reader.js';
import type { ReadChain } from './chain-reader.js';
import { invalidField } from './errors.js';
import { networkFacts } from './facts.js';
import { AddressPicks } from './picks.js';
import { createNodeKernel } from './node.js';
import type { NodeKernel } from './node.js';
import { createRooms } from './room.js';
import type { Room } from './room.js';
import type { NetworkFacts } from './facts.js';
import { createCatalog, defaultNetworkConfig, defaultNetworkSettings } from './networks.js';
import type { Catalog, CatalogSnapshot, DefaultNetworkSettings } from './networks.js';
import type {
  AllocAttachment,
  CniConfiguratorOptions,
  IptablesState,
  OperationOptions,
} from './types.js';

/** Nomad's ADD retry, with its waits injectable. */
export interface RetrySettings {
  readonly attemptsMax: number;
  readonly delayMs: number;
  readonly jitterMs: number;
  readonly random: () => number;
  readonly sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
}

export interface ConfiguratorContext {
  readonly runtime: CniRuntime;
  /** The CNI runtime's cache: what the sweep reads and removes. */
  readonly cache: CniCache;
  readonly iptables: Readonly<Record<Family, IptablesState>>;
  readonly logger: Logger;
  /** The embedded default network's settings. */
  readonly settings: DefaultNetworkSettings;
  readonly ifName: string;
  readonly region: string;
  readonly sandbox: NonNullable<CniConfiguratorOptions['sandbox']>;
  readonly ignoreHostIps: boolean;
  /** Interfaces of IPv4-only networks keep IPv6 (`CniConfiguratorOptions.ipv6OnIpv4Interfaces`). */
  readonly ipv6OnIpv4Interfaces: boolean;
  readonly retry: RetrySettings;
  readonly catalog: Catalog;
  /** What a setup changes in the node's namespace besides iptables (node.ts). */
  readonly node: NodeKernel;
  /** CHECKs and the teardown audit read single chains through it: concurrent callers share reads. */
  readonly readChain: ReadChain;
  /** The room of a host-local directory (room.ts): reclaims and new setups take turns in it. */
  readonly room: (dir: string) => Room;
  /** Addresses picked for host-local whose attempt has not ended (native-pick.ts). */
  readonly picks: AddressPicks;
  /** A network's facts, read once per distinct config. */
  factsOf(network: NetworkConfig): NetworkFacts;
  /** The network an attachment was set up with, parsed once per distinct config. */
  snapshotNetwork(attachment: AllocAttachment): NetworkConfig;
  /** The facts of the default, the named and the `extra` networks, one per name. */
  managedFacts(snapshot: CatalogSnapshot, extra?: readonly NetworkConfig[]): NetworkFacts[];
}

/** Waits `ms`; an abort of `signal` ends the wait with an AbortError. */
function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return wait(ms, undefined, signal === undefined ? {} : { signal });
}

/**
 * Checks the options (the default network's, then the retry's: `invalid-argument` naming the
 * field), then reads the conf dir and starts watching it. Nothing touches iptables or plugins.
 */
export async function createContext(options: CniConfiguratorOptions): Promise<ConfiguratorContext> {
  const { runtime, iptables } = options;
  const logger = options.logger ?? silentLogger;
  const settings = defaultNetworkSettings(options.defaultNetwork);
  const attemptsMax = options.retry?.attempts ?? 3;
  if (!Number.isInteger(attemptsMax) || attemptsMax < 1)
    throw invalidField(
      'retry.attempts',
      `should be a whole number of at least 1, got ${attemptsMax}`,
    );
  const catalog = await createCatalog({
    defaultNetwork: defaultNetworkConfig(settings),
    confDir: options.confDir,
    watch: options.watchConfDir ?? true,
    logger,
  });
  const facts = new Map<string, NetworkFacts>();
  const snapshots = new Map<string, NetworkConfig>();

  function factsOf(network: NetworkConfig): NetworkFacts {
    let found = facts.get(network.bytes);
    if (found === undefined) {
      found = networkFacts(network);
      facts.set(network.bytes, found);
    }
    return found;
  }

  return {
    runtime,
    cache: runtime.cache,
    iptables,
    logger,
    settings,
    ifName: options.ifName ?? 'eth0',
    sandbox: options.sandbox ?? createIpNetnsManager(),
    region: options.region ?? 'global',
    ignoreHostIps: options.ignoreHostIps ?? false,
    ipv6OnIpv4Interfaces: options.ipv6OnIpv4Interfaces ?? false,
    retry: {
      attemptsMax,
      delayMs: options.retry?.delayMs ?? 1000,
      jitterMs: options.retry?.jitterMs ?? 1000,
      random: options.random ?? Math.random,
      sleep: options.sleep ?? defaultSleep,
    },
    catalog,
    node: options.node ?? createNodeKernel(iptables.ipv4.netns),
    readChain: batchedChainReader(iptables),
    room: createRooms(),
    picks: new AddressPicks(),
    factsOf,
    snapshotNetwork(a) {
      let network = snapshots.get(a.network.config);
      if (network === undefined) {
        network = parseNetworkConfigText(
          a.network.config,
          `the network snapshot of ${JSON.stringify(a.allocId)}`,
        );
        if (snapshots.size > 64) snapshots.clear();
        snapshots.set(a.network.config, network);
      }
      return network;
    },
    managedFacts(snapshot, extra = []) {
      const all = new Map<string, NetworkFacts>();
      for (const n of [snapshot.defaultNetwork, ...snapshot.named.values(), ...extra])
        if (!all.has(n.name)) all.set(n.name, factsOf(n));
      return [...all.values()];
    },
  };
}

/** The call options an operation passes on: only its signal. */
export function callOf(options: OperationOptions | undefined): { signal?: AbortSignal } {
  return options?.signal === undefined ? {} : { signal: options.signal };
}

/** The CNI attachment an allocation attachment stands for: ADD, CHECK and DEL get the same one. */
export function cniAttachment(
  a: Pick<AllocAttachment, 'allocId' | 'netns' | 'ifName' | 'args' | 'portMappings' | 'requested'>,
): Attachment {
  return {
    containerId: a.allocId,
    netns: a.netns,
    ifName: a.ifName,
    args: a.args,
    capabilityArgs: {
      ...(a.portMappings.length > 0 ? { portMappings: a.portMappings } : {}),
      ...a.requested,
    },
  };
}
