import { Command } from 'commander';
import { unary } from '@allocnet/proto';
import type { AllocNetworkStatus__Output, Port, PortMapping__Output } from '@allocnet/proto';
import { callError, connect, connectOptions } from './agent-client.js';
import type { AgentConnection, ConnectOptions } from './agent-client.js';
import type { CliIo } from './io.js';
import { ExitStatus, UsageError } from './errors.js';
import { formatTable } from './table.js';

/** `--port label:value[:to]` into a request port. */
export function parsePort(text: string): Port {
  const match = /^([^:]+):(\d{1,5})(?::(\d{1,5}))?$/.exec(text);
  if (match === null)
    throw new UsageError(`--port ${JSON.stringify(text)} is not label:value or label:value:to`);
  const [, label = '', value = '', to] = match;
  return { label, value: Number(value), ...(to === undefined ? {} : { to: Number(to) }) };
}

/** `--arg K=V` into one CNI arg. */
export function parseArg(text: string): [string, string] {
  const eq = text.indexOf('=');
  if (eq < 1) throw new UsageError(`--arg ${JSON.stringify(text)} is not K=V`);
  return [text.slice(0, eq), text.slice(eq + 1)];
}

const collect = (value: string, previous: string[] | undefined) => [...(previous ?? []), value];

function portsText(mappings: readonly PortMapping__Output[]): string {
  // tcp and udp of one port print as one: 8080→80
  const seen = new Set<string>();
  const parts: string[] = [];
  for (const m of mappings) {
    const key = `${m.hostIp === '' ? '' : `${m.hostIp}:`}${m.hostPort}→${m.containerPort}`;
    if (seen.has(key)) continue;
    seen.add(key);
    parts.push(key);
  }
  return parts.join(',') || '-';
}

const PHASES: Record<string, string> = {
  PHASE_SETTING_UP: 'setting-up',
  PHASE_READY: 'ready',
  PHASE_TEARING_DOWN: 'tearing-down',
  PHASE_FAILED: 'failed',
  PHASE_RESTORING: 'restoring',
};

export function phaseName(phase: string): string {
  return PHASES[phase] ?? phase.toLowerCase();
}

/**
 * Who asked for an allocation: `grpc` (the scheduler's API, or `allocnet alloc setup`), else the
 * runtime that asked through the agent's CNI server (`nomad`, `kubernetes`, `podman`, `cni`).
 */
export function originName(s: AllocNetworkStatus__Output): string {
  return s.origin === null ? 'grpc' : s.origin.runtime || 'cni';
}

/** Whose the namespace is: the agent's, the runtime's (CNI), or a task driver's (no note). */
function netnsNote(s: AllocNetworkStatus__Output): string {
  if (s.netnsCreatedByAgent) return ' (made by the agent)';
  return s.origin === null ? '' : " (the runtime's)";
}

export function statusLines(s: AllocNetworkStatus__Output): string[] {
  const origin =
    s.origin === null
      ? originName(s)
      : `${originName(s)} (container ${s.origin.containerId || '-'}, ifname ${s.origin.ifname || '-'})`;
  return [
    `${s.allocId}: ${phaseName(s.phase)} in network ${s.network}`,
    `  origin     ${origin}`,
    `  interface  ${s.interfaceName || '-'}`,
    `  address    ${s.address || '-'}${s.addressIpv6 === '' ? '' : `  ${s.addressIpv6}`}`,
    `  ports      ${portsText(s.portMappings)}`,
    `  netns      ${s.netnsPath || '-'}${netnsNote(s)}`,
    `  attempts   ${s.attempts}`,
    ...(s.dns !== null && s.dns.servers.length > 0
      ? [`  dns        ${s.dns.servers.join(',')}`]
      : []),
    ...(s.error === '' ? [] : [`  error      ${s.error}`]),
  ];
}

export function statusRows(list: readonly AllocNetworkStatus__Output[]): string[][] {
  return list.map((s) => [
    s.allocId,
    phaseName(s.phase),
    s.network,
    s.address || s.addressIpv6 || '-',
    portsText(s.portMappings),
    originName(s),
    s.netnsPath || '-',
  ]);
}

export const STATUS_HEADER = [
  'ALLOC ID',
  'PHASE',
  'NETWORK',
  'ADDRESS',
  'PORTS',
  'ORIGIN',
  'NETNS',
];

/** Runs `fn` with a connection, turning gRPC errors into one line and closing the clients. */
export async function withAgent<T>(
  options: ConnectOptions,
  fn: (agent: AgentConnection) => Promise<T>,
): Promise<T> {
  const agent = connect(options);
  try {
    return await fn(agent);
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw callError(agent.address, error);
  } finally {
    agent.close();
  }
}

export function call(agent: AgentConnection) {
  return { deadlineMs: agent.deadlineMs, metadata: agent.metadata };
}

function print(io: CliIo, value: unknown): void {
  io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

type Json = { json?: boolean };

/** `allocnet alloc …`: the scheduler's view of one node, for people. */
export function allocCommand(io: CliIo): Command {
  const alloc = new Command('alloc').description(
    'set up, inspect and tear down allocation networks through the agent',
  );

  connectOptions(
    alloc
      .command('setup')
      .description('give an allocation its network')
      .argument('<alloc-id>', 'the allocation id')
      .option('--port <label:value[:to]>', 'a host port (repeat); to is the port inside', collect)
      .option('--network <name>', 'a named network (default: the embedded bridge network)')
      .option('--arg <K=V>', 'a CNI arg for the plugins (repeat)', collect)
      .option('--namespace <ns>', 'the workload namespace', 'default')
      .option('--job <id>', 'the job id', 'cli')
      .option('--group <name>', 'the task group', 'cli')
      .option(
        '--netns-path <path>',
        'a namespace a task driver made (default: the agent makes one)',
      )
      .option('--json', 'print JSON'),
  ).action(
    async (
      allocId: string,
      o: ConnectOptions &
        Json & {
          port?: string[];
          network?: string;
          arg?: string[];
          namespace: string;
          job: string;
          group: string;
          netnsPath?: string;
        },
    ) => {
      const request = {
        allocId,
        namespace: o.namespace,
        jobId: o.job,
        groupName: o.group,
        network: o.network ?? '',
        ports: (o.port ?? []).map(parsePort),
        cniArgs: Object.fromEntries((o.arg ?? []).map(parseArg)),
        netnsPath: o.netnsPath ?? '',
      };
      const response = await withAgent(o, (agent) =>
        unary(agent.alloc, 'SetupAllocNetwork', request, call(agent)),
      );
      if (o.json === true) {
        print(io, response);
        return;
      }
      if (response.status === null) throw new Error('the agent answered without a status');
      for (const line of statusLines(response.status)) io.stdout.write(`${line}\n`);
      if (response.alreadySetUp)
        io.stdout.write('  (already set up with this spec: nothing ran)\n');
    },
  );

  connectOptions(
    alloc
      .command('teardown')
      .description('remove an allocation’s network; the audit removes whatever the plugins leave')
      .argument('<alloc-id>', 'the allocation id')
      .option('--json', 'print JSON'),
  ).action(async (allocId: string, o: ConnectOptions & Json) => {
    const response = await withAgent(o, (agent) =>
      unary(agent.alloc, 'TeardownAllocNetwork', { allocId }, call(agent)),
    );
    if (o.json === true) {
      print(io, response);
      return;
    }
    const removed = response.removed;
    const count = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;
    io.stdout.write(
      `${allocId}: torn down${response.wasKnown ? '' : ' (the agent did not know it; swept for its id)'}\n`,
    );
    if (response.delError !== '') io.stdout.write(`  DEL failed: ${response.delError}\n`);
    if (
      removed !== null &&
      removed.rules.length +
        removed.chains.length +
        removed.reservations.length +
        removed.cacheFiles.length >
        0
    ) {
      io.stdout.write(
        `  the audit removed what DEL left: ${count(removed.rules.length, 'rule')}, ${count(removed.chains.length, 'chain')}, ${count(removed.reservations.length, 'reservation')}, ${count(removed.cacheFiles.length, 'cache file')}\n`,
      );
      for (const c of removed.chains)
        io.stdout.write(`    chain ${c.family} ${c.table} ${c.chain}\n`);
      for (const r of removed.rules)
        io.stdout.write(`    rule  ${r.family} ${r.table} ${r.line}\n`);
      for (const r of removed.reservations)
        io.stdout.write(`    ipam  ${r.network} ${r.address}\n`);
    } else io.stdout.write('  audit: nothing left behind\n');
  });

  connectOptions(
    alloc
      .command('status')
      .description('an allocation’s network')
      .argument('<alloc-id>', 'the allocation id')
      .option('--json', 'print JSON'),
  ).action(async (allocId: string, o: ConnectOptions & Json) => {
    const response = await withAgent(o, (agent) =>
      unary(agent.alloc, 'GetAllocNetwork', { allocId }, call(agent)),
    );
    if (o.json === true) {
      print(io, response.status);
      return;
    }
    if (response.status !== null)
      for (const line of statusLines(response.status)) io.stdout.write(`${line}\n`);
  });

  connectOptions(
    alloc
      .command('list')
      .description('every allocation the agent holds')
      .option('--json', 'print JSON'),
  ).action(async (o: ConnectOptions & Json) => {
    const response = await withAgent(o, (agent) =>
      unary(agent.alloc, 'ListAllocNetworks', {}, call(agent)),
    );
    if (o.json === true) {
      print(io, response.allocations);
      return;
    }
    if (response.allocations.length === 0) {
      io.stdout.write('no allocations\n');
      return;
    }
    io.stdout.write(formatTable(STATUS_HEADER, statusRows(response.allocations)));
  });

  connectOptions(
    alloc
      .command('check')
      .description('CHECK an allocation’s network with the plugins; exits 1 when it is broken')
      .argument('<alloc-id>', 'the allocation id')
      .option('--json', 'print JSON'),
  ).action(async (allocId: string, o: ConnectOptions & Json) => {
    const response = await withAgent(o, (agent) =>
      unary(agent.alloc, 'CheckAllocNetwork', { allocId }, call(agent)),
    );
    if (o.json === true) print(io, response);
    else if (!response.checkRan)
      io.stdout.write(
        `${allocId}: not checked (${response.problem || 'the network does not support CHECK'})\n`,
      );
    else if (response.healthy) io.stdout.write(`${allocId}: healthy\n`);
    else io.stdout.write(`${allocId}: broken: ${response.problem}\n`);
    if (response.checkRan && !response.healthy) throw new ExitStatus(1);
  });

  return alloc;
}
