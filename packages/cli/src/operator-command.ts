// `allocnet cleanup` and `allocnet leaks`: through the agent, or `--local` on this host. What
// `--local` runs (the configurator, iptables, the CNI cache) is loaded by its action only
// (local-host.ts), and the progress bar only on a terminal.
import { Command, Option } from 'commander';
import { DEFAULT_CACHE_DIR, DEFAULT_CONF_DIR } from '@allocnet/cni/defaults';
import { DEFAULT_IPAM_DATA_DIR } from '@allocnet/cni-configurator/defaults';
import type { ReapSummary__Output } from '@allocnet/proto';
import type { AgentConnection } from './agent-client.js';
import type { LocalOptions } from './local-host.js';
import { connectOptions } from './connect-options.js';
import type { ConnectOptions } from './connect-options.js';
import { reportedFailure, usageError } from './errors.js';
import type { CliIo } from './io.js';
import { formatTable } from './table.js';
import { withAgent } from './with-agent.js';

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

/** A host state as the configurator and the agent both report it. */
export interface StateLike {
  readonly rules: readonly {
    readonly family: string;
    readonly table: string;
    readonly line: string;
  }[];
  readonly chains: readonly {
    readonly family: string;
    readonly table: string;
    readonly chain: string;
  }[];
  readonly reservations: readonly {
    readonly network: string;
    readonly address: string;
    readonly path: string;
  }[];
  readonly cacheFiles: readonly string[];
}

export interface LeakLike {
  readonly allocId: string;
  readonly networks: readonly string[];
  readonly state: StateLike;
}

export function stateCounts(state: StateLike): string {
  return `${state.rules.length} rule(s), ${state.chains.length} chain(s), ${state.reservations.length} reservation(s), ${state.cacheFiles.length} cache file(s)`;
}

/** What a state holds, one line per item, for people. */
export function stateLines(state: StateLike, indent = '  '): string[] {
  return [
    ...state.chains.map((c) => `${indent}chain ${c.family} ${c.table} ${c.chain}`),
    ...state.rules.map((r) => `${indent}rule  ${r.family} ${r.table} ${r.line}`),
    ...state.reservations.map((r) => `${indent}ipam  ${r.network} ${r.address} (${r.path})`),
    ...state.cacheFiles.map((f) => `${indent}cache ${f}`),
  ];
}

export function leakRows(leaks: readonly LeakLike[]): string[][] {
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

/** A namespace named like the agent's allocations' that no allocation has (agent only). */
export interface StrayNamespaceLike {
  readonly name: string;
  readonly path: string;
  readonly reason: string;
}

export const STRAY_HEADER = ['NAMESPACE', 'PATH', 'WHY'];

export function strayRows(namespaces: readonly StrayNamespaceLike[]): string[][] {
  return namespaces.map((ns) => [ns.name, ns.path, ns.reason]);
}

/** A reap's failure: an allocation's state, or (`netnsName` set) a stray namespace. */
export interface ReapFailureLike {
  readonly allocId: string;
  readonly error: string;
  readonly netnsName?: string;
}

function print(io: CliIo, value: unknown): void {
  io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** How far a reap is: `update` as it goes, `stop` once it ended (either way). */
interface ProgressReporter {
  update(done: number, total: number): void;
  stop(): void;
}

/** Reaping progress: a bar on a terminal, plain lines otherwise (and nothing with --json). */
async function progressReporter(io: CliIo, quiet: boolean): Promise<ProgressReporter> {
  if (quiet) return { update: () => undefined, stop: () => undefined };
  const stream = io.stderr as { isTTY?: boolean };
  if (stream.isTTY === true) {
    const { Presets, SingleBar } = await import('cli-progress');
    const bar = new SingleBar(
      {
        format: 'reaping [{bar}] {value}/{total} allocations',
        stream: io.stderr as NodeJS.WritableStream,
      },
      Presets.shades_classic,
    );
    let started = false;
    return {
      update(done: number, total: number) {
        if (!started) {
          bar.start(total, 0);
          started = true;
        }
        bar.update(done);
      },
      stop() {
        if (started) bar.stop();
      },
    };
  }
  return {
    update: (done: number, total: number) => void io.stderr.write(`reaped ${done}/${total}\n`),
    stop: () => undefined,
  };
}

function printCleanup(io: CliIo, allocId: string, dryRun: boolean, removed: StateLike): void {
  io.stdout.write(`${allocId}: ${dryRun ? 'would remove' : 'removed'} ${stateCounts(removed)}\n`);
  for (const line of stateLines(removed)) io.stdout.write(`${line}\n`);
}

/** Leaks, orphans, then (through the agent, when there are any) the stray namespaces. */
function printLeaks(
  io: CliIo,
  leaks: readonly LeakLike[],
  orphans: StateLike,
  namespaces: readonly StrayNamespaceLike[] = [],
): void {
  if (leaks.length > 0) io.stdout.write(formatTable(LEAK_HEADER, leakRows(leaks)));
  io.stdout.write(`${leaks.length} leaked allocation(s); orphans: ${stateCounts(orphans)}\n`);
  for (const line of stateLines(orphans)) io.stdout.write(`${line}\n`);
  if (namespaces.length === 0) return;
  io.stdout.write(formatTable(STRAY_HEADER, strayRows(namespaces)));
  io.stdout.write(`${namespaces.length} stray namespace(s)\n`);
}

/** What a reap did; exits 1 when anything could not be removed. */
function printReap(
  io: CliIo,
  reaped: number,
  failed: readonly ReapFailureLike[],
  orphans: StateLike,
  namespaces: readonly StrayNamespaceLike[] = [],
): void {
  io.stdout.write(
    `reaped ${reaped} leaked allocation(s); ${failed.length} failed; orphans: ${stateCounts(orphans)}\n`,
  );
  if (namespaces.length > 0) {
    io.stdout.write(`removed ${namespaces.length} stray namespace(s)\n`);
    for (const ns of namespaces) io.stdout.write(`  netns ${ns.name} (${ns.path})\n`);
  }
  for (const f of failed) {
    const what =
      f.netnsName === undefined || f.netnsName === '' ? f.allocId : `netns ${f.netnsName}`;
    io.stdout.write(`failed: ${what}: ${f.error}\n`);
  }
  if (failed.length > 0) throw reportedFailure('internal');
}

const EMPTY: StateLike = { rules: [], chains: [], reservations: [], cacheFiles: [] };

/** Reaps through the agent's ReapLeaks stream, reporting progress; resolves the summary. */
export async function reapThroughAgent(
  agent: AgentConnection,
  request: { batchSize?: number; dryRun?: boolean },
  onStep: (done: number, total: number) => void,
): Promise<ReapSummary__Output> {
  let summary: ReapSummary__Output | undefined;
  await agent.serverStream(agent.operator, 'ReapLeaks', request, (message) => {
    if (message.step !== null && message.step !== undefined)
      onStep(message.step.done, message.step.total);
    if (message.summary !== null && message.summary !== undefined) summary = message.summary;
  });
  if (summary === undefined) throw new Error('the agent ended ReapLeaks without a summary');
  return summary;
}

/** `allocnet cleanup <alloc-id>`: the forced cleanup, through the agent or `--local`. */
export function cleanupCommand(io: CliIo): Command {
  return connectOptions(
    localOptions(
      new Command('cleanup')
        .description(
          'remove every rule, chain, IPAM reservation and cache file tagged with an allocation',
        )
        .argument('<alloc-id>', 'the allocation id')
        .option('--network <name>', 'only what this network tagged (default: any network)')
        .option('--dry-run', 'list what would be removed, remove nothing'),
    ),
  ).action(
    async (
      allocId: string,
      options: LocalOptions & ConnectOptions & { network?: string; dryRun?: boolean },
    ) => {
      const dryRun = options.dryRun === true;
      if (options.local !== true) {
        const response = await withAgent(options, (agent) =>
          agent.unary(agent.operator, 'ForceCleanup', {
            allocId,
            network: options.network ?? '',
            dryRun,
          }),
        );
        if (options.json === true) {
          print(io, response);
          return;
        }
        printCleanup(io, allocId, response.dryRun, response.removed ?? EMPTY);
        return;
      }
      const { localConfigurator } = await import('./local-host.js');
      const configurator = await localConfigurator(options, io);
      try {
        const report = await configurator.forceCleanup(allocId, {
          ...(options.network === undefined ? {} : { network: options.network }),
          dryRun,
        });
        if (options.json === true) {
          print(io, report);
          return;
        }
        printCleanup(io, report.allocId, report.dryRun, report.removed);
      } finally {
        await configurator.close();
      }
    },
  );
}

/**
 * `allocnet leaks`: state tagged with allocations that are not alive and, through the agent,
 * namespaces named like its allocations' that none has; `--reap` removes them.
 */
export function leaksCommand(io: CliIo): Command {
  return connectOptions(
    localOptions(
      new Command('leaks')
        .description(
          'list state tagged with allocations that are not alive, and the agent’s stray namespaces; --reap removes them',
        )
        .option('--reap', 'remove what was found')
        .option('--known-file <file>', 'with --local: allocation ids that are alive, one per line'),
    ),
  ).action(
    async (options: LocalOptions & ConnectOptions & { reap?: boolean; knownFile?: string }) => {
      const progress = await progressReporter(io, options.json === true);
      if (options.local !== true) {
        if (options.knownFile !== undefined)
          throw usageError('--known-file goes with --local; the agent knows its own allocations');
        if (options.reap === true) {
          const summary = await withAgent(options, (agent) =>
            reapThroughAgent(agent, {}, (done, total) => {
              progress.update(done, total);
            }),
          ).finally(() => {
            progress.stop();
          });
          if (options.json === true) {
            print(io, summary);
            return;
          }
          printReap(
            io,
            summary.reaped.length,
            summary.failed,
            summary.orphans ?? EMPTY,
            summary.namespaces,
          );
          return;
        }
        const response = await withAgent(options, (agent) =>
          agent.unary(agent.operator, 'ListLeaks', {}),
        );
        if (options.json === true) {
          print(io, response);
          return;
        }
        printLeaks(
          io,
          response.leaks.map((l) => ({ ...l, state: l.state ?? EMPTY })),
          response.orphans ?? EMPTY,
          response.namespaces,
        );
        return;
      }
      const { knownFromCache, localConfigurator, readKnownFile } = await import('./local-host.js');
      const configurator = await localConfigurator(options, io);
      try {
        const known =
          options.knownFile === undefined
            ? await knownFromCache(options.cacheDir)
            : await readKnownFile(options.knownFile);
        if (options.reap === true) {
          const report = await configurator
            .reapLeaks(known, {
              onProgress: (p) => {
                progress.update(p.done, p.total);
              },
            })
            .finally(() => {
              progress.stop();
            });
          if (options.json === true) {
            print(io, report);
            return;
          }
          printReap(io, report.reaped.length, report.failed, report.orphans);
          return;
        }
        const report = await configurator.findLeaks(known);
        if (options.json === true) {
          print(io, report);
          return;
        }
        printLeaks(io, report.leaks, report.orphans);
      } finally {
        await configurator.close();
      }
    },
  );
}
