// A fleet: three node namespaces on one shared link (a bridge in a "lan" namespace), each running
// its own agent process (nsenter --net=), and a scheduler-like client that places 30 allocations
// with ports across them concurrently over gRPC, checks that every mapped port answers through
// its node's address from a client on the link, tears half down, deletes five allocations'
// namespaces out of band before tearing them down, tears the rest down, and then checks that no
// node kept anything — and that `allocnet fleet leaks` agrees. Needs root and the Debian plugins.

import { execa } from 'execa';
import { unary } from '@allocnet/proto';
import type { AllocNetworkServiceClient } from '@allocnet/proto';
import { echo, requireNetworkTestHost, startEchoServer } from '@allocnet/testns';
import type { TestNetns } from '@allocnet/testns';
import { CLI_MAIN as CLI, PLUGIN_DIR, createAgentHost } from './fixtures/agent-host.js';
import type { AgentHost } from './fixtures/agent-host.js';

const NODES = 3;
const ALLOCS = 30;

let hosts: AgentHost[] = [];

beforeAll(async () => {
  await requireNetworkTestHost(['ip', 'iptables', 'nsenter', `${PLUGIN_DIR}/bridge`]);
});

afterEach(async () => {
  const results = await Promise.allSettled(hosts.map((h) => h.dispose()));
  hosts = [];
  const failed = results.find((r) => r.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
});

/** Runs `tasks` at most `width` at a time. */
async function limited<T>(width: number, tasks: readonly (() => Promise<T>)[]): Promise<T[]> {
  const results: T[] = new Array<T>(tasks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < tasks.length) {
        const i = next++;
        results[i] = await (tasks[i] as () => Promise<T>)();
      }
    }),
  );
  return results;
}

interface Placed {
  readonly allocId: string;
  readonly node: number;
  readonly port: number;
  readonly netns: string;
}

it('places 30 allocations on three agents, serves their ports, and leaves no node with anything', async () => {
  hosts = await Promise.all(Array.from({ length: NODES }, () => createAgentHost()));
  const [first] = hosts;
  if (first === undefined) throw new Error('no host');

  // The shared link: a bridge in its own namespace, each node and a client cabled to it.
  const lan = await first.lab.container('lan');
  await lan.exec(['ip', 'link', 'add', 'br0', 'type', 'bridge']);
  await lan.exec(['ip', 'link', 'set', 'br0', 'up']);
  const cable = async (ns: TestNetns, port: string, address: string) => {
    await first.lab.veth(ns, 'lan0', lan, port);
    await lan.exec(['ip', 'link', 'set', port, 'master', 'br0']);
    await ns.exec(['ip', 'addr', 'add', `${address}/24`, 'dev', 'lan0']);
  };
  const addresses = hosts.map((_, i) => `10.200.0.${i + 1}`);
  await Promise.all(hosts.map((h, i) => cable(h.node, `p${i}`, addresses[i] as string)));
  const client = await first.lab.container('client');
  await cable(client, 'pc', '10.200.0.100');
  await client.exec(['ip', 'link', 'set', 'lo', 'up']);

  await Promise.all(hosts.map((h) => h.start()));
  const allocClients: AllocNetworkServiceClient[] = hosts.map((h) => h.alloc());
  // Warm each node up (bridge, shared chains) so its baseline is what an idle node holds.
  await Promise.all(
    allocClients.map(async (alloc, i) => {
      const allocId = `warm-${i}-${process.pid}`;
      await unary(alloc, 'SetupAllocNetwork', {
        allocId,
        namespace: 'default',
        jobId: 'warm',
        groupName: 'warm',
        ports: [{ label: 'w', value: 29999, to: 80 }],
      });
      await unary(alloc, 'TeardownAllocNetwork', { allocId });
    }),
  );
  const baselines = await Promise.all(hosts.map((h) => h.ruleset()));

  // The scheduler places 30 allocations, 10 per node, all at once.
  const placed: Placed[] = await Promise.all(
    Array.from({ length: ALLOCS }, async (_, i): Promise<Placed> => {
      const node = i % NODES;
      const allocId = `fleet-${process.pid}-${i.toString().padStart(2, '0')}`;
      const port = 30000 + i;
      const { status } = await unary(
        allocClients[node] as AllocNetworkServiceClient,
        'SetupAllocNetwork',
        {
          allocId,
          namespace: 'default',
          jobId: 'web',
          groupName: `g${i}`,
          ports: [{ label: 'http', value: port, to: 80 }],
        },
        { deadlineMs: 120_000 },
      );
      expect(status).toMatchObject({ phase: 'PHASE_READY', attempts: 1 });
      return { allocId, node, port, netns: (status?.netnsPath ?? '').replace('/run/netns/', '') };
    }),
  );

  // Every mapped port answers through its node's address, from the client on the link.
  await limited(
    6,
    placed.map((p) => async () => {
      const server = await startEchoServer(p.netns, 80);
      try {
        const host = addresses[p.node] as string;
        expect(await echo(client.name, 'tcp', host, p.port, p.allocId)).toBe(`tcp:${p.allocId}`);
        expect(await echo(client.name, 'udp', host, p.port, p.allocId)).toBe(`udp:${p.allocId}`);
      } finally {
        await server.stop();
      }
    }),
  );

  const teardown = (p: Placed) =>
    unary(allocClients[p.node] as AllocNetworkServiceClient, 'TeardownAllocNetwork', {
      allocId: p.allocId,
    });
  // Half go the normal way: the audit finds nothing to remove.
  const normal = await Promise.all(placed.slice(0, 15).map(teardown));
  for (const r of normal)
    expect(r.removed).toEqual({ rules: [], chains: [], reservations: [], cacheFiles: [] });
  // Five lose their namespace out of band first: bridge's DEL would leave the masquerade chain;
  // the teardown removes it beside the DEL (native-del.ts), so the audit finds nothing either.
  const lost = placed.slice(15, 20);
  for (const p of lost) await execa('ip', ['netns', 'del', p.netns]);
  const audited = await Promise.all(lost.map(teardown));
  for (const r of audited) {
    expect(r.delError).toBe('');
    expect(r.removed).toEqual({ rules: [], chains: [], reservations: [], cacheFiles: [] });
  }
  // The rest.
  await Promise.all(placed.slice(20).map(teardown));

  for (const [i, h] of hosts.entries()) {
    expect(await h.ruleset()).toEqual(baselines[i]);
    expect(await h.namespaces()).toEqual([]);
    expect(await h.reservations()).toEqual({});
  }
  const fleet = await execa(
    process.execPath,
    [CLI, 'fleet', 'leaks', ...hosts.flatMap((h) => ['--node', h.socket]), '--json'],
    { reject: false },
  );
  expect(fleet.exitCode).toBe(0);
  expect(JSON.parse(fleet.stdout)).toEqual(
    hosts.map((h) => ({
      node: h.socket,
      leakedAllocations: 0,
      rules: 0,
      chains: 0,
      reservations: 0,
      orphanRules: 0,
      orphanChains: 0,
      failed: 0,
    })),
  );
  const table = await execa(process.execPath, [
    CLI,
    'fleet',
    'leaks',
    ...hosts.flatMap((h) => ['--node', h.socket]),
  ]);
  expect(table.stdout.split('\n').at(-1)).toBe('3 node(s), 0 leaked allocation(s) found');
}, 300_000);
