// Several networks per allocation through the real agent (issue 29): a primary bridge network with
// a port, a macvlan network on a veth master whose peer is a client on that LAN, and a second
// bridge with its own subnet, all in one allocation's namespace. Traffic reaches each interface
// from a client on its segment, the port answers on the primary, `ips` and `mac` end on the
// interface as asked, only the primary keeps a default route. A failing attachment rolls back
// every attachment before it; a SIGKILL between two attachments leaves nothing after a restart and
// a teardown; attach and detach work on a running allocation and leave the primary as it was.
// Needs root, iproute2, iptables and containernetworking-plugins; never touches the root namespace.
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { unary } from '@allocnet/proto';
import { echo, startEchoServer } from '@allocnet/testns';
import type { TestNetns } from '@allocnet/testns';
import { execa } from 'execa';
import { PLUGIN_DIR, outcome, useAgentHost } from './fixtures/agent-host.js';
import type { AgentHost } from './fixtures/agent-host.js';
import { writeFailingPlugin } from './fixtures/networks.js';

let host: AgentHost;

useAgentHost((made) => {
  host = made;
});

const JOB = { namespace: 'default', jobId: 'web', groupName: 'api' };
const PORT = 28_500;
const LAN = {
  subnet: '10.77.0.0/24',
  client: '10.77.0.1',
  asked: '10.77.0.150',
  mac: '02:00:00:00:77:01',
};
const STORAGE = { subnet: '10.78.0.0/24', client: '10.78.0.50' };

let seq = 0;
const allocId = () => `00000000-0029-4000-8000-${(++seq).toString(16).padStart(12, '0')}`;

/** Every reservation file under the agent's IPAM dirs (the default network's and the extra ones). */
async function reservations(): Promise<string[]> {
  const out: string[] = [];
  for (const dir of [host.ipamDir, join(host.dir, 'ipam-extra')]) {
    const nets = await readdir(dir).catch(() => [] as string[]);
    for (const net of nets) {
      const names = await readdir(join(dir, net)).catch(() => [] as string[]);
      out.push(...names.filter((n) => /^[0-9a-f.:]+$/.test(n)).map((n) => `${net}/${n}`));
    }
  }
  return out.sort();
}

/**
 * The node's state a setup and its teardown must leave as it was, read once the plugins' shared
 * chains exist (they stay for good once the first setup made them): after one single-network
 * allocation was set up and torn down.
 */
async function baseline() {
  const id = allocId();
  const ports = [{ label: 'http', value: PORT + 1, to: 80 }];
  await unary(
    host.alloc(),
    'SetupAllocNetwork',
    { ...JOB, allocId: id, ports },
    { deadlineMs: 120_000 },
  );
  await unary(host.alloc(), 'TeardownAllocNetwork', { allocId: id }, { deadlineMs: 120_000 });
  return nodeState();
}

async function nodeState() {
  return {
    rules: await host.ruleset(),
    reservations: await reservations(),
    namespaces: await host.namespaces(),
  };
}

/**
 * The two secondary networks' conflists, and the LAN: a veth `lan0` in the node namespace (the
 * macvlan's master) whose peer is a client namespace with LAN.client.
 */
async function secondaryNetworks(): Promise<{ lan: TestNetns }> {
  const lan = await host.lab.container('lan');
  await host.lab.veth(host.node, 'lan0', lan, 'eth0');
  await lan.exec(['ip', 'addr', 'add', `${LAN.client}/24`, 'dev', 'eth0']);
  const ipam = (subnet: string) => ({
    type: 'host-local',
    ranges: [[{ subnet }]],
    dataDir: join(host.dir, 'ipam-extra'),
  });
  await writeFile(
    join(host.confDir, '20-lan.conflist'),
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'lan',
      plugins: [
        { type: 'macvlan', master: 'lan0', mode: 'bridge', capabilities: { ips: true }, ipam: ipam(LAN.subnet) }, // prettier-ignore
        { type: 'tuning', capabilities: { mac: true } },
      ],
    }),
  );
  await writeFile(
    join(host.confDir, '30-storage.conflist'),
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'storage',
      plugins: [
        {
          type: 'bridge',
          bridge: 'stor0',
          isGateway: true,
          ipam: { ...ipam(STORAGE.subnet), routes: [{ dst: '0.0.0.0/0' }] },
        },
      ],
    }),
  );
  return { lan };
}

/** A client on the storage bridge's segment (the bridge exists once a setup made it). */
async function storageClient(): Promise<TestNetns> {
  const client = await host.lab.container('stor');
  await host.lab.veth(host.node, 'to-stor', client, 'eth0');
  await host.node.exec(['ip', 'link', 'set', 'to-stor', 'master', 'stor0']);
  await client.exec(['ip', 'addr', 'add', `${STORAGE.client}/24`, 'dev', 'eth0']);
  return client;
}

/** `ip -j addr show dev <ifName>` inside a namespace path: its MAC and addresses with prefix. */
async function link(
  netnsPath: string,
  ifName: string,
): Promise<{ mac: string; addresses: string[] }> {
  const { stdout } = await execa('nsenter', [`--net=${netnsPath}`, 'ip', '-j', 'addr', 'show', 'dev', ifName]); // prettier-ignore
  const [shown] = JSON.parse(stdout) as { address: string; addr_info: { local: string; prefixlen: number; scope: string }[] }[]; // prettier-ignore
  return {
    mac: shown?.address ?? '',
    addresses: (shown?.addr_info ?? []).filter((a) => a.scope === 'global').map((a) => `${a.local}/${a.prefixlen}`), // prettier-ignore
  };
}

async function defaultRoutes(netnsPath: string): Promise<string[]> {
  const { stdout } = await execa('nsenter', [`--net=${netnsPath}`, 'ip', '-j', 'route', 'show', 'default']); // prettier-ignore
  return (JSON.parse(stdout) as { dev: string }[]).map((r) => r.dev).sort();
}

interface AttachmentStatus {
  network: string;
  interfaceName: string;
  addresses: string[];
  mac: string;
  attached: boolean;
}
interface Status {
  netnsPath: string;
  attachments: AttachmentStatus[];
}

const setup = (request: Record<string, unknown>) =>
  unary(host.alloc(), 'SetupAllocNetwork', { ...JOB, ...request }, { deadlineMs: 120_000 }) as Promise<{ status: Status }>; // prettier-ignore

it('gives one allocation a primary bridge with a port, a macvlan and a second bridge, each reachable on its segment, and takes them all away', async () => {
  const { lan } = await secondaryNetworks();
  await host.start();
  const before = await baseline();
  const id = allocId();
  const { status } = await setup({
    allocId: id,
    ports: [{ label: 'http', value: PORT, to: 80 }],
    attachments: [
      {},
      { network: 'lan', ips: [`${LAN.asked}/24`], mac: LAN.mac },
      { network: 'storage' },
    ],
  });
  expect(status.attachments.map((a) => [a.network, a.interfaceName])).toEqual([
    ['nomad', 'eth0'],
    ['lan', 'net1'],
    ['storage', 'net2'],
  ]);
  const net1 = await link(status.netnsPath, 'net1');
  expect(net1).toEqual({ mac: LAN.mac, addresses: [`${LAN.asked}/24`] });
  expect(status.attachments[1]).toMatchObject({ mac: LAN.mac, addresses: [`${LAN.asked}/24`] });
  const storageAddress = (status.attachments[2]?.addresses[0] ?? '').split('/')[0] ?? '';
  expect((await link(status.netnsPath, 'net2')).addresses).toEqual(
    status.attachments[2]?.addresses,
  );
  // The storage network's own default route was removed: the primary carries the default route.
  expect(await defaultRoutes(status.netnsPath)).toEqual(['eth0']);
  expect(await unary(host.alloc(), 'CheckAllocNetwork', { allocId: id })).toMatchObject({ healthy: true }); // prettier-ignore

  const netnsName = `${host.netnsPrefix}${id}`;
  const servers = [await startEchoServer(netnsName, 80), await startEchoServer(netnsName, 7000)];
  try {
    const { netns: client, nodeAddress } = await host.lab.client(host.node);
    expect(await echo(client.name, 'tcp', nodeAddress, PORT, 'primary')).toBe('tcp:primary');
    expect(await echo(lan.name, 'tcp', LAN.asked, 7000, 'lan')).toBe('tcp:lan');
    const stor = await storageClient();
    expect(await echo(stor.name, 'tcp', storageAddress, 7000, 'storage')).toBe('tcp:storage');
  } finally {
    for (const s of servers) await s.stop();
  }

  await unary(host.alloc(), 'TeardownAllocNetwork', { allocId: id }, { deadlineMs: 120_000 });
  expect(await nodeState()).toEqual(before);
}, 300_000);

it('rolls back every attachment before the one that fails, and names it', async () => {
  await secondaryNetworks();
  const plugins = join(host.dir, 'fault-plugins');
  await writeFailingPlugin(plugins, 'fails-add', { code: 11, msg: 'refused on purpose' });
  await writeFile(
    join(host.confDir, '40-broken.conflist'),
    JSON.stringify({ cniVersion: '1.0.0', name: 'broken', plugins: [{ type: 'fails-add' }] }),
  );
  await host.start({ args: ['--plugin-dir', PLUGIN_DIR, '--plugin-dir', plugins] });
  const before = await baseline();
  const id = allocId();
  const result = await outcome(
    setup({
      allocId: id,
      ports: [{ label: 'http', value: PORT, to: 80 }],
      attachments: [{}, { network: 'lan' }, { network: 'broken' }],
    }),
  );
  expect(result).not.toBe('ok');
  const [, details] = result as [string, string];
  expect(details).toContain('attachment 2');
  expect(details).toContain('"broken"');
  expect(details).toContain('refused on purpose');
  expect(await nodeState()).toEqual(before);
  expect(await unary(host.alloc(), 'ListAllocNetworks', {})).toMatchObject({ allocations: [] });
}, 300_000);

it('after a SIGKILL between two attachments, a restart and a teardown leave the node as it was', async () => {
  await secondaryNetworks();
  const first = await host.start({ env: { ALLOCNET_CRASH_AT: 'setup:after-attachment-intent' } });
  const before = await baseline();
  const id = allocId();
  expect(await outcome(setup({ allocId: id, attachments: [{}, { network: 'lan' }] }))).not.toBe(
    'ok',
  );
  expect((await first.exited).signal).toBe('SIGKILL');

  await host.start();
  await unary(host.alloc(), 'TeardownAllocNetwork', { allocId: id }, { deadlineMs: 120_000 });
  expect(await nodeState()).toEqual(before);
}, 300_000);

it('attaches a network to a running allocation and detaches it, the primary untouched', async () => {
  const { lan } = await secondaryNetworks();
  await host.start();
  const id = allocId();
  await setup({ allocId: id, ports: [{ label: 'http', value: PORT, to: 80 }] });
  const primaryOnly = await nodeState();
  const attachment = { network: 'lan', interfaceName: 'net1', ips: [`${LAN.asked}/24`] };
  const attach = () =>
    unary(host.alloc(), 'AttachNetwork', { allocId: id, attachment }, { deadlineMs: 120_000 }) as Promise<{ status: Status; alreadyAttached: boolean }>; // prettier-ignore
  const attached = await attach();
  expect(attached.alreadyAttached).toBe(false);
  expect(attached.status.attachments.map((a) => [a.interfaceName, a.attached])).toEqual([
    ['eth0', false],
    ['net1', true],
  ]);
  const server = await startEchoServer(`${host.netnsPrefix}${id}`, 7000);
  try {
    expect(await echo(lan.name, 'tcp', LAN.asked, 7000, 'hot')).toBe('tcp:hot');
  } finally {
    await server.stop();
  }
  expect((await attach()).alreadyAttached).toBe(true);

  const detach = (interfaceName: string) =>
    outcome(unary(host.alloc(), 'DetachNetwork', { allocId: id, interfaceName }, { deadlineMs: 120_000 })); // prettier-ignore
  expect(await detach('eth0')).toEqual(['FAILED_PRECONDITION', expect.stringContaining('eth0')]);
  expect(await detach('net1')).toBe('ok');
  expect(await detach('net1')).toEqual(['NOT_FOUND', expect.stringContaining('net1')]);
  expect(await nodeState()).toEqual(primaryOnly);
  await unary(host.alloc(), 'TeardownAllocNetwork', { allocId: id }, { deadlineMs: 120_000 });
}, 300_000);
