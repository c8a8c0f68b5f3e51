// The agent with its data dir on a full filesystem (issue 16, break 2): a tmpfs of a few MiB
// mounted on the data dir, filled to the last byte by a file. Before the fix the first write ended
// the process (lmdb-js rejected a promise nobody held). Now: a setup or teardown that needs a
// write answers RESOURCE_EXHAUSTED naming the data dir and changes nothing, the agent goes on
// serving reads, survives a restart while full, reports it (GetAgentInfo, `allocnet version`),
// and works again as soon as space is freed. Needs root (mount), iproute2, iptables and
// containernetworking-plugins; never touches the root network namespace. The tmpfs is mounted
// in this process's mount namespace under the test's temp dir and unmounted in afterEach.
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { unary } from '@allocnet/proto';
import { requireNetworkTestHost } from '@allocnet/testns';
import { CLI_MAIN, PLUGIN_DIR, createAgentHost, outcome } from './fixtures/agent-host.js';
import type { AgentHost } from './fixtures/agent-host.js';

const A = '00000000-0000-4000-8000-0000000fd00a';
const B = '00000000-0000-4000-8000-0000000fd00b';

let host: AgentHost;
let mounted = false;

beforeAll(async () => {
  await requireNetworkTestHost(['ip', 'iptables', 'nsenter', 'mount', `${PLUGIN_DIR}/bridge`]);
});

beforeEach(async () => {
  host = await createAgentHost();
  await mkdir(host.dataDir, { recursive: true });
  await execa('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'allocnet-full-disk', host.dataDir]);
  mounted = true;
});

afterEach(async () => {
  try {
    // Lazily: detached at once (so that dispose() can remove the temp dir), freed once an agent
    // a failed test left running has closed its files there.
    if (mounted) await execa('umount', ['-l', host.dataDir]);
    mounted = false;
  } finally {
    await host.dispose();
  }
});

/** Fills the data dir's filesystem: one file written until the write fails with ENOSPC. */
async function fill(): Promise<string> {
  const file = join(host.dataDir, 'filler');
  const dd = await execa('dd', ['if=/dev/zero', `of=${file}`, 'bs=64k'], { reject: false });
  expect(dd.stderr).toContain('No space left on device');
  return file;
}

function spec(allocId: string, hostPort: number) {
  return {
    allocId,
    namespace: 'default',
    jobId: 'web',
    groupName: 'g',
    ports: [{ label: 'http', value: hostPort, to: 80 }],
  };
}

it('a full data dir refuses writes with RESOURCE_EXHAUSTED, keeps serving reads, survives a restart, and recovers', async () => {
  let agent = await host.start();
  expect(await outcome(unary(host.alloc(), 'SetupAllocNetwork', spec(A, 28080)))).toBe('ok');
  const withA = { rules: await host.ruleset(), reservations: await host.reservations() };
  const filler = await fill();

  const noSpace = `the data dir "${host.dataDir}" has no space left (No space left on device`;
  // A setup needs its intent record: refused before anything ran.
  const refused = await outcome(unary(host.alloc(), 'SetupAllocNetwork', spec(B, 28081)));
  expect(refused === 'ok' ? 'ok' : refused[0]).toBe('RESOURCE_EXHAUSTED');
  expect(refused === 'ok' ? '' : refused[1]).toContain(
    `writing the record of allocation "${B}" failed: ${noSpace}`,
  );
  // A teardown needs its intent record too: refused, A untouched.
  const kept = await outcome(unary(host.alloc(), 'TeardownAllocNetwork', { allocId: A }));
  expect(kept === 'ok' ? 'ok' : kept[0]).toBe('RESOURCE_EXHAUSTED');
  expect(await host.ruleset()).toBe(withA.rules);
  expect(await host.reservations()).toEqual(withA.reservations);
  expect(await host.namespaces()).toEqual([`${host.netnsPrefix}${A}`]);

  // Reads go on, and the agent says what is wrong.
  const list = await unary(host.alloc(), 'ListAllocNetworks', {});
  expect(list.allocations.map((a) => [a.allocId, a.phase])).toEqual([[A, 'PHASE_READY']]);
  const info = await unary(host.operator(), 'GetAgentInfo', {});
  expect(info.store).toMatchObject({ writable: false, writeFailures: '2', unremovedRecords: 0 });
  expect(info.store?.problem).toContain(noSpace);
  const version = await execa(process.execPath, [CLI_MAIN, 'version', '--address', host.socket]);
  expect(version.stdout).toContain(`agent's state store is not writable: ${noSpace}`);

  // A restart while full: restore only reads; the agent comes up and still refuses writes.
  expect(await agent.stop()).toEqual({ code: 0, signal: null });
  agent = await host.start();
  const again = await outcome(unary(host.alloc(), 'TeardownAllocNetwork', { allocId: A }));
  expect(again === 'ok' ? 'ok' : again[0]).toBe('RESOURCE_EXHAUSTED');
  expect(agent.child.exitCode).toBeNull();

  // Space comes back: the same calls work.
  await rm(filler);
  expect(await outcome(unary(host.alloc(), 'SetupAllocNetwork', spec(B, 28081)))).toBe('ok');
  expect((await unary(host.operator(), 'GetAgentInfo', {})).store?.writable).toBe(true);
  for (const allocId of [A, B]) {
    expect(await outcome(unary(host.alloc(), 'TeardownAllocNetwork', { allocId }))).toBe('ok');
  }
  expect(await unary(host.alloc(), 'ListAllocNetworks', {})).toEqual({ allocations: [] });
  expect(await host.namespaces()).toEqual([]);
  expect(await host.reservations()).toEqual({});
  expect(await agent.stop()).toEqual({ code: 0, signal: null });
});
