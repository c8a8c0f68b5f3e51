// The agent with its data dir on a full filesystem (issue 16, break 2): a tmpfs of a few MiB
// mounted on the data dir, filled to the last byte by a file. Before the fix the first write ended
// the process (lmdb-js rejected a promise nobody held). Now: a setup or teardown that needs a
// write answers RESOURCE_EXHAUSTED naming the data dir and changes nothing, the agent goes on
// serving reads, survives a restart while full, reports it (GetAgentInfo, `allocnet version`),
// and works again as soon as space is freed. LMDB never meets the full disk itself (its failed page
// write can abort the process, docs/reliability.md): the agent's stderr never holds its `Write
// error`, and the store alone, with its gate blinded, writes into the room allocated ahead of its
// file or is refused before LMDB tries.
//
// Nothing left by a full disk or a crash (issue 28): with the CNI cache on a tmpfs of its own
// filled up, setups fail at their ADD marker and leave no temporary; the data dir's tree is the
// same after the space is freed and everything torn down. After a SIGKILL with setups in flight,
// a restart, a teardown of all and `allocnet leaks --reap --local`, no temporary is left; one a
// killed writer left is reported by `allocnet leaks` and removed by the agent's start sweep.
//
// Needs root (mount), iproute2, iptables and containernetworking-plugins; never touches the root
// network namespace. The tmpfs are mounted in this process's mount namespace under the test's
// temp dir and unmounted in afterEach.
import { spawnSync } from 'node:child_process';
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { unary } from '@allocnet/proto';
import { requireNetworkTestHost } from '@allocnet/testns';
import { CLI_MAIN, PLUGIN_DIR, createAgentHost, outcome } from './fixtures/agent-host.js';
import type { AgentHost } from './fixtures/agent-host.js';

const STORE_CHILD = fileURLToPath(new URL('./fixtures/store-child.mjs', import.meta.url));

const A = '00000000-0000-4000-8000-0000000fd00a';
const B = '00000000-0000-4000-8000-0000000fd00b';

let host: AgentHost;
let mounted = false;
/** Mounted inside the data dir's tmpfs, unmounted before it. */
let inner: string | undefined;

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
    if (inner !== undefined) await execa('umount', ['-l', inner]);
    inner = undefined;
    if (mounted) await execa('umount', ['-l', host.dataDir]);
    mounted = false;
  } finally {
    await host.dispose();
  }
});

/** Fills the filesystem of `dir`: one file written until the write fails with ENOSPC. */
async function fill(dir = host.dataDir): Promise<string> {
  const file = join(dir, 'filler');
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
  // Both at once, so that a failure shows the status and what the agent said.
  expect(refused).toEqual([
    'RESOURCE_EXHAUSTED',
    expect.stringContaining(`writing the record of allocation "${B}" failed: ${noSpace}`),
  ]);
  // A teardown needs its intent record too: refused, A untouched.
  const kept = await outcome(unary(host.alloc(), 'TeardownAllocNetwork', { allocId: A }));
  expect(kept === 'ok' ? 'ok' : kept[0]).toBe('RESOURCE_EXHAUSTED');
  expect(await host.ruleset()).toBe(withA.rules);
  expect(await host.reservations()).toEqual(withA.reservations);
  expect(await host.namespaces()).toEqual([`${host.netnsPrefix}${A}`]);
  // Refused before LMDB tried: its failed page write prints this, and can end the agent.
  expect(agent.stderr()).not.toContain('Write error');

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
  expect(agent.stderr()).not.toContain('Write error');

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

it('a disk that fills after the gate looked never reaches LMDB: a write lands in the room allocated ahead, or is refused before LMDB tries it', async () => {
  // The store alone, in a process of its own, its gate told there is always room (store-child.mjs).
  const child = await execa(process.execPath, [STORE_CHILD, host.dataDir], { reject: false });
  const steps = child.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const noSpace = `the data dir "${host.dataDir}" has no space left (No space left on device: allocating `;
  expect(steps).toEqual([
    { step: 'put a', ok: true },
    { step: 'fill', ok: true },
    // On the full disk: into the blocks allocated ahead of LMDB's file.
    { step: 'put b', ok: true },
    // Larger than what is allocated ahead: its allocation fails, LMDB never sees it.
    {
      step: 'put c',
      ok: false,
      code: 'store-full',
      error: expect.stringContaining(
        `writing the record of allocation "c" failed: ${noSpace}`,
      ) as unknown,
    },
    {
      step: 'health',
      ok: true,
      health: expect.objectContaining({ writable: false, writeFailures: 1 }) as unknown,
    },
    { step: 'reopen', ok: true, ids: ['a', 'b'] },
  ]);
  // LMDB prints this when a page write fails, and may then abort (docs/reliability.md).
  expect([child.exitCode, child.signal, child.stderr]).toEqual([0, undefined, '']);
});

/** Every path under `dir` (directories with a trailing slash), relative, sorted: no sizes. */
async function tree(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .map((e) => `${relative(dir, join(e.parentPath, e.name))}${e.isDirectory() ? '/' : ''}`)
    .sort();
}

function allocId(n: number): string {
  return `00000000-0000-4000-8000-0000000fd${n.toString(16).padStart(3, '0')}`;
}

/**
 * The ruleset of the node with no allocation, after a first setup and teardown: the plugins keep
 * their shared chains (CNI-FORWARD, CNI-HOSTPORT-*) once made.
 */
async function warmBaseline(): Promise<string> {
  const id = allocId(0xfff);
  expect(await outcome(unary(host.alloc(), 'SetupAllocNetwork', spec(id, 28999)))).toBe('ok');
  expect(await outcome(unary(host.alloc(), 'TeardownAllocNetwork', { allocId: id }))).toBe('ok');
  return host.ruleset();
}

/** `allocnet` on this host's node, without the agent. */
function localCli(...argv: string[]) {
  return execa(
    process.execPath,
    [
      CLI_MAIN,
      ...argv,
      '--local',
      '--host-netns',
      host.node.name,
      '--conf-dir',
      host.confDir,
      '--cache-dir',
      join(host.dataDir, 'cni'),
      '--ipam-dir',
      host.ipamDir,
    ],
    { reject: false },
  );
}

it('a full CNI cache fails setups at their ADD marker and leaves no temporary: the tree is as before once freed and torn down', async () => {
  inner = join(host.dataDir, 'cni');
  await mkdir(inner);
  await execa('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'allocnet-full-cache', inner]);
  const agent = await host.start();
  const baseline = await warmBaseline();
  const [A, B] = [allocId(1), allocId(2)];
  for (const [id, port] of [
    [A, 28080],
    [B, 28081],
  ] as const)
    expect(await outcome(unary(host.alloc(), 'SetupAllocNetwork', spec(id, port)))).toBe('ok');
  const before = await tree(host.dataDir);
  expect(before).toContain(`cni/results/nomad-${A}-eth0`);
  const filler = await fill(inner);

  const failed = [3, 4, 5].map(allocId);
  for (const [i, id] of failed.entries()) {
    const answer = await outcome(unary(host.alloc(), 'SetupAllocNetwork', spec(id, 28090 + i)));
    expect(answer === 'ok' ? 'ok' : answer[0]).toBe('INTERNAL');
    expect(answer === 'ok' ? '' : answer[1]).toContain(
      `writing the ADD marker of nomad-${id}-eth0: ENOSPC: no space left on device`,
    );
  }
  // The agent serves on: reads, and a teardown.
  const list = await unary(host.alloc(), 'ListAllocNetworks', {});
  expect(list.allocations.filter((a) => a.phase === 'PHASE_READY').map((a) => a.allocId)).toEqual([
    A,
    B,
  ]);
  expect(await outcome(unary(host.alloc(), 'TeardownAllocNetwork', { allocId: B }))).toBe('ok');
  expect((await tree(inner)).filter((p) => p.endsWith('.tmp'))).toEqual([]);

  await rm(filler);
  const records = (await unary(host.alloc(), 'ListAllocNetworks', {})).allocations;
  for (const { allocId: id } of records)
    expect([
      id,
      await outcome(unary(host.alloc(), 'TeardownAllocNetwork', { allocId: id })),
    ]).toEqual([id, 'ok']);
  const gone = new Set([`cni/results/nomad-${A}-eth0`, `cni/results/nomad-${B}-eth0`]);
  expect(await tree(host.dataDir)).toEqual(before.filter((p) => !gone.has(p)));
  expect(await host.ruleset()).toBe(baseline);
  expect(await host.namespaces()).toEqual([]);
  expect(await host.reservations()).toEqual({});
  expect(await agent.stop()).toEqual({ code: 0, signal: null });
});

it('after a SIGKILL with setups in flight no temporary outlives the restart, a teardown of all and a reap; a stale one is reported, then swept at start', async () => {
  let agent = await host.start();
  const baseline = await warmBaseline();
  const ids = Array.from({ length: 40 }, (_, i) => allocId(0x100 + i));
  // Killed once a few have answered: the others are anywhere in their setup.
  let answered = 0;
  let killNow: () => void = () => undefined;
  const fewAnswered = new Promise<void>((resolve) => {
    killNow = resolve;
  });
  const calls = ids.map((id, i) =>
    outcome(unary(host.alloc(), 'SetupAllocNetwork', spec(id, 28100 + i))).finally(() => {
      if (++answered === 5) killNow();
    }),
  );
  await fewAnswered;
  agent.child.kill('SIGKILL');
  expect(await agent.exited).toEqual({ code: null, signal: 'SIGKILL' });
  await Promise.all(calls);
  expect(answered).toBe(ids.length);

  // A temporary a killed writer left, planted while no agent runs: `allocnet leaks` reports it.
  const adding = join(host.dataDir, 'cni', 'allocnet', 'adding');
  await mkdir(adding, { recursive: true });
  const stale = join(adding, `.nomad-${allocId(0x200)}-eth0.${spawnSync('true').pid}.0badcafe.tmp`);
  await writeFile(stale, '');
  const found = await localCli('leaks', '--json');
  expect(found.exitCode).toBe(0);
  const report = JSON.parse(found.stdout) as { orphans: { cacheFiles: string[] } };
  expect(report.orphans.cacheFiles).toContain(stale);

  // The start sweep removes it (and any the kill left).
  agent = await host.start();
  expect((await tree(host.dataDir)).filter((p) => p.endsWith('.tmp'))).toEqual([]);
  const swept = await agent.waitForLine(
    (l) => l.message === 'removed the temporaries of interrupted writes',
  );
  expect(swept.count).toBeGreaterThanOrEqual(1);

  const records = (await unary(host.alloc(), 'ListAllocNetworks', {})).allocations;
  for (const { allocId: id } of records)
    expect([
      id,
      await outcome(unary(host.alloc(), 'TeardownAllocNetwork', { allocId: id })),
    ]).toEqual([id, 'ok']);
  expect(await agent.stop()).toEqual({ code: 0, signal: null });
  const reaped = await localCli('leaks', '--reap');
  expect([reaped.exitCode, reaped.stderr]).toEqual([0, '']);
  const left = await tree(host.dataDir);
  expect(left.filter((p) => p.endsWith('.tmp') || p.startsWith('cni/results/nomad'))).toEqual([]);
  expect(left.filter((p) => p.startsWith('cni/allocnet/adding/nomad'))).toEqual([]);
  expect(await host.ruleset()).toBe(baseline);
  expect(await host.namespaces()).toEqual([]);
  expect(await host.reservations()).toEqual({});
});
