// A setup beside a big reap (issue 28): the real agent process in a throwaway node namespace
// (`nsenter --net=`), the Debian plugins, clients over its unix socket. Thousands of leaked
// allocations in the plugins' full shape (bridge's masquerade jump and chain, portmap's DNAT
// jumps and CNI-DN chain, the firewall's accepts: what a DEL without its cached result leaves)
// are planted in the node's iptables; ReapLeaks removes them in small batches, and once the first
// batch is done a new allocation is set up. The setup answers before the reap ends (the reap
// guard spares it instead of holding it), its network works and survives the reap (CHECK passes,
// its host port answers), every leak is gone, and once the allocation is torn down the node is
// back at its baseline. The leaks' addresses are the ones host-local hands out first, so the new
// allocation gets an address a leak still has firewall accepts for: the reap removes the leak's
// copies and leaves the allocation's. Needs root, iproute2, iptables and
// containernetworking-plugins; never touches the root network namespace.
import type * as grpc from '@grpc/grpc-js';
import { addPluginShapes } from '@allocnet/cni-configurator/testing';
import { createBatch, createIptables } from '@allocnet/iptables-node';
import { unary } from '@allocnet/proto';
import type { ReapLeaksProgress__Output, SetupAllocNetworkRequest } from '@allocnet/proto';
import { echo, startEchoServer } from '@allocnet/testns';
import { useAgentHost } from './fixtures/agent-host.js';
import type { AgentHost } from './fixtures/agent-host.js';

/** Leaked allocations, and the reap's batch: enough batches that a setup fits in between. */
const LEAKS = 2000;
const BATCH = 100;

const leakId = (i: number) => `1eaced00-0000-4000-8000-${i.toString(16).padStart(12, '0')}`;
const leakIp = (i: number) => `172.26.${64 + Math.floor(i / 250)}.${(i % 250) + 2}`;

let host: AgentHost;

useAgentHost((made) => {
  host = made;
});

function request(allocId: string, extra: SetupAllocNetworkRequest = {}) {
  return { namespace: 'default', jobId: 'web', groupName: 'frontend', ...extra, allocId };
}

/** Every message of a ReapLeaks stream; `onStep` sees each progress step as it comes. */
function reapStream(
  call: grpc.ClientReadableStream<ReapLeaksProgress__Output>,
  onStep: (done: number) => void,
): Promise<ReapLeaksProgress__Output[]> {
  return new Promise((resolve, reject) => {
    const got: ReapLeaksProgress__Output[] = [];
    call.on('data', (m: ReapLeaksProgress__Output) => {
      got.push(m);
      if (m.step !== undefined && m.step !== null) onStep(m.step.done);
    });
    call.on('error', reject);
    call.on('end', () => {
      resolve(got);
    });
  });
}

it(`sets up an allocation beside a reap of ${LEAKS} leaks, its plugins running before the reap ends, and keeps it whole`, async () => {
  // At debug, the agent logs each plugin run: when the setup's plugins ran.
  const agent = await host.start({ args: ['--log-level', 'debug'] });
  const alloc = host.alloc();
  const operator = host.operator();
  // One allocation with a port came and went: the bridge and the shared chains exist.
  const warm = request('00000000-0000-4000-8000-00000000f00d', {
    ports: [{ label: 'warm', value: 19999, to: 80 }],
  });
  await unary(alloc, 'SetupAllocNetwork', warm, { deadlineMs: 60_000 });
  await unary(alloc, 'TeardownAllocNetwork', { allocId: warm.allocId }, { deadlineMs: 60_000 });
  const baseline = await host.ruleset();

  // Planted a few hundred at a time: one iptables-restore of them all outlasts its timeout.
  const ipt = createIptables({ netns: host.node.path, timeoutMs: 120_000 });
  for (let start = 0; start < LEAKS; start += 500) {
    const leaks = createBatch();
    for (let i = start; i < Math.min(LEAKS, start + 500); i++)
      addPluginShapes(leaks, {
        network: 'nomad',
        allocId: leakId(i),
        ip: leakIp(i),
        ports: [{ host: 20000 + i, container: 8080 }],
        firewall: true,
      });
    await ipt.restore(leaks);
  }

  const order: string[] = [];
  const fresh = request('00000000-0000-4000-8000-00000000beef', {
    ports: [{ label: 'http', value: 8080, to: 80 }],
  });
  let setup: Promise<unknown> | undefined;
  const reap = reapStream(operator.ReapLeaks({ batchSize: BATCH }), (done) => {
    if (setup !== undefined) return;
    order.push(`setup asked after ${done}`);
    setup = unary(alloc, 'SetupAllocNetwork', fresh, { deadlineMs: 60_000 }).then(() => {
      order.push('setup answered');
    });
  });
  const messages = await reap.then((m) => {
    order.push('reap ended');
    return m;
  });
  await setup;

  expect(order[0]).toBe(`setup asked after ${BATCH}`);
  expect(order).toContain('setup answered');
  // In the agent, where each call logs its end: the setup ran its plugins while the reap was
  // under way, i.e. it was not held for the whole reap. Its first plugin's ADD is logged before
  // the reap's end. Which of the two calls ends first is not the fence's to say: it depends on
  // how fast the reap's last batches go (a fresh-clone run once saw the reap end first).
  const lines = agent.lines();
  const firstPlugin = lines.findIndex(
    (l) => l.message === 'cni plugin' && l.containerId === fresh.allocId && l.verb === 'ADD',
  );
  const reapEnd = lines.findIndex((l) => l.op === 'reap-leaks');
  expect(firstPlugin).toBeGreaterThanOrEqual(0);
  expect(reapEnd).toBeGreaterThan(firstPlugin);
  const summary = messages.at(-1)?.summary;
  expect(summary?.failed).toEqual([]);
  expect(summary?.reaped.map((l) => l.allocId).sort()).toEqual(
    Array.from({ length: LEAKS }, (_, i) => leakId(i)).sort(),
  );

  // The new allocation's rules are all there after the reap, and its port answers.
  expect(await unary(alloc, 'CheckAllocNetwork', { allocId: fresh.allocId })).toMatchObject({
    healthy: true,
    checkRan: true,
    problem: '',
  });
  const netnsName = `${host.netnsPrefix}${fresh.allocId}`;
  const { netns: client, nodeAddress } = await host.lab.client(host.node);
  const server = await startEchoServer(netnsName, 80);
  try {
    expect(await echo(client.name, 'tcp', nodeAddress, 8080, 'beside')).toBe('tcp:beside');
  } finally {
    await server.stop();
  }
  const left = await unary(operator, 'ListLeaks', {});
  expect([left.leaks, left.orphans?.rules, left.orphans?.chains]).toEqual([[], [], []]);

  await unary(alloc, 'TeardownAllocNetwork', { allocId: fresh.allocId }, { deadlineMs: 60_000 });
  expect(await host.ruleset()).toBe(baseline);
  expect(await host.reservations()).toEqual({});
  expect(await host.namespaces()).toEqual([]);
});
