// An allocation's network namespace removed out of band (`ip netns delete`, as an operator or a
// task driver's cleanup might) at every phase, under the real agent (issue 16): during ADD before
// and after the bridge plugin ran, once the setup is ready, during DEL, while the agent is
// stopped, and a task driver's namespace (`netns_path`) removed before and during a setup. A
// "gate" plugin in the chain stops the chosen CNI command of the chosen allocation until the test
// has removed the namespace. After each: the operation ends in bounded time with success or a
// clear error, the agent still serves, and a teardown leaves the node as the baseline taken after
// a warm-up (no record, namespace, reservation, rule or leak).
//
// One agent serves the whole file (starting one and warming its networks costs seconds): every
// test ends by proving the node is back at the baseline, which is what the next one starts from,
// and each uses its own allocation id. Needs root, iproute2, iptables and
// containernetworking-plugins; never touches the root namespace.
import { chmod, mkdir, readFile, readdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import { execa } from 'execa';
import { agentTarget, unary } from '@allocnet/proto';
import type { SetupAllocNetworkRequest } from '@allocnet/proto';
import { requireNetworkTestHost } from '@allocnet/testns';
import { PLUGIN_DIR, createAgentHost, healthCheck, outcome } from './fixtures/agent-host.js';
import type { AgentHost, AgentProcess } from './fixtures/agent-host.js';

/** The gate runs before the bridge plugin on ADD: bridge meets a namespace already gone. */
const GATE_FIRST = 'gatefirst';
/** The gate runs after bridge, firewall and portmap on ADD, and before them on DEL. */
const GATE_LAST = 'gatelast';
const WARM = '00000000-0000-4000-8000-0000000e00ff';
/** The plugin timeout: far longer than the test holds a gate, so no gate is ever killed. */
const CNI_TIMEOUT_MS = 10_000;
/** Each call's gRPC deadline: a hang shows as DEADLINE_EXCEEDED, not as a stuck test. */
const DEADLINE_MS = 30_000;
/** How long an operation may take once its gate is released (3 ADD attempts, 1–2 s apart). */
const BOUND_MS = 20_000;

const NOTHING = { rules: [], chains: [], reservations: [], cacheFiles: [] };
const NO_LEAKS = { leaks: [], orphans: NOTHING, namespaces: [] };

let host: AgentHost | undefined;
let agent: AgentProcess;
let gates: string;
let args: string[];
let baseline: string;

/** The host, once `beforeAll` made it. */
function node(): AgentHost {
  if (host === undefined) throw new Error('the agent host was not created');
  return host;
}

beforeAll(async () => {
  await requireNetworkTestHost(['ip', 'iptables', 'nsenter', `${PLUGIN_DIR}/bridge`]);
  host = await createAgentHost();
  const plugins = join(host.dir, 'gate-plugins');
  gates = join(host.dir, 'gates');
  await mkdir(plugins, { recursive: true });
  await mkdir(gates, { recursive: true });
  await writeFile(join(plugins, 'gate'), gatePlugin(gates));
  await chmod(join(plugins, 'gate'), 0o755);
  const firewall = { type: 'firewall' };
  const portmap = { type: 'portmap', capabilities: { portMappings: true }, snat: true };
  await writeConflist(GATE_FIRST, 'gf0', '10.79.20.0/24', (bridge) => [
    { type: 'gate' },
    bridge,
    firewall,
    portmap,
  ]);
  await writeConflist(GATE_LAST, 'gl0', '10.79.21.0/24', (bridge) => [
    bridge,
    firewall,
    portmap,
    { type: 'gate' },
  ]);
  args = ['--plugin-dir', PLUGIN_DIR, '--plugin-dir', plugins];
  agent = await startAgent();
  // Each network's bridge and the shared chains exist from here on: the baseline is the warm
  // node's.
  for (const network of [GATE_FIRST, GATE_LAST]) {
    await unary(host.alloc(), 'SetupAllocNetwork', request(WARM, network));
    await unary(host.alloc(), 'TeardownAllocNetwork', { allocId: WARM });
  }
  baseline = await host.ruleset();
});

afterAll(async () => {
  await host?.dispose();
});

function startAgent(): Promise<AgentProcess> {
  return node().start({ args, env: { ALLOCNET_CNI_TIMEOUT_MS: String(CNI_TIMEOUT_MS) } });
}

/** A network of bridge (host-local under the host's IPAM dir) and the gate, in `chain`'s order. */
async function writeConflist(
  name: string,
  bridgeName: string,
  subnet: string,
  chain: (bridge: Record<string, unknown>) => Record<string, unknown>[],
): Promise<void> {
  const { dir, confDir, ipamDir } = node();
  const bridge = {
    type: 'bridge',
    bridge: bridgeName,
    isGateway: true,
    ipMasq: true,
    ipam: { type: 'host-local', ranges: [[{ subnet }]], dataDir: ipamDir },
  };
  // Written whole, then renamed: the agent's conf dir watcher never sees half a file.
  await writeFile(
    join(dir, `${name}.conflist`),
    JSON.stringify({ cniVersion: '1.0.0', name, plugins: chain(bridge) }),
  );
  await rename(join(dir, `${name}.conflist`), join(confDir, `10-${name}.conflist`));
}

/**
 * The gate plugin. VERSION answers. Any other command for container `<id>` takes the file
 * `arm-<COMMAND>-<id>` from `dir` if it is there (so it stops once, not on every ADD attempt),
 * writes `entered-<COMMAND>-<id>` (atomically) and waits until `release-<COMMAND>-<id>` exists.
 * Then, or at once when not armed, it answers: ADD prints its prevResult (the first plugin of a
 * chain has none: an empty result), other commands print nothing; exit 0.
 */
function gatePlugin(dir: string): string {
  return `#!${process.execPath}
const { existsSync, renameSync, unlinkSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const dir = ${JSON.stringify(dir)};
const command = process.env.CNI_COMMAND;
if (command === 'VERSION') {
  process.stdout.write('{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}');
  process.exit(0);
}
let stdin = '';
process.stdin.on('data', (d) => (stdin += d)).on('end', () => {
  const key = command + '-' + process.env.CNI_CONTAINERID;
  const answer = () => {
    if (command === 'ADD') {
      const conf = JSON.parse(stdin);
      process.stdout.write(JSON.stringify(conf.prevResult ?? { cniVersion: conf.cniVersion }));
    }
    process.exit(0);
  };
  try {
    unlinkSync(join(dir, 'arm-' + key));
  } catch (error) {
    if (error.code === 'ENOENT') return answer();
    throw error;
  }
  writeFileSync(join(dir, 'entered-' + key + '.tmp'), String(process.pid));
  renameSync(join(dir, 'entered-' + key + '.tmp'), join(dir, 'entered-' + key));
  const release = join(dir, 'release-' + key);
  const poll = setInterval(() => {
    if (existsSync(release)) {
      clearInterval(poll);
      answer();
    }
  }, 20);
});
`;
}

/**
 * Resolves once the file exists: polled every 20 ms (a file written by a plugin in another
 * process has no event to wait on), failing after `timeoutMs`.
 */
async function whenWritten(path: string, timeoutMs = DEADLINE_MS): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      await readFile(path, 'utf8');
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    if (Date.now() > until) throw new Error(`${path} was not written within ${timeoutMs} ms`);
    await delay(20);
  }
}

interface Gate {
  /** Resolves when the plugin stopped at the gate. */
  readonly entered: Promise<void>;
  /** Lets it go on; returns the time it did, for `within`. */
  release(): Promise<number>;
}

/** Arms the gate for `command` of `allocId` (the next such call stops there). */
async function arm(command: 'ADD' | 'DEL', allocId: string): Promise<Gate> {
  const key = `${command}-${allocId}`;
  await writeFile(join(gates, `arm-${key}`), '');
  return {
    entered: whenWritten(join(gates, `entered-${key}`)),
    async release() {
      await writeFile(join(gates, `release-${key}`), '');
      return Date.now();
    },
  };
}

function request(
  allocId: string,
  network: string,
  extra: SetupAllocNetworkRequest = {},
): SetupAllocNetworkRequest & { allocId: string } {
  return {
    allocId,
    namespace: 'default',
    jobId: 'web',
    groupName: 'g',
    network,
    ports: [{ label: 'http', value: 18080, to: 80 }],
    ...extra,
  };
}

function setup(allocId: string, network: string, extra: SetupAllocNetworkRequest = {}) {
  return outcome(
    unary(node().alloc(), 'SetupAllocNetwork', request(allocId, network, extra), {
      deadlineMs: DEADLINE_MS,
    }),
  );
}

function teardown(allocId: string) {
  return unary(node().alloc(), 'TeardownAllocNetwork', { allocId }, { deadlineMs: DEADLINE_MS });
}

/** The name and path of the namespace the agent makes for `allocId`. */
function agentNetns(allocId: string): { name: string; path: string } {
  const name = `${node().netnsPrefix}${allocId}`;
  return { name, path: `/run/netns/${name}` };
}

/** Removes a namespace out of band, as an operator would. */
async function removeNetns(name: string): Promise<void> {
  await execa('ip', ['netns', 'delete', name]);
}

/** host-local's reservations in both networks: `<network>/<address>` → allocation id. */
async function reservations(): Promise<Record<string, string>> {
  const { ipamDir } = node();
  const found: Record<string, string> = {};
  for (const network of [GATE_FIRST, GATE_LAST]) {
    let names: string[];
    try {
      names = await readdir(join(ipamDir, network));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw error;
    }
    for (const name of names) {
      if (name === 'lock' || name.startsWith('last_reserved_ip')) continue;
      const owner = (await readFile(join(ipamDir, network, name), 'utf8')).split(/\r?\n/)[0];
      found[`${network}/${name}`] = owner ?? '';
    }
  }
  return found;
}

/** `call`'s value, once it came within `BOUND_MS` of `since` (no hang). */
async function within<T>(since: number, call: Promise<T>): Promise<T> {
  const value = await call;
  expect(Date.now() - since).toBeLessThan(BOUND_MS);
  return value;
}

/** The agent process is alive and its gRPC health says SERVING. */
async function expectServing(): Promise<void> {
  expect({ exitCode: agent.child.exitCode, signal: agent.child.signalCode }).toEqual({
    exitCode: null,
    signal: null,
  });
  expect(await healthCheck(agentTarget(node().socket), grpc.credentials.createInsecure())).toBe(
    'SERVING',
  );
}

/** The node as the baseline: no allocation, namespace, reservation, rule or leak. */
async function expectBaseline(): Promise<void> {
  const h = node();
  expect(await unary(h.alloc(), 'ListAllocNetworks', {})).toEqual({ allocations: [] });
  expect(await h.namespaces()).toEqual([]);
  expect(await reservations()).toEqual({});
  expect(await h.reservations()).toEqual({});
  expect(await h.ruleset()).toBe(baseline);
  expect(await unary(h.operator(), 'ListLeaks', {})).toEqual(NO_LEAKS);
}

/**
 * The failure of a setup whose namespace the agent made and someone removed while the plugins
 * ran: the runner looks for the namespace after a failed (or successful) ADD and says so rather
 * than the plugin's words.
 */
function goneAtAdd(allocId: string, netnsPath: string): [string, string] {
  return [
    'INTERNAL',
    `setup of allocation "${allocId}" failed: namespace "${netnsPath}" was removed while the setup ran`,
  ];
}

it('during ADD, before the bridge plugin: the setup fails naming the namespace and leaves nothing', async () => {
  const allocId = '00000000-0000-4000-8000-0000000e0001';
  const netns = agentNetns(allocId);
  const gate = await arm('ADD', allocId);
  const call = setup(allocId, GATE_FIRST);
  await gate.entered;
  expect(await node().namespaces()).toEqual([netns.name]);
  await removeNetns(netns.name);
  const released = await gate.release();

  expect(await within(released, call)).toEqual(goneAtAdd(allocId, netns.path));
  await expectServing();
  // The rollback left nothing; the teardown has nothing to do.
  await expectBaseline();
  expect(await within(Date.now(), teardown(allocId))).toEqual({
    wasKnown: false,
    delRan: false,
    delError: '',
    removed: NOTHING,
  });
  await expectBaseline();
});

it('during ADD, after bridge, firewall and portmap ran: every plugin succeeded, yet the setup fails and is rolled back', async () => {
  const allocId = '00000000-0000-4000-8000-0000000e0002';
  const netns = agentNetns(allocId);
  const gate = await arm('ADD', allocId);
  const call = setup(allocId, GATE_LAST);
  await gate.entered;
  await removeNetns(netns.name);
  const released = await gate.release();

  // Every plugin answered ADD, in a namespace that is gone: an allocation reported ready there
  // would have no network. (Before the runner looked, this answered OK and only a CHECK told.)
  expect(await within(released, call)).toEqual(goneAtAdd(allocId, netns.path));
  await expectServing();
  // The rollback's audit removed what bridge's DEL could not find without the namespace.
  await expectBaseline();
  expect(await within(Date.now(), teardown(allocId))).toEqual({
    wasKnown: false,
    delRan: false,
    delError: '',
    removed: NOTHING,
  });
  await expectBaseline();
});

it('after the setup is ready: CHECK reports it unhealthy naming the namespace, the teardown removes all', async () => {
  const allocId = '00000000-0000-4000-8000-0000000e0003';
  const netns = agentNetns(allocId);
  expect(await setup(allocId, GATE_LAST)).toBe('ok');
  const { status } = await unary(node().alloc(), 'GetAllocNetwork', { allocId });
  const address = status?.address ?? '';
  expect(await unary(node().alloc(), 'CheckAllocNetwork', { allocId })).toMatchObject({
    healthy: true,
    problem: '',
  });
  await removeNetns(netns.name);

  expect(
    await within(Date.now(), unary(node().alloc(), 'CheckAllocNetwork', { allocId })),
  ).toMatchObject({
    healthy: false,
    checkRan: true,
    // bridge's CHECK is done by the configurator itself (check-plugins.ts); the plugin said
    // `failed to open netns "<path>": failed to Statfs "<path>": no such file or directory`.
    problem: `check of allocation "${allocId}" failed: CHECK of "${allocId}" in network "${GATE_LAST}" failed: the sandbox "${netns.path}" cannot be opened: it does not exist`,
    status: { phase: 'PHASE_READY', netnsPath: netns.path, address },
  });
  await expectServing();
  expect(await within(Date.now(), teardown(allocId))).toEqual({
    wasKnown: true,
    delRan: true,
    delError: '',
    // bridge's DEL, without the namespace, cannot learn the addresses to un-masquerade and
    // leaves that chain; the teardown removes it beside the DEL (native-del.ts), so the audit
    // finds nothing left.
    removed: NOTHING,
  });
  await expectServing();
  await expectBaseline();
});

it('during DEL, before bridge’s DEL: the teardown succeeds and removes all', async () => {
  const allocId = '00000000-0000-4000-8000-0000000e0004';
  const netns = agentNetns(allocId);
  expect(await setup(allocId, GATE_LAST)).toBe('ok');
  const gate = await arm('DEL', allocId);
  const call = teardown(allocId);
  await gate.entered;
  await removeNetns(netns.name);
  const released = await gate.release();

  expect(await within(released, call)).toEqual({
    wasKnown: true,
    delRan: true,
    delError: '',
    // bridge's DEL, without the namespace, cannot learn the addresses to un-masquerade and
    // leaves that chain; the teardown removes it beside the DEL (native-del.ts), so the audit
    // finds nothing left.
    removed: NOTHING,
  });
  await expectServing();
  await expectBaseline();
});

it('while the agent is stopped: restore sets it up again in the same namespace path, with its address', async () => {
  const allocId = '00000000-0000-4000-8000-0000000e0005';
  const netns = agentNetns(allocId);
  const { status: before } = await unary(
    node().alloc(),
    'SetupAllocNetwork',
    request(allocId, GATE_LAST),
  );
  expect(await agent.stop()).toEqual({ code: 0, signal: null });
  await removeNetns(netns.name);
  expect(await node().namespaces()).toEqual([]);

  const started = Date.now();
  agent = await startAgent();
  expect(
    await within(
      started,
      agent.waitForLine((l) => l.message === 'restore finished'),
    ),
  ).toMatchObject({ recreated: 1, kept: 0, failed: 0, error: 0 });
  expect(
    agent.lines().filter((l) => l.message === 'restore: setting the allocation up again'),
  ).toEqual([expect.objectContaining({ allocId, reason: `namespace "${netns.path}" is gone` })]);
  await expectServing();
  // The namespace is made again under its old name; the allocation has its old address.
  expect(await node().namespaces()).toEqual([netns.name]);
  const { status: after } = await unary(node().alloc(), 'GetAllocNetwork', { allocId });
  expect(after).toMatchObject({
    phase: 'PHASE_READY',
    netnsPath: netns.path,
    netnsCreatedByAgent: true,
    address: before?.address,
    error: '',
  });
  expect(await unary(node().alloc(), 'CheckAllocNetwork', { allocId })).toMatchObject({
    healthy: true,
    checkRan: true,
    problem: '',
  });

  // Restore's undo removed what the gone namespace kept bridge's DEL from removing; the DEL of
  // the allocation set up again leaves nothing to the audit.
  expect(await within(Date.now(), teardown(allocId))).toEqual({
    wasKnown: true,
    delRan: true,
    delError: '',
    removed: NOTHING,
  });
  await expectServing();
  await expectBaseline();
});

it('a given netns_path removed before the setup (INVALID_ARGUMENT naming it) and during ADD (fails, leaves nothing)', async () => {
  const allocId = '00000000-0000-4000-8000-0000000e0006';
  // A namespace made as a task driver would; named with the host's prefix so that the host's
  // dispose removes it if the test fails half-way.
  const given = `${node().netnsPrefix}given-6`;
  const netnsPath = `/run/netns/${given}`;
  await execa('ip', ['netns', 'add', given]);
  await removeNetns(given);

  expect(await within(Date.now(), setup(allocId, GATE_FIRST, { netnsPath }))).toEqual([
    'INVALID_ARGUMENT',
    `netns_path "${netnsPath}" is not a network namespace`,
  ]);
  await expectServing();
  await expectBaseline();

  await execa('ip', ['netns', 'add', given]);
  const gate = await arm('ADD', allocId);
  const call = setup(allocId, GATE_FIRST, { netnsPath });
  await gate.entered;
  await removeNetns(given);
  const released = await gate.release();

  // The task driver's namespace went away: its path is no longer one, as in the first case.
  expect(await within(released, call)).toEqual([
    'INVALID_ARGUMENT',
    `netns_path "${netnsPath}" is not a network namespace: it was removed while the setup ran`,
  ]);
  await expectServing();
  await expectBaseline();
  expect(await within(Date.now(), teardown(allocId))).toEqual({
    wasKnown: false,
    delRan: false,
    delError: '',
    removed: NOTHING,
  });
  await expectBaseline();
});
