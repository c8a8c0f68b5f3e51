// `allocnet alloc …`: the scheduler's calls for one node, for people. One function per sub-command
// (its flags, its call, its printing); `allocCommand` puts them together.
import { Command } from 'commander';
import type {
  DetachNetworkResponse__Output,
  HostState__Output,
  Port,
  TeardownAllocNetworkResponse__Output,
} from '@allocnet/proto';
import { connectOptions } from './connect-options.js';
import type { ConnectOptions } from './connect-options.js';
import { STATUS_HEADER, statusLines, statusRows } from './alloc-status.js';
import type { CliIo } from './io.js';
import { reportedFailure, usageError } from './errors.js';
import { formatTable } from './table.js';
import { withAgent } from './with-agent.js';

/** `--port label:value[:to][@hostip]` into a request port. */
export function parsePort(text: string): Port {
  const match = /^([^:@]+):(\d{1,5})(?::(\d{1,5}))?(?:@(.+))?$/.exec(text);
  if (match === null)
    throw usageError(`--port ${JSON.stringify(text)} is not label:value[:to][@hostip]`);
  const [, label = '', value = '', to, hostIp] = match;
  return {
    label,
    value: Number(value),
    ...(to === undefined ? {} : { to: Number(to) }),
    ...(hostIp === undefined ? {} : { hostIp }),
  };
}

/** `--arg K=V` (or `flag`'s K=V) into one CNI arg. */
export function parseArg(text: string, flag = '--arg'): [string, string] {
  const eq = text.indexOf('=');
  if (eq < 1) throw usageError(`${flag} ${JSON.stringify(text)} is not K=V`);
  return [text.slice(0, eq), text.slice(eq + 1)];
}

const collect = (value: string, previous: string[] | undefined) => [...(previous ?? []), value];

function print(io: CliIo, value: unknown): void {
  io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

type Json = { json?: boolean };

type SetupOptions = ConnectOptions &
  Json & {
    port?: string[];
    network?: string;
    arg?: string[];
    namespace: string;
    job: string;
    group: string;
    netnsPath?: string;
  };

/** `alloc setup <alloc-id>`: the scheduler's SetupAllocNetwork with flags for its fields. */
function setupCommand(alloc: Command, io: CliIo): void {
  connectOptions(
    alloc
      .command('setup')
      .description('give an allocation its network')
      .argument('<alloc-id>', 'the allocation id')
      .option(
        '--port <label:value[:to][@hostip]>',
        'a host port (repeat); to is the port inside, hostip the host address to bind',
        collect,
      )
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
  ).action(async (allocId: string, o: SetupOptions) => {
    const request = {
      allocId,
      namespace: o.namespace,
      jobId: o.job,
      groupName: o.group,
      network: o.network ?? '',
      ports: (o.port ?? []).map(parsePort),
      cniArgs: Object.fromEntries((o.arg ?? []).map((text) => parseArg(text))),
      netnsPath: o.netnsPath ?? '',
    };
    const response = await withAgent(o, (agent) =>
      agent.unary(agent.alloc, 'SetupAllocNetwork', request),
    );
    if (o.json === true) {
      print(io, response);
      return;
    }
    if (response.status === null) throw new Error('the agent answered without a status');
    for (const line of statusLines(response.status)) io.stdout.write(`${line}\n`);
    if (response.alreadySetUp) io.stdout.write('  (already set up with this spec: nothing ran)\n');
  });
}

/** What a teardown did, for people: DEL's failure, then what the audit removed (or nothing). */
export function teardownLines(
  allocId: string,
  response: TeardownAllocNetworkResponse__Output,
): string[] {
  return [
    `${allocId}: torn down${response.wasKnown ? '' : ' (the agent did not know it; swept for its id)'}`,
    ...auditLines(response.delError, response.removed),
  ];
}

/** What a detach did, for people: as a teardown's, for one interface. */
export function detachLines(
  allocId: string,
  ifName: string,
  response: DetachNetworkResponse__Output,
): string[] {
  return [`${allocId}: ${ifName} detached`, ...auditLines(response.delError, response.removed)];
}

/** DEL's failure, then what the audit removed after it (or that it found nothing). */
function auditLines(delError: string, removed: HostState__Output | null): string[] {
  const count = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;
  const lines: string[] = [];
  if (delError !== '') lines.push(`  DEL failed: ${delError}`);
  if (
    removed === null ||
    removed.rules.length +
      removed.chains.length +
      removed.reservations.length +
      removed.cacheFiles.length ===
      0
  )
    return [...lines, '  audit: nothing left behind'];
  return [
    ...lines,
    `  the audit removed what DEL left: ${count(removed.rules.length, 'rule')}, ${count(removed.chains.length, 'chain')}, ${count(removed.reservations.length, 'reservation')}, ${count(removed.cacheFiles.length, 'cache file')}`,
    ...removed.chains.map((c) => `    chain ${c.family} ${c.table} ${c.chain}`),
    ...removed.rules.map((r) => `    rule  ${r.family} ${r.table} ${r.line}`),
    ...removed.reservations.map((r) => `    ipam  ${r.network} ${r.address}`),
  ];
}

/** `alloc teardown <alloc-id>`: DEL, then the audit's report. */
function teardownCommand(alloc: Command, io: CliIo): void {
  connectOptions(
    alloc
      .command('teardown')
      .description('remove an allocation’s network; the audit removes whatever the plugins leave')
      .argument('<alloc-id>', 'the allocation id')
      .option('--json', 'print JSON'),
  ).action(async (allocId: string, o: ConnectOptions & Json) => {
    const response = await withAgent(o, (agent) =>
      agent.unary(agent.alloc, 'TeardownAllocNetwork', { allocId }),
    );
    if (o.json === true) print(io, response);
    else for (const line of teardownLines(allocId, response)) io.stdout.write(`${line}\n`);
  });
}

type AttachOptions = ConnectOptions &
  Json & {
    network: string;
    ifname?: string;
    port?: string[];
    ip?: string[];
    mac?: string;
    cniArg?: string[];
    defaultRoute?: boolean;
  };

/** `alloc attach <alloc-id>` and `alloc detach <alloc-id> <ifname>`: one network more or less. */
function attachCommands(alloc: Command, io: CliIo): void {
  connectOptions(
    alloc
      .command('attach')
      .description('attach one more network to a running allocation, on its own interface')
      .argument('<alloc-id>', 'the allocation id')
      .requiredOption('--network <name>', 'the CNI network to attach')
      .option('--ifname <name>', 'the interface inside the allocation (default: a free net<k>)')
      .option(
        '--port <label:value[:to][@hostip]>',
        'a host port forwarded to this interface (repeat)',
        collect,
      )
      .option('--ip <address>', 'an address to ask the IPAM for (repeat)', collect)
      .option('--mac <address>', 'the interface’s MAC address')
      .option('--cni-arg <K=V>', 'a CNI arg for this network’s plugins (repeat)', collect)
      .option('--default-route', 'keep the default route this network’s plugins add')
      .option('--json', 'print JSON'),
  ).action(async (allocId: string, o: AttachOptions) => {
    const attachment = {
      network: o.network,
      interfaceName: o.ifname ?? '',
      ports: (o.port ?? []).map(parsePort),
      cniArgs: Object.fromEntries((o.cniArg ?? []).map((text) => parseArg(text, '--cni-arg'))),
      ips: o.ip ?? [],
      mac: o.mac ?? '',
      defaultRoute: o.defaultRoute === true,
    };
    const response = await withAgent(o, (agent) =>
      agent.unary(agent.alloc, 'AttachNetwork', { allocId, attachment }),
    );
    if (o.json === true) {
      print(io, response);
      return;
    }
    if (response.status === null) throw new Error('the agent answered without a status');
    for (const line of statusLines(response.status)) io.stdout.write(`${line}\n`);
    if (response.alreadyAttached)
      io.stdout.write('  (already attached with this spec: nothing ran)\n');
  });

  connectOptions(
    alloc
      .command('detach')
      .description('detach a secondary network from a running allocation (never the first)')
      .argument('<alloc-id>', 'the allocation id')
      .argument('<ifname>', 'the interface of the network to detach')
      .option('--json', 'print JSON'),
  ).action(async (allocId: string, ifName: string, o: ConnectOptions & Json) => {
    const response = await withAgent(o, (agent) =>
      agent.unary(agent.alloc, 'DetachNetwork', { allocId, interfaceName: ifName }),
    );
    if (o.json === true) print(io, response);
    else for (const line of detachLines(allocId, ifName, response)) io.stdout.write(`${line}\n`);
  });
}

/** `alloc status <alloc-id>` and `alloc list`: what the agent holds. */
function readCommands(alloc: Command, io: CliIo): void {
  connectOptions(
    alloc
      .command('status')
      .description('an allocation’s network')
      .argument('<alloc-id>', 'the allocation id')
      .option('--json', 'print JSON'),
  ).action(async (allocId: string, o: ConnectOptions & Json) => {
    const response = await withAgent(o, (agent) =>
      agent.unary(agent.alloc, 'GetAllocNetwork', { allocId }),
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
    if (o.json === true) {
      const full = await withAgent(o, (agent) => agent.unary(agent.alloc, 'ListAllocNetworks', {}));
      print(io, full.allocations);
      return;
    }
    const response = await withAgent(o, async (agent) => {
      const { LIST_ROWS } = await import('./list-view.js');
      return agent.unaryView(LIST_ROWS, {});
    });
    if (response.allocations.length === 0) {
      io.stdout.write('no allocations\n');
      return;
    }
    io.stdout.write(formatTable(STATUS_HEADER, statusRows(response.allocations)));
  });
}

/** `alloc check <alloc-id>`: CHECK with the plugins; exits 1 when the network is broken. */
function checkCommand(alloc: Command, io: CliIo): void {
  connectOptions(
    alloc
      .command('check')
      .description('CHECK an allocation’s network with the plugins; exits 1 when it is broken')
      .argument('<alloc-id>', 'the allocation id')
      .option('--json', 'print JSON'),
  ).action(async (allocId: string, o: ConnectOptions & Json) => {
    const response = await withAgent(o, (agent) =>
      agent.unary(agent.alloc, 'CheckAllocNetwork', { allocId }),
    );
    if (o.json === true) print(io, response);
    else if (!response.checkRan)
      io.stdout.write(
        `${allocId}: not checked (${response.problem || 'the network does not support CHECK'})\n`,
      );
    else if (response.healthy) io.stdout.write(`${allocId}: healthy\n`);
    else io.stdout.write(`${allocId}: broken: ${response.problem}\n`);
    if (response.checkRan && !response.healthy) throw reportedFailure('broken');
  });
}

/** `allocnet alloc …`: the scheduler's view of one node, for people. */
export function allocCommand(io: CliIo): Command {
  const alloc = new Command('alloc').description(
    'set up, inspect and tear down allocation networks through the agent',
  );
  setupCommand(alloc, io);
  teardownCommand(alloc, io);
  readCommands(alloc, io);
  checkCommand(alloc, io);
  attachCommands(alloc, io);
  return alloc;
}
