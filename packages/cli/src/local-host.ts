// What `cleanup --local` and `leaks --local` run on this host without an agent: a configurator
// over the host's iptables and the plugins' files, the ids a `--known-file` names, the CNI cache.
// Loaded by those actions only (operator-command.ts).
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { messageOf } from '@allocnet/base';
import { createCniCache, createCniRuntime } from '@allocnet/cni';
import { checkAllocId, createCniConfigurator } from '@allocnet/cni-configurator';
import type { CniConfigurator } from '@allocnet/cni-configurator';
import { createIptables, openNftLink } from '@allocnet/iptables-node';
import type { OpenNft } from '@allocnet/iptables-node';
import { usageError } from './errors.js';
import { hostNetnsOf, pluginDirsOf } from './host-options.js';
import type { CliIo } from './io.js';

/** Flags of the commands that act on this host directly, without an agent. */
export interface LocalOptions {
  readonly local?: boolean;
  readonly confDir: string;
  readonly pluginDir?: string[];
  readonly cacheDir: string;
  readonly ipamDir: string;
  readonly hostNetns?: string;
  readonly json?: boolean;
}

/** A configurator over this host (or `--host-netns`), for commands that run without an agent. */
export async function localConfigurator(
  options: LocalOptions,
  io: CliIo,
): Promise<CniConfigurator> {
  const netns = hostNetnsOf(options.hostNetns)?.path;
  const pluginDirs = pluginDirsOf(options.pluginDir, io);
  // This process answers nothing else while it reads and removes: its netlink requests need no
  // worker thread (openNftLink's `requestsOnCallingThread`; a commit's batch still goes to one).
  const nft: OpenNft = (family, at) => openNftLink(family, at, { requestsOnCallingThread: true });
  return createCniConfigurator({
    runtime: createCniRuntime({ pluginDirs, cacheDir: options.cacheDir }),
    iptables: {
      ipv4: createIptables({ nft, ...(netns === undefined ? {} : { netns }) }),
      ipv6: createIptables({ family: 'ipv6', nft, ...(netns === undefined ? {} : { netns }) }),
    },
    defaultNetwork: { ipamDataDir: options.ipamDir },
    confDir: options.confDir,
    watchConfDir: false,
  });
}

/** The allocation ids of a `--known-file`: one per line; blank lines and `#` comments skipped. */
export async function readKnownFile(file: string): Promise<string[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw usageError(
      `--known-file ${JSON.stringify(file)} cannot be read: ${messageOf(error)}`,
      error,
    );
  }
  const ids: string[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.replace(/#.*/, '').trim();
    if (line === '') return;
    try {
      ids.push(checkAllocId(line, `--known-file line ${i + 1}`));
    } catch (error) {
      throw usageError(messageOf(error), error);
    }
  });
  return ids;
}

/**
 * Without `--known-file`, the allocations alive on this host are those with a cached ADD result
 * whose network namespace still exists.
 */
export async function knownFromCache(cacheDir: string): Promise<string[]> {
  const entries = await createCniCache(cacheDir).listResults();
  return entries
    .filter((e) => e.netns !== undefined && existsSync(e.netns))
    .map((e) => e.containerId);
}
