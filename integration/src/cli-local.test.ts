// `allocnet cleanup --local` and `allocnet leaks --local`: the operator's tools for when the agent
// is down, acting on a throwaway node namespace (--host-netns) holding state in exactly the
// plugins' shapes. Needs root; never touches the root namespace.
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { tempDir } from '@allocnet/cni/testing';
import { allocChains } from '@allocnet/cni-configurator';
import { addPluginShapes } from '@allocnet/cni-configurator/testing';
import { createBatch, createIptables } from '@allocnet/iptables-node';
import { createNetnsLab, requireNetworkTestHost } from '@allocnet/testns';
import type { NetnsLab, TestNetns } from '@allocnet/testns';
import { CLI_MAIN as CLI } from './fixtures/agent-host.js';

const LEAKED = '11111111-0000-4000-8000-000000000001';
const LIVE = '22222222-0000-4000-8000-000000000002';

let lab: NetnsLab;
let tmp: Awaited<ReturnType<typeof tempDir>>;
let node: TestNetns;

beforeAll(async () => {
  await requireNetworkTestHost(['ip', 'iptables', 'nsenter']);
});
beforeEach(async () => {
  lab = createNetnsLab();
  tmp = await tempDir();
  node = await lab.node();
});
afterEach(async () => {
  try {
    await lab.dispose();
  } finally {
    await tmp.remove();
  }
});

async function cli(...argv: string[]) {
  const where = [
    '--local',
    '--host-netns',
    node.name,
    '--conf-dir',
    join(tmp.path, 'conf'),
    '--cache-dir',
    join(tmp.path, 'cache'),
    '--ipam-dir',
    join(tmp.path, 'ipam'),
  ];
  return execa(process.execPath, [CLI, ...argv, ...where], { reject: false });
}

it('finds, dry-runs, cleans up and reaps an allocation’s leaked state, and nothing else', async () => {
  const ipt = createIptables({ netns: node.path });
  await ipt.restore(
    createBatch()
      .newChain('filter', 'CNI-FORWARD')
      .newChain('nat', 'CNI-HOSTPORT-DNAT')
      .newChain('nat', 'CNI-HOSTPORT-SETMARK'),
  );
  const baseline = await node.ruleset();
  const batch = createBatch();
  addPluginShapes(batch, {
    network: 'nomad',
    allocId: LEAKED,
    ip: '172.26.64.2',
    ports: [{ host: 8080, container: 80 }],
    firewall: true,
  });
  addPluginShapes(batch, { network: 'nomad', allocId: LIVE, ip: '172.26.64.3', firewall: true });
  await ipt.restore(batch);
  const ipam = join(tmp.path, 'ipam', 'nomad');
  await mkdir(ipam, { recursive: true });
  await writeFile(join(ipam, '172.26.64.2'), `${LEAKED}\r\neth0`);
  await writeFile(join(ipam, '172.26.64.3'), `${LIVE}\r\neth0`);
  const known = join(tmp.path, 'known');
  await writeFile(known, `# alive on this node\n${LIVE}\n\n`);

  const found = await cli('leaks', '--known-file', known, '--json');
  expect(found.exitCode).toBe(0);
  const report = JSON.parse(found.stdout) as {
    leaks: {
      allocId: string;
      networks: string[];
      state: { chains: { chain: string }[]; rules: unknown[]; reservations: unknown[] };
    }[];
  };
  expect(report.leaks.map((l) => l.allocId)).toEqual([LEAKED]);
  const leak = report.leaks[0];
  expect(leak?.networks).toEqual(['nomad']);
  expect(leak?.state.chains.map((c) => c.chain)).toEqual([
    allocChains('nomad', LEAKED).masq,
    allocChains('nomad', LEAKED).dnat,
  ]);
  // The POSTROUTING jump, two DNAT jumps and the two firewall accepts.
  expect(leak?.state.rules).toHaveLength(5);
  expect(leak?.state.reservations).toHaveLength(1);

  const people = await cli('leaks', '--known-file', known);
  expect(people.stdout).toBe(
    [
      'ALLOC ID                              NETWORKS  RULES  CHAINS  RESERVATIONS  CACHE',
      `${LEAKED}  nomad     5      2       1             0`,
      '1 leaked allocation(s); orphans: 0 rule(s), 0 chain(s), 0 reservation(s), 0 cache file(s)',
    ].join('\n'),
  );

  const before = await node.ruleset();
  const dry = await cli('cleanup', LEAKED, '--dry-run');
  expect(dry.exitCode).toBe(0);
  expect(dry.stdout.split('\n')[0]).toBe(
    `${LEAKED}: would remove 5 rule(s), 2 chain(s), 1 reservation(s), 0 cache file(s)`,
  );
  expect(await node.ruleset()).toBe(before);

  const reaped = await cli('leaks', '--reap', '--known-file', known);
  expect(reaped).toMatchObject({
    exitCode: 0,
    stdout:
      'reaped 1 leaked allocation(s); 0 failed; orphans: 0 rule(s), 0 chain(s), 0 reservation(s), 0 cache file(s)',
    stderr: 'reaped 1/1',
  });
  expect(await readdir(ipam)).toEqual(['172.26.64.3']);

  // The live allocation is untouched until an operator cleans it up by id.
  const cleaned = await cli('cleanup', LIVE);
  expect(cleaned.stdout.split('\n')[0]).toBe(
    `${LIVE}: removed 3 rule(s), 1 chain(s), 1 reservation(s), 0 cache file(s)`,
  );
  expect(await node.ruleset()).toBe(baseline);
  expect(await readdir(ipam)).toEqual([]);
  expect((await cli('cleanup', LIVE)).stdout.split('\n')[0]).toBe(
    `${LIVE}: removed 0 rule(s), 0 chain(s), 0 reservation(s), 0 cache file(s)`,
  );
});

it('refuses bad input, naming the problem, and says when the agent is not there', async () => {
  const socket = join(tmp.path, 'no-agent.sock');
  const noAgent = await execa(process.execPath, [CLI, 'leaks', '--address', socket], {
    reject: false,
  });
  expect(noAgent).toMatchObject({
    exitCode: 1,
    stderr: `allocnet: agent ${socket}: UNAVAILABLE: cannot connect (ENOENT); is the agent running? start it with \`allocnet agent\`, or pass --address`,
  });
  const knownWithoutLocal = await execa(
    process.execPath,
    [CLI, 'leaks', '--address', socket, '--known-file', '/dev/null'],
    { reject: false },
  );
  expect(knownWithoutLocal).toMatchObject({
    exitCode: 2,
    stderr: 'allocnet: --known-file goes with --local; the agent knows its own allocations',
  });
  const known = join(tmp.path, 'known');
  await writeFile(known, 'ok-id\nbad id\n');
  const bad = await cli('leaks', '--known-file', known);
  expect(bad).toMatchObject({
    exitCode: 2,
    stderr:
      'allocnet: --known-file line 2 "bad id" has characters other than [a-zA-Z0-9_.-] or starts with one of "_.-"',
  });
  const badId = await cli('cleanup', 'no/slash');
  expect(badId).toMatchObject({ exitCode: 1 });
  expect(badId.stderr).toBe(
    'allocnet: allocId "no/slash" has characters other than [a-zA-Z0-9_.-] or starts with one of "_.-"',
  );
});
