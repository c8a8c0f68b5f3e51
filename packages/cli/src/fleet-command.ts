import { Command, Option } from 'commander';
import type { ConnectOptions } from './connect-options.js';
import { securityOptions } from './connect-options.js';
import { reportedFailure, usageError } from './errors.js';
import type { CliIo } from './io.js';
import { reapThroughAgent } from './operator-command.js';
import { formatTable } from './table.js';
import { withAgent } from './with-agent.js';

/** One node's answer, or why it gave none. */
export interface NodeLeaks {
  readonly node: string;
  readonly leakedAllocations: number;
  readonly rules: number;
  readonly chains: number;
  readonly reservations: number;
  readonly orphanRules: number;
  readonly orphanChains: number;
  /** For `reap`: allocations whose state could not be removed. */
  readonly failed: number;
  readonly error: string | undefined;
}

type FleetOptions = Omit<ConnectOptions, 'address'> & { node?: string[]; json?: boolean };

function nodesOf(options: FleetOptions): string[] {
  const nodes = options.node ?? [];
  if (nodes.length === 0) throw usageError('give at least one --node ADDR');
  return nodes;
}

async function sweepNode(node: string, options: FleetOptions, reap: boolean): Promise<NodeLeaks> {
  try {
    return await withAgent({ ...options, address: node }, async (agent) => {
      if (reap) {
        const s = await reapThroughAgent(agent, {}, () => undefined);
        const sum = (
          pick: (state: { rules: unknown[]; chains: unknown[]; reservations: unknown[] }) => number,
        ) => s.reaped.reduce((n, l) => n + (l.state === null ? 0 : pick(l.state)), 0);
        return {
          node,
          leakedAllocations: s.reaped.length,
          rules: sum((st) => st.rules.length),
          chains: sum((st) => st.chains.length),
          reservations: sum((st) => st.reservations.length),
          orphanRules: s.orphans?.rules.length ?? 0,
          orphanChains: s.orphans?.chains.length ?? 0,
          failed: s.failed.length,
          error: undefined,
        };
      }
      const r = await agent.unary(agent.operator, 'ListLeaks', {});
      const sum = (
        pick: (state: { rules: unknown[]; chains: unknown[]; reservations: unknown[] }) => number,
      ) => r.leaks.reduce((n, l) => n + (l.state === null ? 0 : pick(l.state)), 0);
      return {
        node,
        leakedAllocations: r.leaks.length,
        rules: sum((st) => st.rules.length),
        chains: sum((st) => st.chains.length),
        reservations: sum((st) => st.reservations.length),
        orphanRules: r.orphans?.rules.length ?? 0,
        orphanChains: r.orphans?.chains.length ?? 0,
        failed: 0,
        error: undefined,
      };
    });
  } catch (error) {
    const zero = {
      leakedAllocations: 0,
      rules: 0,
      chains: 0,
      reservations: 0,
      orphanRules: 0,
      orphanChains: 0,
      failed: 0,
    };
    return { node, ...zero, error: error instanceof Error ? error.message : String(error) };
  }
}

function fleetAction(io: CliIo, reap: boolean) {
  return async (options: FleetOptions) => {
    const nodes = nodesOf(options);
    const results = await Promise.all(nodes.map((node) => sweepNode(node, options, reap)));
    if (options.json === true) io.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
    else {
      const header = [
        'NODE',
        reap ? 'REAPED' : 'LEAKED',
        'RULES',
        'CHAINS',
        'RESERVATIONS',
        'ORPHAN RULES',
        'ORPHAN CHAINS',
        'STATUS',
      ];
      io.stdout.write(
        formatTable(
          header,
          results.map((r) => [
            r.node,
            String(r.leakedAllocations),
            String(r.rules),
            String(r.chains),
            String(r.reservations),
            String(r.orphanRules),
            String(r.orphanChains),
            r.error ?? (r.failed > 0 ? `${r.failed} failed` : 'ok'),
          ]),
        ),
      );
      const total = results.reduce((n, r) => n + r.leakedAllocations, 0);
      const down = results.filter((r) => r.error !== undefined).length;
      io.stdout.write(
        `${nodes.length} node(s), ${total} leaked allocation(s) ${reap ? 'reaped' : 'found'}${down > 0 ? `, ${down} node(s) did not answer` : ''}\n`,
      );
    }
    if (results.some((r) => r.error !== undefined || r.failed > 0))
      throw reportedFailure(
        results.some((r) => r.error !== undefined) ? 'unavailable' : 'internal',
      );
  };
}

function fleetOptions(command: Command): Command {
  return securityOptions(command)
    .addOption(
      new Option(
        '--node <addr>',
        'an agent: socket path, unix:<path> or host:port (repeat)',
      ).argParser((value: string, previous: string[] | undefined) => [...(previous ?? []), value]),
    )
    .option('--json', 'print JSON');
}

/** `allocnet fleet leaks|reap --node ADDR…`: one leak sweep across many agents, in parallel. */
export function fleetCommand(io: CliIo): Command {
  const fleet = new Command('fleet').description('leak sweeps across many agents at once');
  fleetOptions(fleet.command('leaks').description('list leaked state on every node')).action(
    fleetAction(io, false),
  );
  fleetOptions(fleet.command('reap').description('reap leaked state on every node')).action(
    fleetAction(io, true),
  );
  return fleet;
}
