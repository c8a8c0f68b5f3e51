// A SIGKILL while a setup sits in the middle of its plugin chain (issue 16, break 4), under the
// real agent: the chain is bridge (host-local) → firewall → portmap with a "hang" plugin placed
// after the firewall or after portmap. The hang plugin, on ADD of one allocation id, writes down
// its pid and the result it was given, then waits forever; the agent is SIGKILLed then, and
// started again on the same data dir. The firewall's CNI-FORWARD accept rules carry no tag (they
// are found by the container's address), and the DEL that undoes the interrupted setup has no
// result to give the firewall plugin: before the fix they stayed, through restore and a teardown.
// A second allocation in the same network lives through it all: none of its rules may go.
// Needs root, iproute2, iptables and containernetworking-plugins; never touches the root namespace.
import { chmod, mkdir, readFile, readdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { allocChains } from '@allocnet/cni-configurator';
import { unary } from '@allocnet/proto';
import { outcome, PLUGIN_DIR, useAgentHost } from './fixtures/agent-host.js';
import { alive } from './fixtures/proc.js';
import type { AgentHost, AgentProcess } from './fixtures/agent-host.js';

const NETWORK = 'crashnet';
const WARM = '00000000-0000-4000-8000-0000000c0001';
const LIVE = '00000000-0000-4000-8000-0000000c0002';
const CRASHED = '00000000-0000-4000-8000-0000000c0003';

const NO_LEAKS = {
  leaks: [],
  orphans: { rules: [], chains: [], reservations: [], cacheFiles: [] },
  namespaces: [],
};

let host: AgentHost;

useAgentHost((made) => {
  host = made;
});

/**
 * Resolves with the file's text once it exists: polled every 20 ms (a file written by a plugin
 * in another process has no event to wait on), failing after `timeoutMs`.
 */
async function whenWritten(path: string, timeoutMs = 60_000): Promise<string> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await readFile(path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    if (Date.now() > until) throw new Error(`${path} was not written within ${timeoutMs} ms`);
    await delay(20);
  }
}

/**
 * The hang plugin: VERSION answers; ADD of `hangId` writes `{pid, prevResult}` to `marker`
 * (atomically) and waits forever, any other ADD passes its prevResult on; DEL and CHECK exit 0.
 */
function hangPlugin(hangId: string, marker: string): string {
  return `#!${process.execPath}
const { renameSync, writeFileSync } = require('node:fs');
const command = process.env.CNI_COMMAND;
if (command === 'VERSION') {
  process.stdout.write('{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}');
  process.exit(0);
}
let stdin = '';
process.stdin.on('data', (d) => (stdin += d)).on('end', () => {
  if (command !== 'ADD') process.exit(0);
  const conf = JSON.parse(stdin);
  if (process.env.CNI_CONTAINERID !== ${JSON.stringify(hangId)}) {
    process.stdout.write(JSON.stringify(conf.prevResult));
    process.exit(0);
  }
  writeFileSync(${JSON.stringify(`${marker}.tmp`)}, JSON.stringify({ pid: process.pid, prevResult: conf.prevResult }));
  renameSync(${JSON.stringify(`${marker}.tmp`)}, ${JSON.stringify(marker)});
  setInterval(() => {}, 60_000);
});
`;
}

/** iptables-save and ip6tables-save of the node, comments and all. */
async function savedRules(): Promise<string> {
  const [v4, v6] = await Promise.all([
    host.node.exec(['iptables-save']),
    host.node.exec(['ip6tables-save']),
  ]);
  return `${v4.stdout}\n${v6.stdout}`;
}

/** The lines of the node's rules that mention the allocation: its id, chains or addresses. */
async function linesAbout(allocId: string, addresses: readonly string[]): Promise<string[]> {
  const { masq, dnat } = allocChains(NETWORK, allocId);
  const needles = [allocId, masq, dnat];
  for (const a of addresses) needles.push(`${a}/`, `${a}:`, `[${a}]`);
  return (await savedRules()).split('\n').filter((l) => needles.some((n) => l.includes(n)));
}

/** host-local's reservations of the test network: address → allocation id. */
async function reservations(): Promise<Record<string, string>> {
  const dir = join(host.dir, 'ipam-crash', NETWORK);
  const found: Record<string, string> = {};
  for (const name of await readdir(dir)) {
    if (name === 'lock' || name.startsWith('last_reserved_ip')) continue;
    found[name] = (await readFile(join(dir, name), 'utf8')).split(/\r?\n/)[0] ?? '';
  }
  return found;
}

function setupRequest(allocId: string, hostPort: number) {
  return {
    allocId,
    namespace: 'default',
    jobId: 'web',
    groupName: 'g',
    network: NETWORK,
    ports: [{ label: 'http', value: hostPort, to: 80 }],
  };
}

describe.each([
  ['after the firewall plugin', ['bridge', 'firewall', 'hang', 'portmap']],
  ['after the portmap plugin', ['bridge', 'firewall', 'portmap', 'hang']],
])('SIGKILL while a setup hangs %s', (_where, chain) => {
  it('restore and a teardown remove what the plugins added; the other allocation keeps its rules', async () => {
    const plugins = join(host.dir, 'crash-plugins');
    await mkdir(plugins, { recursive: true });
    const marker = join(host.dir, 'hang-marker.json');
    await writeFile(join(plugins, 'hang'), hangPlugin(CRASHED, marker));
    await chmod(join(plugins, 'hang'), 0o755);
    const conf = {
      cniVersion: '1.0.0',
      name: NETWORK,
      plugins: chain.map((type) => {
        switch (type) {
          case 'bridge':
            return {
              type,
              bridge: 'crash0',
              isGateway: true,
              ipMasq: true,
              ipam: {
                type: 'host-local',
                ranges: [[{ subnet: '10.79.1.0/24' }], [{ subnet: 'fd79:1::/64' }]],
                routes: [{ dst: '0.0.0.0/0' }, { dst: '::/0' }],
                dataDir: join(host.dir, 'ipam-crash'),
              },
            };
          case 'portmap':
            return { type, capabilities: { portMappings: true }, snat: true };
          default:
            return { type };
        }
      }),
    };
    // Written whole, then renamed: the agent's conf dir watcher never sees half a file.
    await writeFile(join(host.dir, 'crash.conflist'), JSON.stringify(conf));
    await rename(join(host.dir, 'crash.conflist'), join(host.confDir, '10-crash.conflist'));
    const args = ['--plugin-dir', PLUGIN_DIR, '--plugin-dir', plugins];

    let agent: AgentProcess = await host.start({ args });
    const alloc = host.alloc();
    // The shared chains and the bridge exist from here on: the baseline is the warm node's.
    await unary(alloc, 'SetupAllocNetwork', setupRequest(WARM, 18080));
    await unary(alloc, 'TeardownAllocNetwork', { allocId: WARM });
    const baseline = await host.ruleset();
    const { status: live } = await unary(alloc, 'SetupAllocNetwork', setupRequest(LIVE, 18081));
    const liveAddresses = [live?.address ?? '', live?.addressIpv6 ?? ''];
    expect(liveAddresses).toEqual([
      expect.stringMatching(/^10\.79\.1\.\d+$/),
      expect.stringMatching(/^fd79:1::[0-9a-f]+$/),
    ]);
    const liveReservations = Object.fromEntries(liveAddresses.map((a) => [a, LIVE]));
    const withLive = await host.ruleset();
    expect(await reservations()).toEqual(liveReservations);

    // The setup hangs in the chain; the agent dies under it.
    const setup = outcome(unary(alloc, 'SetupAllocNetwork', setupRequest(CRASHED, 18082)));
    const hung = JSON.parse(await whenWritten(marker)) as {
      pid: number;
      prevResult: { ips: { address: string }[] };
    };
    const addresses = hung.prevResult.ips.map((ip) => ip.address.split('/')[0] ?? '');
    const [v4, v6] = addresses;
    expect(addresses).toEqual([
      expect.stringMatching(/^10\.79\.1\.\d+$/),
      expect.stringMatching(/^fd79:1::[0-9a-f]+$/),
    ]);
    // What the plugins before the hang one added is there: the firewall's rules by address.
    expect(await linesAbout(CRASHED, addresses)).toEqual(
      expect.arrayContaining([
        `-A CNI-FORWARD -d ${v4}/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
        `-A CNI-FORWARD -s ${v4}/32 -j ACCEPT`,
        `-A CNI-FORWARD -d ${v6}/128 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
        `-A CNI-FORWARD -s ${v6}/128 -j ACCEPT`,
      ]),
    );
    expect(await reservations()).toEqual({
      ...liveReservations,
      ...Object.fromEntries(addresses.map((a) => [a, CRASHED])),
    });
    agent.child.kill('SIGKILL');
    expect(await agent.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(await setup).toEqual(['UNAVAILABLE', expect.any(String)]);
    // The plugin runs in a process group of its own: it outlives the agent until its group dies.
    expect(await alive(hung.pid)).toBe(true);
    process.kill(-hung.pid, 'SIGKILL');

    agent = await host.start({ args });
    const restored = await agent.waitForLine((l) => l.message === 'restore finished');
    expect(restored).toMatchObject({ failed: 1, kept: 1 });
    expect(await alive(hung.pid)).toBe(false);
    // (a) After restore: nothing of the crashed setup is left; the live allocation is whole.
    expect(await linesAbout(CRASHED, addresses)).toEqual([]);
    expect(await reservations()).toEqual(liveReservations);
    expect(await host.ruleset()).toBe(withLive);
    const operator = host.operator();
    expect(await unary(operator, 'ListLeaks', {})).toEqual(NO_LEAKS);
    // Restore's undo says what its teardown removed beside the DEL: the firewall's accept rules.
    expect(
      agent.lines().filter((l) => l.message === 'teardown audit removed state the DEL left'),
    ).toEqual([expect.objectContaining({ allocId: CRASHED, rules: 4, chains: 0 })]);
    const { status: failed } = await unary(alloc, 'GetAllocNetwork', { allocId: CRASHED });
    expect([failed?.phase, failed?.error]).toEqual([
      'PHASE_FAILED',
      'setup was interrupted by a restart of the runner; what it had done was undone',
    ]);

    // (b) A teardown of it: known, and nothing left to remove.
    const teardown = await unary(alloc, 'TeardownAllocNetwork', { allocId: CRASHED });
    expect(teardown).toMatchObject({
      wasKnown: true,
      delRan: false,
      delError: '',
      removed: { rules: [], chains: [], reservations: [], cacheFiles: [] },
    });
    expect(await linesAbout(CRASHED, addresses)).toEqual([]);
    expect(await reservations()).toEqual(liveReservations);
    expect(await host.ruleset()).toBe(withLive);
    expect(await unary(operator, 'ListLeaks', {})).toEqual(NO_LEAKS);

    // The live allocation goes as it came: the node is back to its baseline.
    await unary(alloc, 'TeardownAllocNetwork', { allocId: LIVE });
    expect(await linesAbout(LIVE, liveAddresses)).toEqual([]);
    expect(await reservations()).toEqual({});
    expect(await host.ruleset()).toBe(baseline);
    expect(await agent.stop()).toEqual({ code: 0, signal: null });
  });
});
