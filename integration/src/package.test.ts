// The Debian package (issue 18), built by tools/package.sh and installed on this machine with
// dpkg, as an operator would: the files where docs/install.md says; the agent run with the unit's
// own ExecStart line inside a node namespace (no systemd as PID 1 here), telling a notify socket
// READY=1 once it serves; the demo's allocations set up with the installed `allocnet`; a package
// of a higher version installed over it while they live (allocnet-cni replaced while a runtime
// keeps exec'ing it), the agent restarted as postinst's try-restart would, and every allocation
// kept ready with the same address and no setup redone; remove keeping the config and the state;
// purge leaving nothing (the CLI's code cache in /var/cache/allocnet included). CI machines are disposable and run as root; the test refuses to run
// where an allocnet package is already installed, and purges what it installed even when it
// fails. The allocations' namespaces carry the lab's prefix (ALLOCNET_NETNS_PREFIX, as a unit's
// Environment= would set it) and their IPAM files a temp dir; everything else is the shipped
// config. Needs root, dpkg, lintian, iproute2, iptables, containernetworking-plugins, golang-go
// and systemd-analyze; never touches the root network namespace.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { access, appendFile, lstat, readFile, readdir, readlink, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { listenForNotifications } from '@allocnet/agent';
import type { NotifyListener } from '@allocnet/agent';
import { tempDir } from '@allocnet/cni/testing';
import { createNetnsLab, requireNetworkTestHost } from '@allocnet/testns';
import type { NetnsLab, TestNetns } from '@allocnet/testns';
import { REPO } from './fixtures/agent-host.js';
import { waitFor } from './fixtures/wait.js';

const UNIT = '/lib/systemd/system/allocnet-agent.service';
const CONFIG = '/etc/allocnet/agent.yaml';
const PLUGIN = '/usr/lib/cni/allocnet-cni';
const NOMAD_PLUGIN = '/opt/cni/bin/allocnet-cni';
/** Everything the package, its agent or its CLI puts on the machine outside /usr. */
const STATE_PATHS = [
  '/etc/allocnet',
  '/var/lib/allocnet',
  '/run/allocnet',
  '/opt/cni',
  '/var/cache/allocnet',
];
/** Where the installed CLI run by root keeps its code cache (packages/cli's code-cache.ts). */
const CLI_CACHE = '/var/cache/allocnet';
/** The demo's allocations (tools/demo): id and its host port. */
const DEMO = [
  { id: 'web-1', port: 'http:8080:80' },
  { id: 'web-2', port: 'http:8081:80' },
  { id: 'db-1', port: 'pg:5432' },
] as const;

let lab: NetnsLab;
let node: TestNetns;
let tmp: Awaited<ReturnType<typeof tempDir>>;
let debs: { readonly first: string; readonly second: string };
let versions: { readonly first: string; readonly second: string };
/** Which of STATE_PATHS were there before the test. */
let before: Record<string, boolean>;
const running: ChildProcess[] = [];

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch {
    return false;
  }
}

async function installed(): Promise<string> {
  const q = await execa('dpkg-query', ['-W', '-f=${Status}', 'allocnet'], { reject: false });
  return q.exitCode === 0 ? q.stdout : 'not known to dpkg';
}

function dpkg(...args: string[]) {
  return execa('dpkg', args, {
    reject: false,
    all: true,
    env: { DEBIAN_FRONTEND: 'noninteractive' },
  });
}

/**
 * The installed `allocnet`, over the agent's default socket, as root runs it: its code cache in
 * /var/cache/allocnet, not where tools/test.sh points the tests' commands.
 */
function allocnet(...args: string[]) {
  const env = { ...process.env };
  delete env.ALLOCNET_CLI_CACHE_DIR;
  return execa('/usr/bin/allocnet', args, { reject: false, env, extendEnv: false });
}

interface Agent {
  readonly child: ChildProcess;
  readonly notify: NotifyListener;
  stderr(): string;
  readonly exited: Promise<number | null>;
}

/**
 * The agent as systemd would start it: the unit's ExecStart line, after the directories of its
 * RuntimeDirectory= and StateDirectory=, with NOTIFY_SOCKET, in the node namespace.
 */
async function startFromUnit(label: string): Promise<Agent> {
  const unit = await readFile(UNIT, 'utf8');
  const line = /^ExecStart=(.+)$/m.exec(unit)?.[1];
  if (line === undefined) throw new Error(`${UNIT} has no ExecStart=`);
  await execa('install', ['-d', '-m', '0700', '/run/allocnet', '/var/lib/allocnet']);
  const socket = join(tmp.path, `notify-${label}`);
  const notify = listenForNotifications(socket);
  const child = spawn('nsenter', [`--net=${node.path}`, '--', ...line.split(' ')], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: {
      ...process.env,
      NOTIFY_SOCKET: socket,
      ALLOCNET_NETNS_PREFIX: `${lab.prefix}-pkg-`,
      ALLOCNET_IPAM_DATA_DIR: join(tmp.path, 'ipam'),
    },
  });
  running.push(child);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => {
    child.on('exit', (code) => {
      resolve(code);
    });
  });
  return { child, notify, stderr: () => stderr, exited };
}

async function stopAgent(agent: Agent): Promise<number | null> {
  agent.child.kill('SIGTERM');
  const code = await agent.exited;
  agent.notify.close();
  return code;
}

/** JSON log lines of the agent with `message`. */
function logLines(agent: Agent, message: string): Record<string, unknown>[] {
  return agent
    .stderr()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.message === message);
}

interface Listed {
  readonly allocId: string;
  readonly phase: string;
  readonly address: string;
}

async function listed(): Promise<Listed[]> {
  const run = await allocnet('alloc', 'list', '--json');
  if (run.exitCode !== 0) throw new Error(`allocnet alloc list: ${run.stderr}`);
  return (JSON.parse(run.stdout) as Listed[])
    .map(({ allocId, phase, address }) => ({ allocId, phase, address }))
    .sort((a, b) => a.allocId.localeCompare(b.allocId));
}

beforeAll(async () => {
  await requireNetworkTestHost();
  const state = await installed();
  if (state !== 'not known to dpkg')
    throw new Error(
      `the allocnet package is on this machine (${state}); this test installs and purges it: run it on a disposable machine`,
    );
  before = Object.fromEntries(
    await Promise.all(STATE_PATHS.map(async (p) => [p, await exists(p)] as const)),
  );
  tmp = await tempDir('allocnet-package-it-');
  lab = createNetnsLab();
  node = await lab.node();
  const base = JSON.parse(await readFile(join(REPO, 'packages/agent/package.json'), 'utf8')) as {
    version: string;
  };
  versions = { first: `${base.version}+it1`, second: `${base.version}+it2` };
  const build = async (version: string) => {
    const run = await execa(
      join(REPO, 'tools/package.sh'),
      ['--version', version, '--out', tmp.path],
      { reject: false, all: true },
    );
    if (run.exitCode !== 0) throw new Error(`tools/package.sh failed:\n${run.all}`);
    return run.stdout.trim().split('\n').at(-1) ?? '';
  };
  debs = { first: await build(versions.first), second: await build(versions.second) };
}, 300_000);

afterAll(async () => {
  for (const child of running) if (child.exitCode === null) child.kill('SIGKILL');
  // What a failed test left: its allocations' namespaces are the lab's; the package goes.
  if ((await installed()) !== 'not known to dpkg') await dpkg('--purge', 'allocnet');
  await lab.dispose();
  await tmp.remove();
}, 120_000);

describe('the allocnet Debian package', () => {
  let agent: Agent;
  let addresses: Listed[];

  it('is lintian-clean: no error, no warning (the overrides it ships say why)', async () => {
    const lint = await execa('lintian', ['--fail-on', 'error,warning', debs.first], {
      reject: false,
      all: true,
    });
    const tags = lint.all.split('\n').filter((l) => /^[EW]: /.test(l));
    expect([lint.exitCode, tags]).toEqual([0, []]);
  }, 120_000);

  it('installs its files where promised, with the Nomad link, and a unit systemd accepts', async () => {
    const install = await dpkg('-i', debs.first);
    expect([install.exitCode, install.all]).toEqual([0, expect.any(String)]);
    expect(await installed()).toBe('install ok installed');
    for (const bin of ['/usr/bin/allocnet', '/usr/bin/allocnet-agent', PLUGIN])
      expect((await stat(bin)).mode & 0o777).toBe(0o755);
    await access('/usr/lib/allocnet/packages/agent/dist/main.js');
    await access('/usr/share/allocnet/prometheus/allocnet-alerts.yml');
    await access(UNIT);
    expect(await readlink(NOMAD_PLUGIN)).toBe(PLUGIN);
    const conffiles = await execa('dpkg-query', ['-W', '-f=${Conffiles}', 'allocnet']);
    expect(conffiles.stdout).toContain(CONFIG);
    const depends = await execa('dpkg-query', ['-W', '-f=${Depends}', 'allocnet']);
    expect(depends.stdout).toMatch(
      /^nodejs \(>= 20\.19\), containernetworking-plugins, iptables, iproute2/,
    );
    // Nomad fingerprints a plugin by running it with no arguments.
    expect((await execa(NOMAD_PLUGIN)).stdout).toBe(`allocnet-cni v${versions.first}`);
    expect((await allocnet('version')).stdout).toContain(`allocnet ${versions.first}`);
    // its first run wrote the CLI's code cache, root's alone
    expect((await stat(CLI_CACHE)).mode & 0o777).toBe(0o700);
    const caches = (await readdir(CLI_CACHE)).filter((name) => name.endsWith('.v8cache'));
    expect(caches).toHaveLength(1);
    expect((await stat(join(CLI_CACHE, caches[0] ?? ''))).mode & 0o777).toBe(0o600);
    const verify = await execa('systemd-analyze', ['verify', UNIT], { reject: false, all: true });
    expect([verify.exitCode, verify.all]).toEqual([0, '']);
    expect(await readFile(UNIT, 'utf8')).toMatch(/^Type=notify$/m);
  });

  it('runs the unit’s ExecStart in a node namespace: READY=1 once it serves, then the demo', async () => {
    agent = await startFromUnit('first');
    const ready = await agent.notify.waitFor((m) => m.includes('READY=1'), 60_000);
    expect(ready).toBe('READY=1\nSTATUS=serving; 0 allocation network(s) ready');
    // READY=1 came after the agent served: its socket answers now.
    expect(await listed()).toEqual([]);
    for (const { id, port } of DEMO) {
      const setup = await allocnet('alloc', 'setup', id, '--port', port);
      expect([id, setup.exitCode, setup.stderr]).toEqual([id, 0, '']);
    }
    addresses = await listed();
    expect(addresses.map((a) => [a.allocId, a.phase])).toEqual(
      ['db-1', 'web-1', 'web-2'].map((id) => [id, 'PHASE_READY']),
    );
    for (const a of addresses) expect(a.address).toMatch(/^172\.26\.6[4-9]\.\d+$/);
    expect(new Set(addresses.map((a) => a.address)).size).toBe(3);
  });

  it('upgrades while the allocations live: allocnet-cni replaced atomically, the config kept, every allocation restored as it was', async () => {
    // An operator's change to the conffile survives the upgrade.
    await appendFile(CONFIG, '# changed by the operator\n');
    // A runtime exec'ing the plugin the whole time the upgrade runs.
    let execs = 0;
    const failures: string[] = [];
    const dpkgRun = { running: true };
    const runtime = (async () => {
      while (dpkgRun.running) {
        const run = await execa(NOMAD_PLUGIN, { reject: false });
        execs++;
        if (run.exitCode !== 0 || !run.stdout.startsWith('allocnet-cni v'))
          failures.push(`${run.exitCode}: ${run.stdout} ${run.stderr}`);
      }
    })();
    const upgrade = await dpkg('-i', debs.second);
    dpkgRun.running = false;
    await runtime;
    expect([upgrade.exitCode, upgrade.all]).toEqual([0, expect.any(String)]);
    expect([execs > 20, failures]).toEqual([true, []]);
    expect((await execa(NOMAD_PLUGIN)).stdout).toBe(`allocnet-cni v${versions.second}`);
    expect(await readFile(CONFIG, 'utf8')).toContain('# changed by the operator\n');

    // postinst's `deb-systemd-invoke try-restart` under systemd: stop, then the new ExecStart.
    const stopping = agent.notify.waitFor((m) => m.includes('STOPPING=1'), 30_000);
    expect(await stopAgent(agent)).toBe(0);
    expect(await stopping).toMatch(/^STOPPING=1\nSTATUS=stopping \(SIGTERM\)/);
    agent = await startFromUnit('second');
    await agent.notify.waitFor((m) => m.includes('READY=1'), 60_000);
    await agent.notify.waitFor((m) => m.includes('3 allocation network(s) ready'), 60_000);
    expect(await listed()).toEqual(addresses);
    const restored = await waitFor('the restore line', () =>
      Promise.resolve(logLines(agent, 'restored allocations from the last run')[0]),
    );
    expect(restored).toMatchObject({ kept: 3, recreated: 0, failed: 0 });
    expect((await allocnet('version')).stdout).toContain(`agent ${versions.second}`);
  });

  it('removes: commands and plugin gone, config and state kept', async () => {
    for (const { id } of DEMO) {
      const teardown = await allocnet('alloc', 'teardown', id);
      expect([id, teardown.exitCode]).toEqual([id, 0]);
    }
    expect(await stopAgent(agent)).toBe(0);
    const remove = await dpkg('-r', 'allocnet');
    expect([remove.exitCode, remove.all]).toEqual([0, expect.any(String)]);
    expect(await installed()).toBe('deinstall ok config-files');
    for (const gone of ['/usr/bin/allocnet', '/usr/lib/allocnet', PLUGIN, NOMAD_PLUGIN, UNIT])
      expect([gone, await exists(gone)]).toEqual([gone, false]);
    expect(await readFile(CONFIG, 'utf8')).toContain('# changed by the operator\n');
    await access('/var/lib/allocnet/state');
  });

  it('purges: nothing of it is left', async () => {
    const purge = await dpkg('--purge', 'allocnet');
    expect([purge.exitCode, purge.all]).toEqual([0, expect.any(String)]);
    expect(await installed()).toBe('not known to dpkg');
    const after = Object.fromEntries(
      await Promise.all(STATE_PATHS.map(async (p) => [p, await exists(p)] as const)),
    );
    // Root's CLI cache goes whoever wrote it (a root `allocnet` of a checkout writes there too).
    expect(after).toEqual({ ...before, [CLI_CACHE]: false });
  });
});
