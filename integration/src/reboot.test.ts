// Addresses survive a reboot (issue 28, deliverable 1). What a reboot loses goes away: the agent
// (SIGKILL), the node's bridge and iptables (its namespace deleted and made again), every
// allocation namespace, host-local's reservations (its data dir, a tmpfs by default, emptied);
// the agent's data dir stays. The agent starts again and, at once, 20 new allocations are set up
// 8 at a time while it restores. Every old allocation must come back on exactly its address (v4
// and v6), no address may be given twice, and the old allocations' ports must answer through the
// node. A second case: an address outside the network's new subnet comes back FAILED, named.
// Needs root, iproute2, iptables and containernetworking-plugins; never touches the root namespace.
import { execFile } from 'node:child_process';
import { readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { unary } from '@allocnet/proto';
import { echo, startEchoServer } from '@allocnet/testns';
import { httpGet, outcome, useAgentHost } from './fixtures/agent-host.js';
import type { AgentHost, AgentProcess } from './fixtures/agent-host.js';

const run = promisify(execFile);

let host: AgentHost;

useAgentHost((made) => {
  host = made;
});

const id = (n: number) => `00000000-0000-4000-8000-0000000b${n.toString(16).padStart(4, '0')}`;

function spec(allocId: string, port?: number) {
  return {
    allocId,
    namespace: 'default',
    jobId: 'web',
    groupName: 'g',
    ...(port === undefined ? {} : { ports: [{ label: 'http', value: port, to: 80 }] }),
  };
}

/** The agent's config file: the default network's subnets. */
async function config(subnet: string, ipv6Subnet?: string): Promise<string[]> {
  const file = join(host.dir, `agent-${subnet.replaceAll(/[/:.]/g, '_')}.json`);
  await writeFile(
    file,
    JSON.stringify({
      defaultNetwork: { subnet, ...(ipv6Subnet === undefined ? {} : { ipv6Subnet }) },
    }),
  );
  return ['--config', file];
}

/**
 * What a reboot loses: the agent (SIGKILL), every allocation namespace, the node namespace (its
 * bridge, veths and iptables; made again under the same name, as the lab makes a node), and
 * host-local's reservations.
 */
async function reboot(agent: AgentProcess): Promise<void> {
  agent.child.kill('SIGKILL');
  await agent.exited;
  for (const name of await host.namespaces()) await run('ip', ['netns', 'del', name]);
  const node = host.node.name;
  await run('ip', ['netns', 'del', node]);
  await run('ip', ['netns', 'add', node]);
  await run('ip', ['-n', node, 'link', 'set', 'lo', 'up']);
  await run('nsenter', [
    `--net=${host.node.path}`,
    'sysctl',
    '-q',
    '-w',
    'net.ipv4.ip_forward=1',
    'net.ipv6.conf.all.forwarding=1',
  ]);
  await rm(host.ipamDir, { recursive: true, force: true });
}

async function status(allocId: string) {
  const { status: s } = await unary(host.alloc(), 'GetAllocNetwork', { allocId });
  if (s === null) throw new Error(`no status for ${allocId}`);
  return s;
}

/** Runs `fn` over `items`, `width` at a time. */
async function pool<T, R>(items: readonly T[], width: number, fn: (t: T) => Promise<R>) {
  const out: R[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i] as T);
      }
    }),
  );
  return out;
}

it('gives 30 allocations back exactly their addresses while 20 new ones are set up during the restore', async () => {
  const args = await config('172.26.64.0/20', 'fd42:28::/64');
  let agent = await host.start({ args });
  const old = Array.from({ length: 30 }, (_, i) => id(i));
  await pool(old, 8, (allocId) =>
    unary(host.alloc(), 'SetupAllocNetwork', spec(allocId, 28000 + old.indexOf(allocId)), {
      deadlineMs: 60_000,
    }),
  );
  const before = new Map<string, [string, string]>();
  for (const allocId of old) {
    const s = await status(allocId);
    before.set(allocId, [s.address, s.addressIpv6]);
  }
  expect([...before.values()].every(([v4, v6]) => v4 !== '' && v6 !== '')).toBe(true);

  await reboot(agent);
  agent = await host.start({ args, serving: true });
  // At once, while the restore runs: 20 new allocations, 8 at a time.
  const fresh = Array.from({ length: 20 }, (_, i) => id(100 + i));
  const setups = await pool(fresh, 8, (allocId) =>
    outcome(unary(host.alloc(), 'SetupAllocNetwork', spec(allocId), { deadlineMs: 60_000 })),
  );
  expect(setups).toEqual(fresh.map(() => 'ok'));
  const restored = await agent.waitForLine(
    (l) => l.message === 'restored allocations from the last run',
    90_000,
  );
  expect(restored).toMatchObject({ recreated: 30, failed: 0 });

  const table: string[] = [];
  const after = new Map<string, [string, string]>();
  for (const allocId of old) {
    const s = await status(allocId);
    expect(s.phase).toBe('PHASE_READY');
    after.set(allocId, [s.address, s.addressIpv6]);
    const [v4, v6] = before.get(allocId) ?? ['', ''];
    table.push(`${allocId}  ${v4} ${v6}  ->  ${s.address} ${s.addressIpv6}`);
  }
  process.stderr.write(
    `reboot: restore took ${String(restored.durationMs)} ms; old -> new addresses\n${table.join('\n')}\n`,
  );
  expect(after).toEqual(before);

  const all: string[] = [...after.values()].flat();
  for (const allocId of fresh) {
    const s = await status(allocId);
    all.push(s.address, s.addressIpv6);
  }
  expect(all.length).toBe(100);
  expect(new Set(all).size).toBe(100);

  // The old allocations' ports answer from another host, through the node's DNAT.
  const { netns: client, nodeAddress } = await host.lab.client(host.node);
  for (const n of [0, 14, 29]) {
    const server = await startEchoServer(`${host.netnsPrefix}${id(n)}`, 80);
    try {
      expect(await echo(client.name, 'tcp', nodeAddress, 28000 + n, 'hi')).toBe('tcp:hi');
    } finally {
      await server.stop();
    }
  }

  for (const allocId of [...old, ...fresh])
    expect(await outcome(unary(host.alloc(), 'TeardownAllocNetwork', { allocId }))).toBe('ok');
  expect(await host.namespaces()).toEqual([]);
  expect(
    (await readdir(join(host.ipamDir, 'nomad'))).filter(
      (f) => f !== 'lock' && !f.startsWith('last_'),
    ),
  ).toEqual([]);
  expect(await agent.stop()).toEqual({ code: 0, signal: null });
}, 180_000);

it('reports FAILED, naming the address, an allocation whose subnet changed across the reboot', async () => {
  let agent = await host.start({ args: await config('172.26.64.0/20') });
  const ids = [id(200), id(201)];
  for (const allocId of ids)
    expect(await outcome(unary(host.alloc(), 'SetupAllocNetwork', spec(allocId)))).toBe('ok');
  const addresses = await Promise.all(ids.map(async (allocId) => (await status(allocId)).address));

  await reboot(agent);
  agent = await host.start({ args: await config('10.77.0.0/24') });
  for (const [i, allocId] of ids.entries()) {
    const s = await status(allocId);
    expect(s.phase).toBe('PHASE_FAILED');
    expect(s.error).toContain(`with its recorded address ${addresses[i] ?? ''} failed`);
    expect(s.error).toContain(
      `with its recorded address ${addresses[i] ?? ''} failed: it is outside every range of network "nomad"'s config`,
    );
  }
  const lost = agent
    .lines()
    .filter((l) => l.message === 'restore: the allocation lost its recorded address');
  expect(lost.map((l) => [l.allocId, l.network, l.address]).sort()).toEqual(
    ids.map((allocId, i) => [allocId, 'nomad', addresses[i]]).sort(),
  );
  const metrics = await httpGet(host.node, agent.ready.metrics ?? '', '/metrics');
  expect(metrics.body).toContain('allocnet_restore_addresses_lost_total 2');

  // A new allocation gets an address of the new subnet; the failed ones are torn down cleanly.
  const s = await unary(host.alloc(), 'SetupAllocNetwork', spec(id(202)));
  expect(s.status?.address ?? '').toMatch(/^10\.77\.0\.\d+$/);
  for (const allocId of [...ids, id(202)])
    expect(await outcome(unary(host.alloc(), 'TeardownAllocNetwork', { allocId }))).toBe('ok');
  expect(await host.namespaces()).toEqual([]);
  expect(await agent.stop()).toEqual({ code: 0, signal: null });
}, 120_000);
