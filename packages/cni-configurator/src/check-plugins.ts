// The plugins' side of CHECK done natively (native-check.ts says what each plugin's CHECK
// verifies): which plugins of a chain are checked here, and the check itself, reading the cached
// ADD result as libcni gives it to every plugin (prevResult), the sandbox's and the node's links
// through rtnetlink (route-reader.ts), and host-local's reservations (check-reads.ts).
import { compareVersions, parseNetworkConfigText, parseResult } from '@allocnet/cni';
import type { CniArgs, CniResult, NetworkConfig, PluginConfig } from '@allocnet/cni';
import type { CheckReads } from './check-reads.js';
import type { ConfiguratorContext } from './context.js';
import { messageOf } from './errors.js';
import {
  argsNeedPlugin,
  bridgeProblem,
  hostNamesOf,
  loopbackProblem,
  nativePluginOf,
} from './native-check.js';
import type { NativePlugin } from './native-check.js';
import type { NamespaceState, RouteReader } from './route-reader.js';
import type { AllocAttachment } from './types.js';

/** The chain the plugins' CHECK still runs, and the plugins checked here, in chain order. */
export interface NativeSplit {
  /** undefined when every plugin is checked here. */
  readonly chain: NetworkConfig | undefined;
  readonly native: readonly NativePlugin[];
}

/** A CHECK that could not look (nothing found broken): the caller's `unavailable`. */
export class CouldNotCheck extends Error {}

/**
 * Splits `chain` (what CHECK runs of a network, check.ts's checkChainOf) into what the plugins
 * still CHECK and what is checked here: loopback and bridge-with-host-local whose configs the
 * native check knows whole, when the network speaks CHECK (0.4.0 or later) and the CNI_ARGS ask
 * host-local for no address. Everything else stays the plugins'.
 */
export function splitNative(chain: NetworkConfig, args: CniArgs): NativeSplit {
  const version = chain.cniVersion;
  if (version === undefined || compareVersions(version, '0.4.0') < 0 || argsNeedPlugin(args))
    return { chain, native: [] };
  const native: NativePlugin[] = [];
  const kept = chain.plugins.filter((p) => {
    const found = nativePluginOf(p, chain);
    if (found !== undefined) native.push(found);
    return found === undefined;
  });
  if (native.length === 0) return { chain, native };
  if (kept.length === 0) return { chain: undefined, native };
  return { chain: withPlugins(chain, kept), native };
}

/** `network` with only `plugins` (some of its own), parsed again. */
export function withPlugins(
  network: NetworkConfig,
  plugins: readonly PluginConfig[],
): NetworkConfig {
  return parseNetworkConfigText(
    JSON.stringify({
      ...(JSON.parse(network.bytes) as Record<string, unknown>),
      plugins: plugins.map((p) => p.raw),
    }),
    network.source,
  );
}

/** The cached ADD result, as libcni's CHECK reads it; `CouldNotCheck` without one. */
async function cachedResult(
  ctx: ConfiguratorContext,
  network: NetworkConfig,
  attachment: AllocAttachment,
): Promise<CniResult> {
  const { allocId, ifName } = attachment;
  const cached = await ctx.cache.readResult(network.name, allocId, ifName);
  if (cached?.result === undefined)
    throw new CouldNotCheck(
      `no cached ADD result for ${JSON.stringify(allocId)} (${ifName}) in network ${JSON.stringify(network.name)}; CHECK needs a completed ADD`,
    );
  try {
    return parseResult(cached.result, network.cniVersion ?? '1.0.0');
  } catch (error) {
    throw new CouldNotCheck(
      `the cached ADD result for ${JSON.stringify(allocId)} cannot be read: ${messageOf(error)}`,
    );
  }
}

function isMissing(error: unknown): boolean {
  return (error as NodeJS.ErrnoException).code === 'ENOENT';
}

/**
 * The native CHECK of `native` (in chain order; the first problem is the answer): what is wrong,
 * or undefined. Throws `CouldNotCheck` when it could not look (no cached result, a read failed).
 */
export async function checkNative(
  ctx: ConfiguratorContext,
  network: NetworkConfig,
  attachment: AllocAttachment,
  native: readonly NativePlugin[],
  reads: CheckReads,
  routes: RouteReader,
): Promise<string | undefined> {
  if (native.length === 0) return undefined;
  const result = await cachedResult(ctx, network, attachment);
  const { netns, ifName, allocId } = attachment;
  let sandbox: Promise<NamespaceState> | undefined;
  const sandboxState = () => (sandbox ??= routes.namespace(netns));
  try {
    for (const plugin of native) {
      let problem: string | undefined;
      if (plugin.type === 'loopback') {
        problem = loopbackProblem(await sandboxState());
      } else {
        const reserved = await reads.hasReservation(
          plugin.ipamDir,
          allocId,
          ifName,
          attachment.addresses,
        );
        if (!reserved)
          problem = `host-local: no address of ${JSON.stringify(allocId)} (${ifName}) is reserved in ${plugin.ipamDir}`;
        else {
          const [host, state] = await Promise.all([
            routes.hostLinks(hostNamesOf(result, ifName, netns)),
            sandboxState(),
          ]);
          problem = bridgeProblem({ plugin, result, netns, ifName, host, sandbox: state });
        }
      }
      if (problem !== undefined) return problem;
    }
    return undefined;
  } catch (error) {
    // The plugins fail the same way on a sandbox that is gone ("failed to open netns").
    if (isMissing(error)) return `the sandbox "${netns}" cannot be opened: it does not exist`;
    throw new CouldNotCheck(messageOf(error), { cause: error });
  }
}
