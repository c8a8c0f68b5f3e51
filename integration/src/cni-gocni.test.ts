// Nomad's client calls CNI through containerd's go-cni: these tests make those calls with
// tools/gocni-driver (Debian's go-cni 1.1.7, Setup/Remove as Nomad's networking_cni.go makes
// them), run in a throwaway node namespace with `nsenter --net=`. First over Debian's plugins
// directly, which checks the driver and shows what Nomad gets from them today; then through
// allocnet-cni to the agent's CNI server. Needs root, iproute2, iptables,
// containernetworking-plugins and the built driver (`pnpm --filter @allocnet/gocni-driver build`)
// and plugin (`pnpm --filter @allocnet/cni-plugin build`).
//
// go-cni writes libcni's result cache to /var/lib/cni/results on the host (it cannot be moved):
// every id here starts with the test's marker (the lab's prefix, this process, the test's
// number), and afterEach removes any file with the marker that a failing test left.
import { mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { nomadBridgeConflist } from '@allocnet/cni/testing';
import { unary } from '@allocnet/proto';
import { echo, requireNetworkTestHost, startEchoServer } from '@allocnet/testns';
import type { TestClient, TestNetns } from '@allocnet/testns';
import { PLUGIN_DIR, createAgentHost } from './fixtures/agent-host.js';
import type { AgentHost } from './fixtures/agent-host.js';
import {
  ALLOCNET_CNI,
  GOCNI_DRIVER,
  LIBCNI_RESULTS_DIR,
  createGoCniDriver,
  libcniCacheFiles,
  removeLibcniCacheFiles,
} from './fixtures/gocni.js';
import type { GoCniCall, GoCniDriver } from './fixtures/gocni.js';

const SUBNET_ADDRESS = /^172\.26\.(6[4-9]|7\d)\.\d+$/;

let host: AgentHost;
let marker: string;
let tests = 0;

/** An id of this test: what go-cni's cache file names carry. */
const idOf = (label: string) => `${marker}-${label}`;

beforeAll(async () => {
  await requireNetworkTestHost([
    'ip',
    'iptables',
    'nsenter',
    `${PLUGIN_DIR}/bridge`,
    `${PLUGIN_DIR}/portmap`,
    `${PLUGIN_DIR}/firewall`,
    GOCNI_DRIVER,
  ]);
});

beforeEach(async () => {
  // The agent host's node namespace, temp dirs and readings; the agent itself is started only by
  // the tests that go through it.
  host = await createAgentHost();
  marker = `${host.lab.prefix}-${process.pid.toString(36)}-g${(++tests).toString(36)}`;
});

afterEach(async () => {
  try {
    await host.dispose();
  } finally {
    await removeLibcniCacheFiles(marker);
  }
});

/** One allocation with a port set up and removed, so the bridge and shared chains exist; the ruleset then. */
async function warmBaseline(driver: GoCniDriver): Promise<string> {
  const ns = await host.lab.container('warm');
  const call: GoCniCall = { id: idOf('warm'), netns: ns.path, ports: [[19999, 80]] };
  await driver.setup(call);
  await driver.remove(call);
  return host.ruleset();
}

/** Sends tcp and udp from `from` to the node's 8080 and expects the echo server behind it. */
async function expectPortAnswers(from: TestClient, allocNetns: TestNetns): Promise<void> {
  const server = await startEchoServer(allocNetns.name, 80);
  try {
    const { netns, nodeAddress } = from;
    expect(await echo(netns.name, 'tcp', nodeAddress, 8080, 'hello')).toBe('tcp:hello');
    expect(await echo(netns.name, 'udp', nodeAddress, 8080, 'hello')).toBe('udp:hello');
  } finally {
    await server.stop();
  }
}

/** The lines of `after` that `before` does not have. */
function added(before: string, after: string): string[] {
  const had = new Set(before.split('\n'));
  return after.split('\n').filter((l) => !had.has(l));
}

describe("gocni-driver over Debian's plugins (Nomad's bridge network, no allocnet)", () => {
  let driver: GoCniDriver;

  beforeEach(async () => {
    const conflist = join(host.dir, 'nomad.conflist');
    await writeFile(conflist, JSON.stringify(nomadBridgeConflist({ ipamDir: host.ipamDir })));
    driver = createGoCniDriver({ conflist, pluginDirs: [PLUGIN_DIR], node: host.node });
  });

  it("sets up with a port and Nomad's labels; the port answers from a client namespace; Remove restores the node", async () => {
    const baseline = await warmBaseline(driver);
    const from = await host.lab.client(host.node);
    const ns = await host.lab.container('alloc');
    const id = idOf('web');
    const call: GoCniCall = {
      id,
      netns: ns.path,
      ports: [[8080, 80]],
      labels: { NOMAD_JOB_ID: 'web', NOMAD_GROUP_NAME: 'frontend' },
    };

    const attachment = await driver.setup(call);

    expect(attachment).toEqual({
      interface: 'eth0',
      address: expect.stringMatching(SUBNET_ADDRESS) as unknown,
      ms: expect.any(Number) as unknown,
    });
    expect(await host.reservations()).toEqual({ [attachment.address]: id });
    // What go-cni passed the plugins, as libcni cached it.
    expect(await libcniCacheFiles(marker)).toEqual([`nomad-${id}-eth0`]);
    const cached = JSON.parse(
      await readFile(join(LIBCNI_RESULTS_DIR, `nomad-${id}-eth0`), 'utf8'),
    ) as { cniArgs: [string, string][]; capabilityArgs: unknown };
    expect(cached.cniArgs.sort(([a], [b]) => a.localeCompare(b))).toEqual([
      ['IgnoreUnknown', 'true'],
      ['NOMAD_ALLOC_ID', id],
      ['NOMAD_GROUP_NAME', 'frontend'],
      ['NOMAD_JOB_ID', 'web'],
      ['NOMAD_NAMESPACE', 'default'],
      ['NOMAD_REGION', 'global'],
    ]);
    expect(cached.capabilityArgs).toEqual({
      portMappings: [
        { HostPort: 8080, ContainerPort: 80, Protocol: 'tcp', HostIP: '' },
        { HostPort: 8080, ContainerPort: 80, Protocol: 'udp', HostIP: '' },
      ],
    });
    await expectPortAnswers(from, ns);

    expect(await driver.remove(call)).toEqual({ ms: expect.any(Number) as unknown });
    expect(await host.ruleset()).toEqual(baseline);
    expect(await host.reservations()).toEqual({});
    expect(await libcniCacheFiles(marker)).toEqual([]);
  });

  it("Remove after the namespace was deleted succeeds but leaves bridge's masquerade chain (why Nomad has forceCleanup)", async () => {
    const baseline = await warmBaseline(driver);
    const ns = await host.lab.container('alloc');
    const id = idOf('gone');
    const call: GoCniCall = { id, netns: ns.path, ports: [[8080, 80]] };
    const { address } = await driver.setup(call);

    await execa('ip', ['netns', 'del', ns.name]);
    await driver.remove(call);

    // bridge 1.1.1's DEL returns early when the namespace is gone, before it removes its ipMasq
    // rules; go-cni reports success, so Nomad's fallback (which parses exactly these) never runs.
    const leaked = added(baseline, await host.ruleset());
    const chain = /^:(CNI-[0-9a-f]{24}) - \[0:0\]$/.exec(leaked[0] ?? '')?.[1] ?? 'no chain';
    const comment = `-m comment --comment "name: \\"nomad\\" id: \\"${id}\\""`;
    expect(leaked).toEqual([
      `:${chain} - [0:0]`,
      `-A POSTROUTING -s ${address}/32 ${comment} -j ${chain}`,
      `-A ${chain} -d 172.26.64.0/20 ${comment} -j ACCEPT`,
      `-A ${chain} ! -d 224.0.0.0/4 ${comment} -j MASQUERADE`,
    ]);
    // host-local runs first and needs no namespace: the address is back.
    expect(await host.reservations()).toEqual({});
    expect(await libcniCacheFiles(marker)).toEqual([]);
  });

  it('serve: 4 concurrent Setups in one process get 4 addresses; their Removes restore the node', async () => {
    const baseline = await warmBaseline(driver);
    const calls: GoCniCall[] = [];
    for (let i = 0; i < 4; i++) {
      const ns = await host.lab.container(`alloc${i}`);
      calls.push({ id: idOf(`s${i}`), netns: ns.path, ports: [[20000 + i, 80]] });
    }
    const server = driver.serve();
    try {
      const attachments = await Promise.all(calls.map((c) => server.setup(c)));
      const addresses = attachments.map((a) => a.address);
      expect(new Set(addresses).size).toBe(4);
      expect(await host.reservations()).toEqual(
        Object.fromEntries(calls.map((c, i) => [addresses[i], c.id])),
      );
      await Promise.all(calls.map((c) => server.remove(c)));
    } finally {
      await server.close();
    }
    expect(await host.ruleset()).toEqual(baseline);
    expect(await host.reservations()).toEqual({});
    expect(await libcniCacheFiles(marker)).toEqual([]);
  });
});

// Runs once the agent's CNI server (`--cni-socket`, `--cni-queue-dir`) has landed.
describe("Nomad's go-cni calls through allocnet-cni to the agent", () => {
  let driver: GoCniDriver;

  beforeAll(async () => {
    await requireNetworkTestHost([ALLOCNET_CNI, `${PLUGIN_DIR}/loopback`]);
  });

  beforeEach(async () => {
    // The runtime's bin dir: the plugin, and loopback (containerd adds it to every network).
    const bin = join(host.dir, 'bin');
    await mkdir(bin);
    await symlink(ALLOCNET_CNI, join(bin, 'allocnet-cni'));
    await symlink(join(PLUGIN_DIR, 'loopback'), join(bin, 'loopback'));
    const socket = join(host.dir, 'cni.sock');
    const queueDir = join(host.dir, 'q');
    const conflist = join(host.dir, 'allocnet.conflist');
    await writeFile(
      conflist,
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 'allocnet',
        plugins: [{ type: 'allocnet-cni', socket, queueDir, capabilities: { portMappings: true } }],
      }),
    );
    await host.start({ args: ['--cni-socket', socket, '--cni-queue-dir', queueDir] });
    driver = createGoCniDriver({ conflist, pluginDirs: [bin], node: host.node });
  });

  it("Setup with a port and Nomad's labels: the port answers from a client namespace; Remove restores the node", async () => {
    const baseline = await warmBaseline(driver);
    const from = await host.lab.client(host.node);
    const ns = await host.lab.container('alloc');
    const call: GoCniCall = {
      id: idOf('web'),
      netns: ns.path,
      ports: [[8080, 80]],
      labels: { NOMAD_JOB_ID: 'web', NOMAD_GROUP_NAME: 'frontend' },
    };

    const attachment = await driver.setup(call);

    expect(attachment).toEqual({
      interface: 'eth0',
      address: expect.stringMatching(SUBNET_ADDRESS) as unknown,
      ms: expect.any(Number) as unknown,
    });
    // The agent keeps it as an allocation named by the container id, Nomad's allocation id.
    expect(await host.reservations()).toEqual({ [attachment.address]: call.id });
    const { status } = await unary(host.alloc(), 'GetAllocNetwork', { allocId: call.id });
    expect(status).toMatchObject({
      allocId: call.id,
      phase: 'PHASE_READY',
      interfaceName: 'eth0',
      address: attachment.address,
      netnsPath: ns.path,
      netnsCreatedByAgent: false,
      portMappings: [
        { hostPort: 8080, containerPort: 80, protocol: 'tcp', hostIp: '' },
        { hostPort: 8080, containerPort: 80, protocol: 'udp', hostIp: '' },
      ],
    });
    await expectPortAnswers(from, ns);

    await driver.remove(call);
    expect(await unary(host.alloc(), 'ListAllocNetworks', {})).toEqual({ allocations: [] });
    expect(await host.ruleset()).toEqual(baseline);
    expect(await host.reservations()).toEqual({});
    expect(await libcniCacheFiles(marker)).toEqual([]);
  });

  it('16 concurrent Setups (16 namespaces) from one go-cni process all succeed', async () => {
    const baseline = await warmBaseline(driver);
    const calls: GoCniCall[] = [];
    for (let i = 0; i < 16; i++) {
      const ns = await host.lab.container(`alloc${i}`);
      calls.push({ id: idOf(`c${i}`), netns: ns.path, ports: [[20000 + i, 80]] });
    }
    const server = driver.serve();
    try {
      const settled = await Promise.allSettled(calls.map((c) => server.setup(c)));
      const failures = settled.flatMap((s) => (s.status === 'rejected' ? [String(s.reason)] : []));
      expect(failures).toEqual([]);
      const addresses = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value.address] : []));
      expect(new Set(addresses).size).toBe(16);
      for (const a of addresses) expect(a).toMatch(SUBNET_ADDRESS);
      expect(await host.reservations()).toEqual(
        Object.fromEntries(calls.map((c, i) => [addresses[i], c.id])),
      );
      await Promise.all(calls.map((c) => server.remove(c)));
    } finally {
      await server.close();
    }
    expect(await unary(host.alloc(), 'ListAllocNetworks', {})).toEqual({ allocations: [] });
    expect(await host.ruleset()).toEqual(baseline);
    expect(await host.reservations()).toEqual({});
    expect(await libcniCacheFiles(marker)).toEqual([]);
  });

  it("Remove after the namespace was deleted leaves the node's rules and reservations at baseline", async () => {
    const baseline = await warmBaseline(driver);
    const ns = await host.lab.container('alloc');
    const call: GoCniCall = { id: idOf('gone'), netns: ns.path, ports: [[8080, 80]] };
    await driver.setup(call);

    await execa('ip', ['netns', 'del', ns.name]);
    await driver.remove(call);

    expect(await unary(host.alloc(), 'ListAllocNetworks', {})).toEqual({ allocations: [] });
    expect(await host.ruleset()).toEqual(baseline);
    expect(await host.reservations()).toEqual({});
    expect(await libcniCacheFiles(marker)).toEqual([]);
  });
});
