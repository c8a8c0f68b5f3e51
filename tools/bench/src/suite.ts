#!/usr/bin/env node
// The benchmark suite: allocnet against go-cni (../shared/peer, what Nomad uses) and against the
// plugins' own floor, in one run, each contender on fresh throwaway namespaces.
//   floor          : a plain loop exec'ing each plugin of the default bridge chain
//   peer           : peercni bench (go-cni), one attempt per setup
//   allocnet-lib   : @allocnet/cni-configurator in-process (setup; teardown with the audit)
//   allocnet-agent : the agent process, over gRPC on its unix socket
// Scenarios: sequential (N setups then N teardowns, one at a time), concurrent (a fresh node,
// W at a time: failures, retries, throughput), scale (the agent up to M live allocations: latency
// at 1..50 vs M-49..M, RSS and CPU per setup, restore of M after a restart), reap (M leaked
// allocations vs Nomad's per-allocation cleanup). Writes every raw sample and the environment as
// JSON, a markdown summary with the goals, and PNG charts (report.ts).
//
//   node tools/bench/dist/suite.js [--quick] [--out DIR] [--docs] [--only a,b]
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { execa } from 'execa';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { tempDir } from '@allocnet/cni/testing';
import { allocChains, createCniConfigurator } from '@allocnet/cni-configurator';
import { createCniRuntime } from '@allocnet/cni';
import { addPluginShapes } from '@allocnet/cni-configurator/testing';
import { createBatch, createIptables } from '@allocnet/iptables-node';
import type { Iptables } from '@allocnet/iptables-node';
import { unary } from '@allocnet/proto';
import { createNetnsLab, requireNetworkTestHost } from '@allocnet/testns';
import type { NetnsLab, TestNetns } from '@allocnet/testns';
import { processUsage, startBenchAgent } from './agent-process.js';
import type { BenchAgent } from './agent-process.js';
import { DEFAULT_PEER, REPO, runInner, runPeer } from './contenders.js';
import type { PeerResult } from './contenders.js';
import { environment } from './env.js';
import { pool } from './pool.js';
import { writeReport } from './report.js';
import type { ConcurrentRun, ReapRun, ScaleRun, SequentialRun, SuiteResults } from './report.js';
import { CONTENDERS } from './summary.js';
import type { Contender } from './summary.js';
import type { InnerResult, PhaseSamples } from './samples.js';

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    out: { type: 'string', default: join(REPO, 'tools', 'bench', 'results') },
    docs: { type: 'boolean', default: false },
    only: { type: 'string' },
    peer: { type: 'string', default: DEFAULT_PEER },
    'plugin-dir': { type: 'string', default: '/usr/lib/cni' },
  },
});
const QUICK = values.quick;
const PLAN = {
  sequential: { n: QUICK ? 20 : 50, reps: QUICK ? 1 : 3 },
  concurrent: { n: 64, width: 8, reps: QUICK ? 1 : 3 },
  scale: { live: QUICK ? 200 : 1000, window: QUICK ? 20 : 50 },
  reap: { allocs: QUICK ? 200 : 1000, nomadAllocs: QUICK ? 100 : 1000 },
};
const ONLY = new Set((values.only ?? 'sequential,concurrent,scale,reap').split(','));
const PLUGIN_DIR = values['plugin-dir'];
const idOf = (prefix: string, i: number) =>
  `${prefix}-0000-4000-8000-${i.toString(16).padStart(12, '0')}`;

function log(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

/** A fresh node namespace and N container namespaces; everything removed afterwards. */
async function withNode<T>(
  containers: number,
  fn: (lab: NetnsLab, node: TestNetns, ctrs: TestNetns[], dir: string) => Promise<T>,
): Promise<T> {
  const lab = createNetnsLab();
  const tmp = await tempDir('allocnet-bench-');
  try {
    const node = await lab.node('bench');
    const ctrs: TestNetns[] = [];
    for (let i = 0; i < containers; i++) ctrs.push(await lab.container());
    return await fn(lab, node, ctrs, tmp.path);
  } finally {
    await lab.dispose();
    await tmp.remove();
  }
}

/** Setups then teardowns through the agent, `width` at a time, on pre-made namespaces. */
async function agentPhases(
  agent: BenchAgent,
  ctrs: readonly TestNetns[],
  width: number,
  prefix: string,
): Promise<Pick<InnerResult, 'setup' | 'teardown'>> {
  const phase = async (op: (i: number) => Promise<number>): Promise<PhaseSamples> => {
    const samples: number[] = new Array<number>(ctrs.length).fill(Number.NaN);
    const failures: string[] = [];
    let retries = 0;
    const started = performance.now();
    await pool(ctrs.length, width, async (i) => {
      const t0 = performance.now();
      try {
        retries += await op(i);
        samples[i] = performance.now() - t0;
      } catch (error) {
        failures.push(error instanceof Error ? error.message.slice(0, 300) : String(error));
      }
    });
    return {
      samplesMs: samples.filter((s) => !Number.isNaN(s)),
      failures,
      retries,
      totalMs: performance.now() - started,
    };
  };
  const setup = await phase(async (i) => {
    const { status } = await unary(
      agent.alloc,
      'SetupAllocNetwork',
      {
        allocId: idOf(prefix, i),
        namespace: 'bench',
        jobId: 'bench',
        groupName: 'web',
        ports: [{ label: 'http', value: 20000 + i, to: 8080 }],
        netnsPath: (ctrs[i] as TestNetns).path,
      },
      { deadlineMs: 120_000 },
    );
    return (status?.attempts ?? 1) - 1;
  });
  const teardown = await phase(async (i) => {
    await unary(
      agent.alloc,
      'TeardownAllocNetwork',
      { allocId: idOf(prefix, i) },
      { deadlineMs: 120_000 },
    );
    return 0;
  });
  return { setup, teardown };
}

/** One contender, N allocations `width` at a time on a fresh node. */
async function runContender(
  contender: Contender,
  n: number,
  width: number,
): Promise<InnerResult | PeerResult> {
  if (contender === 'peer')
    return withNode(0, (lab, node, _ctrs, dir) =>
      runPeer({
        peer: values.peer,
        node,
        n,
        concurrency: width,
        dir,
        pluginDir: PLUGIN_DIR,
        prefix: `${lab.prefix}-pb-`,
      }),
    );
  return withNode(n, async (lab, node, ctrs, dir) => {
    if (contender === 'floor' || contender === 'allocnet-lib')
      return runInner(contender === 'floor' ? 'floor' : 'lib', {
        node,
        containers: ctrs,
        concurrency: width,
        dir,
        pluginDir: PLUGIN_DIR,
      });
    const agent = await startBenchAgent({
      node,
      dir,
      netnsPrefix: `${lab.prefix}-A`,
      pluginDir: PLUGIN_DIR,
    });
    try {
      return {
        method: contender,
        n,
        concurrency: width,
        ...(await agentPhases(agent, ctrs, width, '00000000')),
      };
    } finally {
      await agent.stop();
    }
  });
}

async function sequential(): Promise<SequentialRun[]> {
  const runs: SequentialRun[] = [];
  for (let rep = 0; rep < PLAN.sequential.reps; rep++) {
    // Rotate the order so that no contender always runs first (or last) on a warming machine.
    const order = CONTENDERS.map((_, i) => CONTENDERS[(i + rep) % CONTENDERS.length] as Contender);
    for (const contender of order) {
      log(
        `sequential rep ${rep + 1}/${PLAN.sequential.reps}: ${contender}, ${PLAN.sequential.n} allocations`,
      );
      runs.push({ rep, contender, result: await runContender(contender, PLAN.sequential.n, 1) });
    }
  }
  return runs;
}

async function concurrent(): Promise<ConcurrentRun[]> {
  const runs: ConcurrentRun[] = [];
  for (let rep = 0; rep < PLAN.concurrent.reps; rep++) {
    const order = CONTENDERS.map((_, i) => CONTENDERS[(i + rep) % CONTENDERS.length] as Contender);
    for (const contender of order) {
      log(
        `concurrent rep ${rep + 1}/${PLAN.concurrent.reps}: ${contender}, ${PLAN.concurrent.n} at ${PLAN.concurrent.width} wide, fresh node`,
      );
      runs.push({
        rep,
        contender,
        result: await runContender(contender, PLAN.concurrent.n, PLAN.concurrent.width),
      });
    }
  }
  return runs;
}

/** The agent up to M live allocations one at a time, a restart, then all torn down one at a time. */
async function scale(): Promise<ScaleRun> {
  const M = PLAN.scale.live;
  const FLOOR = 10;
  return withNode(M + 2 * FLOOR, async (lab, node, all, dir) => {
    const ctrs = all.slice(0, M);
    const options = { node, dir, netnsPrefix: `${lab.prefix}-S`, pluginDir: PLUGIN_DIR };
    // The plugins' own cost on this node, empty and then with M allocations: the floor.
    // The same for allocnet's CHECK (what a restore runs for each allocation) against the
    // plugins' own CHECK, on the same node.
    const innerAt = async (method: 'floor' | 'lib', from: number) => {
      const r = await runInner(method, {
        node,
        containers: all.slice(from, from + FLOOR),
        concurrency: 1,
        dir,
        pluginDir: PLUGIN_DIR,
        portBase: 50000 + from,
        check: true,
      });
      return {
        setupMs: r.setup.samplesMs,
        checkMs: r.check?.samplesMs ?? [],
        teardownMs: r.teardown.samplesMs,
      };
    };
    const floorAt = (from: number) => innerAt('floor', from);
    const floorEmpty = await floorAt(M);
    const libEmpty = await innerAt('lib', M);
    let agent = await startBenchAgent(options);
    try {
      const setupMs: number[] = [];
      const before = processUsage(agent.pid);
      for (let i = 0; i < M; i++) {
        const t0 = performance.now();
        await unary(
          agent.alloc,
          'SetupAllocNetwork',
          {
            allocId: idOf('5ca1e000', i),
            namespace: 'bench',
            jobId: 'bench',
            groupName: 'web',
            ports: [{ label: 'http', value: 20000 + i, to: 8080 }],
            netnsPath: (ctrs[i] as TestNetns).path,
          },
          { deadlineMs: 120_000 },
        );
        setupMs.push(performance.now() - t0);
        if ((i + 1) % 100 === 0) log(`scale: ${i + 1}/${M} live`);
      }
      const after = processUsage(agent.pid);
      log(`scale: the floor with ${M} live allocations`);
      const floorFull = await floorAt(M + FLOOR);
      const libFull = await innerAt('lib', M + FLOOR);
      log(`scale: restarting the agent with ${M} live allocations`);
      await agent.stop();
      agent = await startBenchAgent(options);
      const restoreLine = agent.lines().find((l) => l.message === 'restore finished');
      const restart = {
        spawnToReadyMs: agent.readyAt - agent.spawnedAt,
        restoreMs: Number(restoreLine?.durationMs ?? Number.NaN),
        kept: Number(restoreLine?.kept ?? Number.NaN),
        recreated: Number(restoreLine?.recreated ?? Number.NaN),
        failed: Number(restoreLine?.failed ?? Number.NaN),
      };
      const afterRestore = processUsage(agent.pid);
      const teardownMs: number[] = [];
      for (let i = 0; i < M; i++) {
        const t0 = performance.now();
        await unary(
          agent.alloc,
          'TeardownAllocNetwork',
          { allocId: idOf('5ca1e000', i) },
          { deadlineMs: 120_000 },
        );
        teardownMs.push(performance.now() - t0);
        if ((i + 1) % 100 === 0) log(`scale: ${M - i - 1} live`);
      }
      return {
        live: M,
        window: PLAN.scale.window,
        setupMs,
        teardownMs,
        rssMiB: after.rssMiB,
        rssAfterRestoreMiB: afterRestore.rssMiB,
        cpuSecondsPerSetup: (after.cpuSeconds - before.cpuSeconds) / M,
        restart,
        floor: { empty: floorEmpty, full: floorFull },
        lib: { empty: libEmpty, full: libFull },
      };
    } finally {
      await agent.stop();
    }
  });
}

async function reap(): Promise<ReapRun> {
  const leak = async (ipt: Iptables, n: number) => {
    await ipt.restore(createBatch().newChain('nat', 'CNI-HOSTPORT-DNAT'));
    const batch = createBatch();
    for (let i = 0; i < n; i++)
      addPluginShapes(batch, {
        network: 'nomad',
        allocId: idOf('1eaced00', i),
        ip: `172.26.${64 + Math.floor(i / 250)}.${(i % 250) + 2}`,
      });
    await ipt.restore(batch);
  };
  const allocnetMs = await withNode(0, async (_lab, node, _ctrs, dir) => {
    const ipt = createIptables({ netns: node.path });
    await leak(ipt, PLAN.reap.allocs);
    const configurator = await createCniConfigurator({
      runtime: createCniRuntime({ cacheDir: join(dir, 'cache') }),
      iptables: { ipv4: ipt, ipv6: createIptables({ family: 'ipv6', netns: node.path }) },
      defaultNetwork: { ipamDataDir: join(dir, 'ipam') },
    });
    try {
      const t0 = performance.now();
      const report = await configurator.reapLeaks([]);
      const ms = performance.now() - t0;
      if (report.reaped.length !== PLAN.reap.allocs)
        throw new Error(`reaped ${report.reaped.length}`);
      return ms;
    } finally {
      await configurator.close();
    }
  });
  log(
    `reap: allocnet ${PLAN.reap.allocs} in ${allocnetMs.toFixed(0)} ms; now Nomad's way on ${PLAN.reap.nomadAllocs}`,
  );
  const nomadMs = await withNode(0, async (_lab, node) => {
    const ipt = createIptables({ netns: node.path });
    await leak(ipt, PLAN.reap.nomadAllocs);
    const t0 = performance.now();
    for (let i = 0; i < PLAN.reap.nomadAllocs; i++) {
      // Nomad's forceCleanup, per allocation: list POSTROUTING, delete the jump, flush and
      // delete the chain, one process each.
      const comment = `name: "nomad" id: "${idOf('1eaced00', i)}"`;
      const jump = (await ipt.listRules('nat', 'POSTROUTING')).find((r) => r.comment === comment);
      if (jump === undefined) throw new Error(`no jump for ${i}`);
      await ipt.delete('nat', 'POSTROUTING', jump.spec);
      const chain = allocChains('nomad', idOf('1eaced00', i)).masq;
      await ipt.clearChain('nat', chain);
      await ipt.deleteChain('nat', chain);
    }
    return performance.now() - t0;
  });
  return { allocs: PLAN.reap.allocs, nomadAllocs: PLAN.reap.nomadAllocs, allocnetMs, nomadMs };
}

if (values.peer === DEFAULT_PEER && !existsSync(DEFAULT_PEER)) {
  // The peer is not part of this repository: its own script installs Go and builds it.
  const script = join(DEFAULT_PEER, '..', '..', 'build.sh');
  if (!existsSync(script)) {
    process.stderr.write(
      `the peer (go-cni) is expected at ${DEFAULT_PEER}, built by ${script}, which is not there: ` +
        'the repository is meant to sit next to ../shared; or pass --peer PATH to a built peercni\n',
    );
    process.exit(2);
  }
  log(`the peer is not built: running ${script}`);
  await execa('bash', [script], { stdout: 'inherit', stderr: 'inherit' });
}
await requireNetworkTestHost(['ip', 'iptables', 'nsenter', `${PLUGIN_DIR}/bridge`, values.peer]);
const started = Date.now();
const results: SuiteResults = {
  command: `node tools/bench/dist/suite.js${QUICK ? ' --quick' : ''}`,
  environment: await environment(),
  plan: PLAN,
  sequential: ONLY.has('sequential') ? await sequential() : [],
  concurrent: ONLY.has('concurrent') ? await concurrent() : [],
  scale: ONLY.has('scale') ? await scale() : undefined,
  reap: ONLY.has('reap') ? await reap() : undefined,
  durationS: 0,
};
const final: SuiteResults = { ...results, durationS: (Date.now() - started) / 1000 };
mkdirSync(values.out, { recursive: true });
writeFileSync(join(values.out, 'suite.json'), `${JSON.stringify(final, null, 2)}\n`);
const summary = await writeReport(final, {
  out: values.out,
  docs: values.docs ? join(REPO, 'docs') : undefined,
});
process.stdout.write(summary);
log(`done in ${final.durationS.toFixed(0)} s; results in ${values.out}`);
