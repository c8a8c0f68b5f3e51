import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { Command, Option } from 'commander';
import { DEFAULT_PLUGIN_DIRS, createCniCache, createCniRuntime } from '@allocnet/cni';
import {
  DEFAULT_IPAM_DATA_DIR,
  checkAllocId,
  createCniConfigurator,
} from '@allocnet/cni-configurator';
import type { CniConfigurator, HostState, Leak } from '@allocnet/cni-configurator';
import { createIptables } from '@allocnet/iptables-node';
import { DEFAULT_CACHE_DIR, DEFAULT_CONF_DIR } from './cni-command.js';
import type { CliIo } from './io.js';
import { formatTable } from './table.js';

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

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export function localOptions(command: Command): Command {
  return command
    .option('--local', 'act on this host’s iptables and IPAM directly, without the agent')
    .addOption(
      new Option('--conf-dir <dir>', 'named network configurations').default(DEFAULT_CONF_DIR),
    )
    .addOption(
      new Option(
        '--plugin-dir <dir>',
        'plugin directories (repeat); only recorded, nothing runs',
      ).argParser((value: string, previous: string[] | undefined) => [...(previous ?? []), value]),
    )
    .addOption(new Option('--cache-dir <dir>', 'the CNI result cache').default(DEFAULT_CACHE_DIR))
    .addOption(
      new Option('--ipam-dir <dir>', 'host-local data directory of the default network').default(
        DEFAULT_IPAM_DATA_DIR,
      ),
    )
    .addOption(
      new Option('--host-netns <name>', 'act inside this named network namespace (a test node)'),
    )
    .option('--json', 'print JSON');
}

/** A configurator over this host (or `--host-netns`), for commands that run without an agent. */
export async function localConfigurator(
  options: LocalOptions,
  io: CliIo,
): Promise<CniConfigurator> {
  const netns = options.hostNetns === undefined ? undefined : `/run/netns/${options.hostNetns}`;
  const fromEnv = io.env.CNI_PATH;
  const pluginDirs =
    options.pluginDir !== undefined && options.pluginDir.length > 0
      ? options.pluginDir
      : fromEnv === undefined || fromEnv === ''
        ? DEFAULT_PLUGIN_DIRS
        : fromEnv.split(':').filter((d) => d !== '');
  return createCniConfigurator({
    runtime: createCniRuntime({ pluginDirs, cacheDir: options.cacheDir }),
    iptables: {
      ipv4: createIptables(netns === undefined ? {} : { netns }),
      ipv6: createIptables({ family: 'ipv6', ...(netns === undefined ? {} : { netns }) }),
    },
    defaultNetwork: { ipamDataDir: options.ipamDir },
    confDir: options.confDir,
    watchConfDir: false,
  });
}

function requireLocal(options: LocalOptions, command: string): void {
  if (options.local !== true)
    throw new UsageError(
      `${command} talks to the agent unless --local is given; run it with --local to act on this host directly`,
    );
}

/** The allocation ids of a `--known-file`: one per line; blank lines and `#` comments skipped. */
export async function readKnownFile(file: string): Promise<string[]> {
  const text = await readFile(file, 'utf8');
  const ids: string[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.replace(/#.*/, '').trim();
    if (line === '') return;
    try {
      ids.push(checkAllocId(line, `--known-file line ${i + 1}`));
    } catch (error) {
      throw new UsageError(error instanceof Error ? error.message : String(error));
    }
  });
  return ids;
}

/**
 * Without `--known-file`, the allocations alive on this host are those with a cached ADD result
 * whose network namespace still exists.
 */
async function knownFromCache(cacheDir: string): Promise<string[]> {
  const entries = await createCniCache(cacheDir).listResults();
  return entries
    .filter((e) => e.netns !== undefined && existsSync(e.netns))
    .map((e) => e.containerId);
}

export function stateCounts(state: HostState): string {
  return `${state.rules.length} rule(s), ${state.chains.length} chain(s), ${state.reservations.length} reservation(s), ${state.cacheFiles.length} cache file(s)`;
}

/** What a state holds, one line per item, for people. */
export function stateLines(state: HostState, indent = '  '): string[] {
  return [
    ...state.chains.map((c) => `${indent}chain ${c.family} ${c.table} ${c.chain}`),
    ...state.rules.map((r) => `${indent}rule  ${r.family} ${r.table} ${r.line}`),
    ...state.reservations.map((r) => `${indent}ipam  ${r.network} ${r.address} (${r.path})`),
    ...state.cacheFiles.map((f) => `${indent}cache ${f}`),
  ];
}

export function leakRows(leaks: readonly Leak[]): string[][] {
  return leaks.map((l) => [
    l.allocId,
    l.networks.join(',') || '-',
    String(l.state.rules.length),
    String(l.state.chains.length),
    String(l.state.reservations.length),
    String(l.state.cacheFiles.length),
  ]);
}

export const LEAK_HEADER = ['ALLOC ID', 'NETWORKS', 'RULES', 'CHAINS', 'RESERVATIONS', 'CACHE'];

function print(io: CliIo, value: unknown): void {
  io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** `allocnet cleanup <alloc-id> --local`: the forced cleanup, without an agent. */
export function cleanupCommand(io: CliIo): Command {
  return localOptions(
    new Command('cleanup')
      .description(
        'remove every rule, chain, IPAM reservation and cache file tagged with an allocation',
      )
      .argument('<alloc-id>', 'the allocation id')
      .option('--network <name>', 'only what this network tagged (default: any network)')
      .option('--dry-run', 'list what would be removed, remove nothing'),
  ).action(
    async (allocId: string, options: LocalOptions & { network?: string; dryRun?: boolean }) => {
      requireLocal(options, 'cleanup');
      const configurator = await localConfigurator(options, io);
      try {
        const report = await configurator.forceCleanup(allocId, {
          ...(options.network === undefined ? {} : { network: options.network }),
          dryRun: options.dryRun === true,
        });
        if (options.json === true) {
          print(io, report);
          return;
        }
        const verb = report.dryRun ? 'would remove' : 'removed';
        io.stdout.write(`${report.allocId}: ${verb} ${stateCounts(report.removed)}\n`);
        for (const line of stateLines(report.removed)) io.stdout.write(`${line}\n`);
      } finally {
        await configurator.close();
      }
    },
  );
}

/** `allocnet leaks --local`: what is tagged with allocations that are not alive, and reaping it. */
export function leaksCommand(io: CliIo): Command {
  return localOptions(
    new Command('leaks')
      .description('list state tagged with allocations that are not alive; --reap removes it')
      .option('--reap', 'remove what was found')
      .option('--known-file <file>', 'allocation ids that are alive, one per line'),
  ).action(async (options: LocalOptions & { reap?: boolean; knownFile?: string }) => {
    requireLocal(options, 'leaks');
    const configurator = await localConfigurator(options, io);
    try {
      const known =
        options.knownFile === undefined
          ? await knownFromCache(options.cacheDir)
          : await readKnownFile(options.knownFile);
      if (options.reap === true) {
        const report = await configurator.reapLeaks(known, {
          onProgress: (p) => {
            if (options.json !== true) io.stderr.write(`reaped ${p.done}/${p.total}\n`);
          },
        });
        if (options.json === true) {
          print(io, report);
          return;
        }
        io.stdout.write(
          `reaped ${report.reaped.length} leaked allocation(s); ${report.failed.length} failed; orphans: ${stateCounts(report.orphans)}\n`,
        );
        for (const f of report.failed) io.stdout.write(`failed: ${f.allocId}: ${f.error}\n`);
        return;
      }
      const report = await configurator.findLeaks(known);
      if (options.json === true) {
        print(io, report);
        return;
      }
      if (report.leaks.length > 0)
        io.stdout.write(formatTable(LEAK_HEADER, leakRows(report.leaks)));
      io.stdout.write(
        `${report.leaks.length} leaked allocation(s); orphans: ${stateCounts(report.orphans)}\n`,
      );
      for (const line of stateLines(report.orphans)) io.stdout.write(`${line}\n`);
    } finally {
      await configurator.close();
    }
  });
}
