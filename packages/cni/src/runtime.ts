// The CNI runtime's facade: `createCniRuntime` settles the options and builds one context (the
// cache, the plugin invoker, version negotiation); each method is a verb of verbs.ts over it.
// Below it: invoke.ts (plugins' environment, stdin, and runs of one plugin or a chain),
// plugin-output.ts (what a plugin printed), negotiation.ts (VERSION answers and the chain's
// version), attachment.ts (checking an attachment, and its cache entries).
import type { Attachment } from './attachment.js';
import { createCniCache } from './cache.js';
import type { CacheEntry, CniCache } from './cache.js';
import type { NetworkConfig } from './config.js';
import { createNodePluginExec } from './exec.js';
import type { PluginExec } from './exec.js';
import { createInvoker } from './invoke.js';
import type { CallOptions } from './invoke.js';
import { silentLogger } from './logger.js';
import type { Logger } from './logger.js';
import { DEFAULT_CACHE_DIR, DEFAULT_PLUGIN_DIRS } from './defaults.js';
import { createNegotiation } from './negotiation.js';
import type { NetworkVersions } from './negotiation.js';
import { add, check, del, gc, status, undoPendingAdd } from './verbs.js';
import type { AddResult, GcReport, VerbContext } from './verbs.js';

export interface CniRuntimeOptions {
  /** Searched in order. Default /opt/cni/bin, /usr/libexec/cni, /usr/lib/cni. Also CNI_PATH. */
  readonly pluginDirs?: readonly string[];
  /** The result cache (libcni layout). Default /var/lib/cni. */
  readonly cacheDir?: string;
  /** How plugins run. Default: `createNodePluginExec()` (posix_spawn), in this process's network namespace. */
  readonly exec?: PluginExec;
  /** Per plugin process, counted from when it gets its stdin; then it is killed. Default 60 000 ms. */
  readonly timeoutMs?: number;
  /** The environment plugins start from (the CNI_* variables are set over it). Default process.env. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly logger?: Logger;
  /**
   * Plugin types that run side by side when they follow each other in a chain. Default
   * `DEFAULT_CONCURRENT_TYPES` (the firewall and portmap); an empty set runs every chain strictly
   * in order.
   */
  readonly concurrentTypes?: ReadonlySet<string>;
}

/**
 * The plugins that run side by side when consecutive: the firewall and portmap hand on their
 * prevResult unchanged, and touch disjoint state (the filter table's CNI-FORWARD and admin
 * chains, or firewalld; the nat table's CNI-HOSTPORT-* and CNI-DN-* chains and a sysctl), so in
 * Nomad's bridge chain (loopback, bridge, firewall, portmap) the last two run at once, on ADD
 * and on DEL.
 */
export const DEFAULT_CONCURRENT_TYPES: ReadonlySet<string> = new Set(['firewall', 'portmap']);

export interface CniRuntime {
  readonly pluginDirs: readonly string[];
  readonly cache: CniCache;
  /**
   * Runs ADD over the chain in order. When a plugin fails, runs DEL over the whole chain in
   * reverse (so nothing stays half-applied) and throws the ADD error. Caches the final result.
   */
  add(network: NetworkConfig, attachment: Attachment, options?: CallOptions): Promise<AddResult>;
  /** CHECK in order with the cached result; a no-op when the network has `disableCheck`. */
  check(
    network: NetworkConfig,
    attachment: Attachment,
    options?: CallOptions,
  ): Promise<{ readonly ran: boolean }>;
  /** DEL in reverse with the cached result; goes on when the netns is gone. Removes the cache entry. */
  del(network: NetworkConfig, attachment: Attachment, options?: CallOptions): Promise<void>;
  /** STATUS in order (networks at 1.1.0 or later; others report `ran: false`). */
  status(network: NetworkConfig, options?: CallOptions): Promise<{ readonly ran: boolean }>;
  /** DELs cached attachments of the network not in `valid`, then GC on each plugin (1.1.0 or later). */
  gc(
    network: NetworkConfig,
    valid: readonly { readonly containerId: string; readonly ifName: string }[],
    options?: CallOptions,
  ): Promise<GcReport>;
  /** Each plugin's VERSION answer and the version the chain runs at. */
  versions(network: NetworkConfig, options?: CallOptions): Promise<NetworkVersions>;
  /** ADDs that began and never finished (a crash, or a DEL that failed to undo a failed ADD). */
  pendingAdds(): Promise<CacheEntry[]>;
  /** Runs DEL for a pending ADD with the configuration and arguments it recorded. */
  undoPendingAdd(entry: CacheEntry, options?: CallOptions): Promise<void>;
}

/** Creates a runtime. Nothing runs until a method is called. */
export function createCniRuntime(options: CniRuntimeOptions = {}): CniRuntime {
  const pluginDirs = options.pluginDirs ?? DEFAULT_PLUGIN_DIRS;
  const cache = createCniCache(options.cacheDir ?? DEFAULT_CACHE_DIR);
  const logger = options.logger ?? silentLogger;
  const invoker = createInvoker({
    pluginDirs,
    exec: options.exec ?? createNodePluginExec(),
    timeoutMs: options.timeoutMs ?? 60_000,
    env: options.env ?? process.env,
    logger,
    concurrentTypes: options.concurrentTypes ?? DEFAULT_CONCURRENT_TYPES,
  });
  const ctx: VerbContext = { cache, logger, invoker, negotiation: createNegotiation(invoker) };

  return {
    pluginDirs,
    cache,
    add: (network, attachment, call) => add(ctx, network, attachment, call),
    check: (network, attachment, call) => check(ctx, network, attachment, call),
    del: (network, attachment, call) => del(ctx, network, attachment, call),
    status: (network, call) => status(ctx, network, call),
    gc: (network, valid, call) => gc(ctx, network, valid, call),
    async versions(network, call) {
      return ctx.negotiation.negotiate(network, invoker.resolve(network), call);
    },
    pendingAdds: () => cache.listAdding(),
    undoPendingAdd: (entry, call) => undoPendingAdd(ctx, entry, call),
  };
}
