#!/usr/bin/env node
// ADD and DEL of Nomad's bridge chain (loopback, bridge + host-local, firewall, portmap; one port
// as tcp+udp per allocation) three ways, in one run, each on a fresh node namespace:
//   allocnet : @allocnet/cni's runtime
//   plain    : a plain Node loop that spawns each plugin directly (the floor for a Node runtime)
//   go-cni   : tools/gocni-driver serve (containerd's go-cni doing Nomad's calls, one long-lived
//              process as in Nomad's client; each call timed in the driver)
// Each method sets up N allocations one at a time, then removes them, timing every whole-chain
// operation; the order of methods rotates between repetitions. Uses nothing outside the repository. Prints p50/p95 per method, the
// ratios allocnet/plain and allocnet/go-cni, and writes tools/bench/results/cni-chain.json.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { execa } from 'execa';
import { nomadBridgeConflist, tempDir } from '@allocnet/cni/testing';
import { createNetnsLab, requireNetworkTestHost } from '@allocnet/testns';
import { GOCNI_DRIVER, removeLibcniCache, startGoCni } from './gocni.js';
import { messageOf } from './errors.js';
import { phaseStats, summarize } from './stats.js';
import type { PhaseStats } from './stats.js';

const here = dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({
  options: {
    n: { type: 'string', default: '30' },
    reps: { type: 'string', default: '5' },
    'plugin-dir': { type: 'string', default: '/usr/lib/cni' },
    methods: { type: 'string', default: 'allocnet,plain,go-cni' },
  },
});
const N = Number(values.n);
const REPS = Number(values.reps);
if (!Number.isInteger(N) || N < 1 || N > 1000) throw new Error(`--n ${values.n} is not 1-1000`);
if (!Number.isInteger(REPS) || REPS < 1)
  throw new Error(`--reps ${values.reps} is not a positive whole number`);
const PLUGIN_DIR = values['plugin-dir'];

// allocnet-fork: allocnet's runtime with plugins started by node:child_process (a fork of the
// process) instead of posix_spawn; measures what the spawn method alone is worth.
const ALL_METHODS = ['allocnet', 'allocnet-fork', 'plain', 'go-cni'] as const;
type Method = (typeof ALL_METHODS)[number];
const isMethod = (m: string): m is Method => (ALL_METHODS as readonly string[]).includes(m);
const METHODS: readonly Method[] = values.methods.split(',').map((m) => {
  if (!isMethod(m)) throw new Error(`--methods: ${m} is not one of ${ALL_METHODS.join(', ')}`);
  return m;
});
if (!METHODS.includes('allocnet')) throw new Error('--methods must include allocnet');

/** Nomad's default bridge network (cniVersion 0.4.0). */
function conflist(ipamDir: string): string {
  return JSON.stringify(nomadBridgeConflist({ ipamDir, cniVersion: '0.4.0' }));
}

interface Run {
  readonly setup: PhaseStats;
  readonly remove: PhaseStats;
}

async function runOnce(method: Method): Promise<Run> {
  const lab = createNetnsLab();
  const tmp = await tempDir('allocnet-bench-');
  try {
    const node = await lab.node('bench');
    const file = join(tmp.path, 'nomad.conflist');
    writeFileSync(file, conflist(join(tmp.path, 'ipam')));
    const containers = [];
    for (let i = 0; i < N; i++) containers.push(await lab.container());
    let out: Run;
    if (method === 'go-cni') {
      out = await goCni(node.path, file, containers, lab.prefix);
    } else {
      const { stdout } = await execa('ip', [
        'netns', 'exec', node.name, process.execPath, join(here, 'cni-chain-inner.js'),
        '--method', method, '--conflist', file, '--netns', containers.map((c) => c.path).join(','),
        '--cache-dir', join(tmp.path, 'cache'), '--plugin-dir', PLUGIN_DIR,
      ]); // prettier-ignore
      out = JSON.parse(stdout) as Run;
    }
    for (const [phase, stats] of [
      ['setup', out.setup],
      ['remove', out.remove],
    ] as const) {
      if (stats.failed > 0 || stats.ok !== N) {
        throw new Error(
          `${method} ${phase}: ${stats.failed} of ${N} failed: ${JSON.stringify(stats.errors)}`,
        );
      }
    }
    return out;
  } finally {
    try {
      await lab.dispose();
    } finally {
      await tmp.remove();
    }
  }
}

/** Every id given to go-cni, for removing what it left in the host's libcni cache. */
const goCniIds = new Set<string>();

/**
 * N setups then N removes through gocni-driver serve in the node, one at a time, each timed by
 * the driver; ids and ports as cni-chain-inner.js gives them.
 */
async function goCni(
  node: string,
  conflist: string,
  containers: readonly { readonly path: string }[],
  prefix: string,
): Promise<Run> {
  const gocni = startGoCni({ node, conflist, pluginDirs: PLUGIN_DIR });
  const phase = async (op: 'setup' | 'remove') => {
    const ms: number[] = [];
    const failures: string[] = [];
    const started = performance.now();
    for (const [i, c] of containers.entries()) {
      const id = `${prefix}-${i}`;
      goCniIds.add(id);
      try {
        ms.push(await gocni.call(op, id, c.path, [[20000 + i, 8080]]));
      } catch (error) {
        failures.push(messageOf(error));
      }
    }
    return phaseStats(ms, failures, performance.now() - started);
  };
  try {
    const setup = await phase('setup');
    return { setup, remove: await phase('remove') };
  } finally {
    await gocni.stop();
  }
}

async function main(): Promise<void> {
  await requireNetworkTestHost(['ip', 'iptables', 'nsenter', `${PLUGIN_DIR}/bridge`, GOCNI_DRIVER]);
  // go-cni writes libcni's cache under /var/lib/cni and cannot be told otherwise: what it left
  // is removed afterwards, and the directories too when they were not there before.
  const libcniDirsExisted = existsSync('/var/lib/cni');
  const runs = Object.fromEntries(METHODS.map((m) => [m, [] as Run[]])) as Record<Method, Run[]>;
  try {
    for (let rep = 0; rep < REPS; rep++) {
      const order = METHODS.map((_, i) => METHODS[(i + rep) % METHODS.length] as Method);
      for (const method of order) {
        const run = await runOnce(method);
        runs[method].push(run);
        console.error(
          `rep ${rep + 1}/${REPS} ${method.padEnd(13)} setup p50 ${run.setup.p50Ms.toFixed(1)} ms, remove p50 ${run.remove.p50Ms.toFixed(1)} ms`,
        );
      }
    }
  } finally {
    await removeLibcniCache(goCniIds, libcniDirsExisted);
  }

  const median = (m: Method, phase: 'setup' | 'remove', key: 'p50Ms' | 'p95Ms') =>
    summarize(runs[m].map((r) => r[phase][key])).median;
  const table = METHODS.map((m) => ({
    method: m,
    setupP50: median(m, 'setup', 'p50Ms'),
    setupP95: median(m, 'setup', 'p95Ms'),
    removeP50: median(m, 'remove', 'p50Ms'),
    removeP95: median(m, 'remove', 'p95Ms'),
  }));
  // Each repetition runs the three methods back to back, so a ratio within one repetition
  // compares like with like even when the machine's speed drifts between repetitions; the
  // reported ratio is the median of those paired ratios.
  const paired = (other: Method, phase: 'setup' | 'remove') =>
    summarize(runs.allocnet.map((r, i) => r[phase].p50Ms / (runs[other][i] as Run)[phase].p50Ms))
      .median;
  const goals: Partial<Record<Method, string>> = {
    plain: ' (goal <= 1.10)',
    'go-cni': ' (goal <= 1.00)',
  };
  const ratios = Object.fromEntries(
    METHODS.filter((m) => m !== 'allocnet').map((m) => [
      m,
      { setup: paired(m, 'setup'), remove: paired(m, 'remove') },
    ]),
  );
  console.log(
    `Nomad bridge chain, ${N} allocations one at a time, ${REPS} reps (medians of per-rep p50/p95; ratios are medians of per-rep ratios), fresh node namespace per run`,
  );
  console.log(
    `${'method'.padEnd(15)}${'ADD p50'.padStart(10)}${'ADD p95'.padStart(10)}${'DEL p50'.padStart(10)}${'DEL p95'.padStart(10)}`,
  );
  for (const r of table) {
    console.log(
      `${r.method.padEnd(15)}${r.setupP50.toFixed(1).padStart(10)}${r.setupP95.toFixed(1).padStart(10)}${r.removeP50.toFixed(1).padStart(10)}${r.removeP95.toFixed(1).padStart(10)}`,
    );
  }
  for (const [m, r] of Object.entries(ratios)) {
    console.log(
      `allocnet / ${m.padEnd(13)}: ADD ${r.setup.toFixed(3)}x, DEL ${r.remove.toFixed(3)}x${goals[m as Method] ?? ''}`,
    );
  }
  const out = join(here, '..', 'results');
  mkdirSync(out, { recursive: true });
  writeFileSync(
    join(out, 'cni-chain.json'),
    `${JSON.stringify({ benchmark: 'cni-chain', n: N, reps: REPS, date: new Date().toISOString(), table, ratios, runs }, null, 2)}\n`,
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
