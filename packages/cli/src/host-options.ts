// The flags of the commands that act on this host without an agent (`cni`, `cleanup --local`,
// `leaks --local`), read once for all of them: where the plugins are and which namespace stands
// for the node.
import { DEFAULT_PLUGIN_DIRS } from '@allocnet/cni/defaults';
import { NETNS_RUN_DIR, resolveNetns } from '@allocnet/netns';
import { usageError } from './errors.js';
import type { CliIo } from './io.js';

/** The plugin directories: `--plugin-dir` (repeated), else `$CNI_PATH`, else the defaults. */
export function pluginDirsOf(
  pluginDir: readonly string[] | undefined,
  io: CliIo,
): readonly string[] {
  if (pluginDir !== undefined && pluginDir.length > 0) return pluginDir;
  const fromEnv = io.env.CNI_PATH;
  return fromEnv === undefined || fromEnv === ''
    ? DEFAULT_PLUGIN_DIRS
    : fromEnv.split(':').filter((d) => d !== '');
}

/** A `--host-netns`: its name (for `ip netns exec`) and its path (for iptables' `netns`). */
export interface HostNetns {
  readonly name: string;
  readonly path: string;
}

/**
 * `--host-netns NAME` (or `/run/netns/NAME`), checked by @allocnet/netns's rule before anything
 * runs; anything else is a usage error naming the flag. Undefined without the flag.
 */
export function hostNetnsOf(value: string | undefined): HostNetns | undefined {
  if (value === undefined) return undefined;
  const resolved = resolveNetns(value);
  if ('problem' in resolved)
    throw usageError(`--host-netns ${JSON.stringify(value)} ${resolved.problem}`);
  if (resolved.name === undefined)
    throw usageError(
      `--host-netns ${JSON.stringify(value)} is not a namespace under ${NETNS_RUN_DIR} (ip netns exec needs its name)`,
    );
  return { name: resolved.name, path: resolved.path };
}
