// The shipped alerting rules against a real agent and Debian's prometheus (issue 18): a dev agent
// (`allocnet agent -dev`, its sandbox namespace standing for a node, reconcile in report mode
// every second) and prometheus in the same sandbox scraping its metrics with
// packages/agent/prometheus/allocnet-alerts.yml. The leak is the one docs/troubleshooting.md
// describes: the bridge network run by something other than allocnet (Nomad's own bridge
// networking on a node moving to allocnet, say) for a container whose namespace is then deleted
// out of band; the DEL succeeds and leaves the masquerade rule and chain tagged with the network.
// AllocnetLeaksFound is not firing before, fires after, and the leak is still there (report mode
// removes nothing). Needs root, iproute2, iptables, containernetworking-plugins and prometheus;
// never touches the root network namespace: everything runs in the sandbox, which the dev agent
// removes when it stops.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { tempDir } from '@allocnet/cni/testing';
import { createNetnsLab, requireNetworkTestHost } from '@allocnet/testns';
import type { NetnsLab } from '@allocnet/testns';
import { CLI_MAIN, PLUGIN_DIR, REPO } from './fixtures/agent-host.js';
import { waitFor } from './fixtures/wait.js';

const RULES = join(REPO, 'packages/agent/prometheus/allocnet-alerts.yml');
const OUTSIDE_ID = `outside-${process.pid.toString(36)}`;

let lab: NetnsLab;
let tmp: Awaited<ReturnType<typeof tempDir>>;
let dev: { child: ChildProcess; stdout: () => string; exited: Promise<number | null> };
let prometheus: { child: ChildProcess; output: () => string } | undefined;
let sandbox: string;
let socket: string;

function started(command: string, args: string[], env: Record<string, string> = {}) {
  const child = spawn(command, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<number | null>((resolve) => {
    child.on('exit', (code) => {
      resolve(code);
    });
  });
  return { child, output: () => output, exited };
}

interface Alert {
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
  readonly state: string;
}

/** prometheus's /api/v1/alerts, read from inside the sandbox. */
async function alerts(): Promise<Alert[]> {
  const run = await execa('nsenter', [
    `--net=/run/netns/${sandbox}`,
    '--',
    process.execPath,
    '-e',
    "fetch('http://127.0.0.1:9090/api/v1/alerts').then((r) => r.text()).then((t) => process.stdout.write(t))",
  ]);
  return (JSON.parse(run.stdout) as { data: { alerts: Alert[] } }).data.alerts;
}

/** One PromQL value from prometheus, or undefined when the query has no result yet. */
async function query(expr: string): Promise<string | undefined> {
  const url = `http://127.0.0.1:9090/api/v1/query?query=${encodeURIComponent(expr)}`;
  const run = await execa(
    'nsenter',
    [
      `--net=/run/netns/${sandbox}`,
      '--',
      process.execPath,
      '-e',
      // Until its storage is up, prometheus answers 503 "Service Unavailable": not yet.
      `fetch(${JSON.stringify(url)}).then((r) => { if (!r.ok) process.exit(1); return r.text(); }).then((t) => process.stdout.write(t))`,
    ],
    { reject: false },
  );
  if (run.exitCode !== 0) return undefined;
  const body = JSON.parse(run.stdout) as { data: { result: { value: [number, string] }[] } };
  return body.data.result[0]?.value[1];
}

function allocnet(...args: string[]) {
  return execa(process.execPath, [CLI_MAIN, ...args], { reject: false });
}

beforeAll(async () => {
  await requireNetworkTestHost();
  lab = createNetnsLab();
  tmp = await tempDir('allocnet-alerts-it-');
  const d = started(process.execPath, [CLI_MAIN, 'agent', '-dev'], {
    ALLOCNET_RECONCILE_MODE: 'report',
    ALLOCNET_RECONCILE_INTERVAL_MS: '1000',
    ALLOCNET_METRICS_ADDRESS: '127.0.0.1:9464',
    ALLOCNET_LOG_LEVEL: 'warn',
  });
  dev = { child: d.child, stdout: d.output, exited: d.exited };
  const ready = await waitFor(
    'the dev agent',
    () => {
      const m = /in sandbox network namespace (\S+)\n\s+socket:\s+(\S+)/.exec(dev.stdout());
      if (m === null && dev.child.exitCode !== null)
        throw new Error(`the dev agent exited:\n${dev.stdout()}`);
      return Promise.resolve(m ?? undefined);
    },
    60_000,
  );
  sandbox = ready[1] ?? '';
  socket = ready[2] ?? '';
  const config = join(tmp.path, 'prometheus.yml');
  await writeFile(
    config,
    [
      'global: { scrape_interval: 1s, evaluation_interval: 1s }',
      `rule_files: [${JSON.stringify(RULES)}]`,
      'scrape_configs:',
      '  - job_name: allocnet',
      "    static_configs: [{ targets: ['127.0.0.1:9464'] }]",
      '',
    ].join('\n'),
  );
  prometheus = started('nsenter', [
    `--net=/run/netns/${sandbox}`,
    '--',
    'prometheus',
    `--config.file=${config}`,
    `--storage.tsdb.path=${join(tmp.path, 'tsdb')}`,
    '--web.listen-address=127.0.0.1:9090',
  ]);
}, 120_000);

afterAll(async () => {
  prometheus?.child.kill('SIGTERM');
  // SIGTERM: the dev agent stops and removes its sandbox, with everything made in it.
  dev.child.kill('SIGTERM');
  await dev.exited;
  await lab.dispose();
  await tmp.remove();
}, 60_000);

it('fires AllocnetLeaksFound once a namespace deleted out of band leaves tagged rules, and reaps nothing in report mode', async () => {
  // Prometheus scrapes the agent and has evaluated the rules on its quiet metrics.
  await waitFor('a scrape of the agent', () => query('up{job="allocnet"} == 1'), 60_000);
  await waitFor(
    'three samples of the leak gauge',
    () => query('count_over_time(allocnet_leaked_allocations[1m]) >= 3'),
    30_000,
  );
  expect(await alerts()).toEqual([]);

  // The bridge network run without allocnet, in the sandbox, for a container of its own.
  const confDir = join(tmp.path, 'net.d');
  await mkdir(confDir);
  await writeFile(
    join(confDir, '10-nomad.conflist'),
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'nomad',
      plugins: [
        {
          type: 'bridge',
          bridge: 'nomad',
          isGateway: true,
          ipMasq: true,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: '172.26.64.0/20', rangeStart: '172.26.79.200' }]],
            dataDir: join(tmp.path, 'ipam'),
          },
        },
      ],
    }),
  );
  const container = await lab.container('outside');
  const common = [
    '--id',
    OUTSIDE_ID,
    '--conf-dir',
    confDir,
    '--plugin-dir',
    PLUGIN_DIR,
    '--cache-dir',
    join(tmp.path, 'cache'),
    '--host-netns',
    sandbox,
  ];
  const add = await allocnet('cni', 'add', 'nomad', container.path, ...common);
  expect([add.exitCode, add.stderr]).toEqual([0, '']);
  // Out of band: the namespace goes, then the DEL succeeds and leaves the masquerade rule.
  await execa('ip', ['netns', 'del', container.name]);
  const del = await allocnet('cni', 'del', 'nomad', container.path, ...common);
  expect([del.exitCode, del.stderr]).toEqual([0, '']);

  const firing = await waitFor(
    'AllocnetLeaksFound to fire',
    async () => (await alerts()).find((a) => a.state === 'firing'),
    60_000,
  );
  expect(firing.labels).toMatchObject({
    alertname: 'AllocnetLeaksFound',
    severity: 'warning',
    instance: '127.0.0.1:9464',
  });
  expect(firing.annotations.summary).toBe('allocnet on 127.0.0.1:9464 found leaked network state');
  // Report mode: the reconciler counted it and removed nothing.
  const leaks = await allocnet('leaks', '--address', socket);
  expect([leaks.exitCode, leaks.stdout]).toEqual([0, expect.stringContaining(OUTSIDE_ID)]);
});
