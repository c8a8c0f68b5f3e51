#!/usr/bin/env node
// The benchmark suite: allocnet against go-cni (tools/gocni-driver: Nomad's calls over Debian's
// go-cni) and against the plugins' own floor, in one run, with nothing from outside the
// repository. The contenders are contenders.ts's; report.ts's METHOD says how each scenario is
// measured:
//   sequential : the four contenders on one node, interleaved operation by operation (the order
//                of each round from interleave.ts), N setups then N teardowns, R reps
//   concurrent : N setups W at a time, each contender on a fresh node, rounds interleaved
//   scale      : the agent up to M live allocations one at a time, the floor and the library
//                empty and full on the same node, then a restart: first answer, restore finished,
//                RSS before and after
//   reap       : leaked allocations in reap.ts's two shapes at 1,000 and 5,000, reaped by
//                allocnet; Nomad's per-allocation forceCleanup on the netns-deleted shape
// Writes every raw sample and the environment as JSON, a markdown summary with the goals, and
// PNG charts (report.ts); `--docs` also rewrites docs/performance.md.
//
//   node tools/bench/dist/suite.js [--quick] [--out DIR] [--docs] [--only a,b]
//        [--reap-allocs 1000,5000] [--plugin-dir DIR]
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { tempDir } from '@allocnet/cni/testing';
import { createNetnsLab, requireNetworkTestHost } from '@allocnet/testns';
import type { NetnsLab, TestNetns } from '@allocnet/testns';
import {
  connect,
  firstAnswer,
  processUsage,
  spawnBenchAgent,
  startBenchAgent,
} from './agent-process.js';
import type { BenchAgent, BenchAgentOptions } from './agent-process.js';
import { agentOps, startContender, startInner } from './contenders.js';
import type { Allocation, ContenderDriver, OpResult } from './contenders.js';
import { environment } from './env.js';
import { BenchError, intListFlag } from './errors.js';
import { GOCNI_DRIVER, removeLibcniCache } from './gocni.js';
import { interleave, roundOrder } from './interleave.js';
import { AGENT_MAIN, DIST, REPO, RESULTS } from './paths.js';
import { pool } from './pool.js';
import { reapOnce } from './reap.js';
import type { LeakShape } from './reap.js';
import { writeReport } from './report.js';
import { CONTENDERS, INTERLEAVING } from './summary.js';
import type {
  ConcurrentBatch,
  ConcurrentRun,
  Contender,
  ContenderSamples,
  InnerSamples,
  ReapCase,
  ReapRun,
  ScaleRun,
  SequentialRun,
  SuiteResults,
} from './summary.js';

const SCENARIOS = ['sequential', 'concurrent', 'scale', 'reap'] as const;
const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    out: { type: 'string', default: RESULTS },
    docs: { type: 'boolean', default: false },
    only: { type: 'string', default: SCENARIOS.join(',') },
    'reap-allocs': { type: 'string' },
    'plugin-dir': { type: 'string', default: '/usr/lib/cni' },
  },
});
const QUICK = values.quick;
const PLAN = {
  sequential: { n: QUICK ? 10 : 50, reps: QUICK ? 1 : 3 },
  concurrent: { n: 64, width: 8, rounds: QUICK ? 1 : 5 },
  scale: { live: QUICK ? 100 : 1000, window: QUICK ? 20 : 50, floorAllocs: 10 },
  reap: {
    sizes:
      values['reap-allocs'] === undefined
        ? QUICK
          ? [1000]
          : [1000, 5000]
        : intListFlag('--reap-allocs', values['reap-allocs'], 1, 10_000),
    reps: QUICK ? 3 : 7,
    nomadAllocs: QUICK ? 100 : 1000,
    nomadReps: QUICK ? 1 : 2,
  },
};
const ONLY = new Set(
  values.only.split(',').map((s) => {
    if (!(SCENARIOS as readonly string[]).includes(s))
      throw new BenchError(`--only ${JSON.stringify(s)} is not one of ${SCENARIOS.join(', ')}`, {
        code: 'invalid-flag',
        flag: '--only',
      });
    return s;
  }),
);
const PLUGIN_DIR = values['plugin-dir'];

/** This run's part of every id: go-cni's cache files are the host's, shared with other runs. */
const RUN = (process.pid % 0x10000).toString(16).padStart(4, '0');
/** Allocation ids as the agent takes them (UUIDs): a tag per contender and scenario, then `k`. */
const idOf = (tag: string, k: number) =>
  `${tag}-${RUN}-4000-8000-${k.toString(16).padStart(12, '0')}`;
const TAG: Readonly<Record<Contender, string>> = {
  floor: 'f1000000',
  peer: 'c0c00000',
  'allocnet-lib': 'e1000000',
  'allocnet-agent': 'a9e00000',
};
/** Host ports: each contender its own range, so that allocations live at once never share one. */
const PORT_BASE: Readonly<Record<Contender, number>> = {
  floor: 21000,
  peer: 22000,
  'allocnet-lib': 23000,
  'allocnet-agent': 24000,
};
/** Every id given to go-cni, for removing what it left in the host's libcni cache. */
const peerIds = new Set<string>();
const hadLibcniDirs = existsSync('/var/lib/cni');

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
    try {
      await lab.dispose();
    } finally {
      await tmp.remove();
    }
  }
}

/** Starts every contender on one node (the order does not matter: none is timed yet). */
async function startAll(
  contenders: readonly Contender[],
  lab: NetnsLab,
  node: TestNetns,
  dir: string,
): Promise<Map<Contender, ContenderDriver>> {
  const drivers = new Map<Contender, ContenderDriver>();
  try {
    for (const c of contenders)
      drivers.set(
        c,
        await startContender(c, {
          node,
          dir,
          pluginDir: PLUGIN_DIR,
          netnsPrefix: `${lab.prefix}-A`,
        }),
      );
  } catch (error) {
    await stopAll(drivers);
    throw error;
  }
  return drivers;
}

async function stopAll(drivers: ReadonlyMap<Contender, ContenderDriver>): Promise<void> {
  const stopped = await Promise.allSettled([...drivers.values()].map((d) => d.stop()));
  for (const s of stopped)
    if (s.status === 'rejected') log(`a contender did not stop cleanly: ${String(s.reason)}`);
}

/** An allocation of contender `c`: id `k` under `tag`, namespace `netns`, port base + `k`. */
function allocation(c: Contender, tag: string, k: number, netns: TestNetns): Allocation {
  const id = idOf(tag, k);
  if (c === 'peer') peerIds.add(id);
  return { id, netns: netns.path, port: PORT_BASE[c] + k };
}

async function sequential(): Promise<SequentialRun> {
  const { n, reps } = PLAN.sequential;
  // Per contender n namespaces, reused by every rep (a teardown leaves one as it was made).
  return withNode(CONTENDERS.length * n, async (lab, node, ctrs, dir) => {
    const netnsOf = (c: Contender, i: number) => ctrs[CONTENDERS.indexOf(c) * n + i] as TestNetns;
    const drivers = await startAll(INTERLEAVING, lab, node, dir);
    const samples = new Map<Contender, { setupMs: number[]; teardownMs: number[]; failures: string[]; retries: number }>(
      CONTENDERS.map((c) => [c, { setupMs: [], teardownMs: [], failures: [], retries: 0 }]),
    ); // prettier-ignore
    const record = (c: Contender, phase: 'setupMs' | 'teardownMs', r: OpResult) => {
      const s = samples.get(c);
      if (s === undefined) return;
      if (r.ok) {
        s[phase].push(r.ms);
        s.retries += r.retries;
      } else {
        s[phase].push(Number.NaN);
        s.failures.push(r.error);
      }
    };
    const run = (c: Contender) => drivers.get(c) as ContenderDriver;
    try {
      // One untimed setup and teardown each: the bridge, the shared chains, warm caches.
      for (const c of roundOrder(INTERLEAVING, 0)) {
        const warm = allocation(c, `${TAG[c].slice(0, 4)}ffff`, 0, netnsOf(c, 0));
        for (const r of [await run(c).setup(warm), await run(c).teardown(warm)])
          if (!r.ok) log(`sequential: ${c}'s untimed warm-up failed: ${r.error}`);
      }
      for (let rep = 0; rep < reps; rep++) {
        log(
          `sequential rep ${rep + 1}/${reps}: ${n} rounds of setups, then of teardowns, interleaved`,
        );
        for (const [phase, op] of [
          ['setupMs', 'setup'],
          ['teardownMs', 'teardown'],
        ] as const)
          // Round k = rep·n + i: allocation i of each contender, in that round's order.
          for (const { contender: c, index: i } of interleave(INTERLEAVING, n, rep * n)) {
            const k = rep * n + i;
            record(c, phase, await run(c)[op](allocation(c, TAG[c], k, netnsOf(c, i))));
          }
      }
    } finally {
      await stopAll(drivers);
    }
    const out = Object.fromEntries(
      CONTENDERS.map((c) => [c, samples.get(c) as ContenderSamples]),
    ) as Record<Contender, ContenderSamples>;
    return { n, reps, samples: out };
  });
}

/** One contender's batch: N setups W at a time on a fresh node, timed, then N teardowns. */
async function batch(c: Contender, round: number): Promise<ConcurrentBatch> {
  const { n, width } = PLAN.concurrent;
  return withNode(n, async (lab, node, ctrs, dir) => {
    const drivers = await startAll([c], lab, node, dir);
    const driver = drivers.get(c) as ContenderDriver;
    const tag = `${TAG[c].slice(0, 6)}${round.toString(16).padStart(2, '0')}`;
    const allocs = ctrs.map((ns, i) => allocation(c, tag, i, ns));
    const setupMs: number[] = [];
    const failures: string[] = [];
    let retries = 0;
    try {
      const started = performance.now();
      await pool(n, width, async (i) => {
        const r = await driver.setup(allocs[i] as Allocation);
        if (r.ok) {
          setupMs.push(r.ms);
          retries += r.retries;
        } else failures.push(r.error);
      });
      const totalMs = performance.now() - started;
      await pool(n, width, async (i) => {
        // A teardown's time is not a figure here; a failed one shows in the node's disposal.
        const r = await driver.teardown(allocs[i] as Allocation);
        if (!r.ok) log(`concurrent: ${c} teardown failed: ${r.error}`);
      });
      return { round, contender: c, setupMs, failures, retries, totalMs };
    } finally {
      await stopAll(drivers);
    }
  });
}

async function concurrent(): Promise<ConcurrentRun> {
  const { n, width, rounds } = PLAN.concurrent;
  const batches: ConcurrentBatch[] = [];
  for (let round = 0; round < rounds; round++)
    for (const c of roundOrder(INTERLEAVING, round)) {
      log(
        `concurrent round ${round + 1}/${rounds}: ${c}, ${n} setups ${width} at a time, fresh node`,
      );
      batches.push(await batch(c, round));
    }
  return { n, width, rounds, batches };
}

/** The agent up to M live allocations one at a time, a restart, then all torn down one at a time. */
async function scale(): Promise<ScaleRun> {
  const { live: M, window, floorAllocs: FLOOR } = PLAN.scale;
  return withNode(M + 2 * FLOOR, async (lab, node, all, dir) => {
    const ctrs = all.slice(0, M);
    const options: BenchAgentOptions = {
      node,
      dir: join(dir, 'agent'),
      ipamDir: join(dir, 'ipam'),
      netnsPrefix: `${lab.prefix}-S`,
      pluginDir: PLUGIN_DIR,
    };
    // The plugins' own cost on this node, empty and then with M allocations: the floor. The same
    // for allocnet's CHECK (what a restore runs for each allocation), on the same node.
    const innerAt = async (method: 'floor' | 'lib', from: number): Promise<InnerSamples> => {
      const inner = startInner(method, {
        node,
        dir,
        pluginDir: PLUGIN_DIR,
        cacheDir: join(dir, `cache-${method}`),
      });
      const out = { setupMs: [] as number[], checkMs: [] as number[], teardownMs: [] as number[] };
      const allocs = all.slice(from, from + FLOOR).map((ns, j) => ({
        id: idOf(method === 'floor' ? 'f1005ca1' : 'e1005ca1', from + j),
        netns: ns.path,
        port: 50000 + from + j,
      }));
      try {
        for (const [op, into] of [
          ['setup', out.setupMs],
          ['check', out.checkMs],
          ['teardown', out.teardownMs],
        ] as const)
          for (const a of allocs) {
            const r = await inner.call(op, a);
            if (!r.ok)
              throw new Error(
                `scale: ${method} ${op} of ${JSON.stringify(a.id)} failed: ${r.error}`,
              );
            into.push(r.ms);
          }
      } finally {
        await inner.stop();
      }
      return out;
    };
    const floorEmpty = await innerAt('floor', M);
    const libEmpty = await innerAt('lib', M);
    let agent: BenchAgent = await startBenchAgent(options);
    try {
      const ops = agentOps(agent);
      const alloc = (i: number) => ({
        id: idOf('5ca1e000', i),
        netns: (ctrs[i] as TestNetns).path,
        port: 20000 + i,
      });
      const timed = async (r: Promise<OpResult>, what: string) => {
        const done = await r;
        if (!done.ok) throw new Error(`scale: ${what} failed: ${done.error}`);
        return done.ms;
      };
      const setupMs: number[] = [];
      const before = processUsage(agent.pid);
      for (let i = 0; i < M; i++) {
        setupMs.push(await timed(ops.setup(alloc(i)), `setup ${i + 1} of ${M}`));
        if ((i + 1) % 100 === 0) log(`scale: ${i + 1}/${M} live`);
      }
      const after = processUsage(agent.pid);
      log(`scale: the floor and the library with ${M} live allocations`);
      const floorFull = await innerAt('floor', M + FLOOR);
      const libFull = await innerAt('lib', M + FLOOR);
      log(`scale: restarting the agent with ${M} live allocations`);
      await agent.stop();
      const spawned = await spawnBenchAgent(options);
      let restart: ScaleRun['restart'];
      try {
        const first = await firstAnswer(spawned, 600_000);
        const finished = await spawned.line('restore finished', 600_000);
        // The agent's own line once the restore and the first reconcile are done (and the
        // memory they freed handed back): the RSS after the restore is read after it.
        await spawned.line('restored allocations from the last run', 600_000);
        const readyAt = await spawned.ready(600_000);
        agent = connect(spawned, readyAt);
        restart = {
          spawnToFirstAnswerMs: first.at - spawned.spawnedAt,
          listedAtFirstAnswer: first.listed,
          spawnToRestoreFinishedMs: finished.at - spawned.spawnedAt,
          spawnToReadyMs: readyAt - spawned.spawnedAt,
          restoreMs: Number(finished.fields.durationMs ?? Number.NaN),
          kept: Number(finished.fields.kept ?? Number.NaN),
          recreated: Number(finished.fields.recreated ?? Number.NaN),
          failed: Number(finished.fields.failed ?? Number.NaN),
        };
      } catch (error) {
        await spawned.stop();
        throw error;
      }
      const afterRestore = processUsage(agent.pid);
      const again = agentOps(agent);
      const teardownMs: number[] = [];
      for (let i = 0; i < M; i++) {
        teardownMs.push(await timed(again.teardown(alloc(i)), `teardown ${i + 1} of ${M}`));
        if ((i + 1) % 100 === 0) log(`scale: ${M - i - 1} live`);
      }
      return {
        live: M,
        window,
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
  const { sizes, reps, nomadAllocs, nomadReps } = PLAN.reap;
  const cases: (ReapCase & { runsMs: number[]; reps: number })[] = [
    ...sizes.flatMap((allocs) =>
      (['full', 'netns-deleted'] as const).map((shape: LeakShape) => ({
        method: 'allocnet' as const,
        shape,
        allocs,
        runsMs: [] as number[],
        reps,
      })),
    ),
    {
      method: 'nomad' as const,
      shape: 'netns-deleted' as const,
      allocs: nomadAllocs,
      runsMs: [],
      reps: nomadReps,
    },
  ];
  // One untimed allocnet reap first (the smallest full case): the first reap of a process loads
  // the netlink bindings and compiles the parser, ~100 ms more at 1,000 leaks; that lands on no
  // contender's samples.
  const warm = cases[0];
  if (warm !== undefined) {
    const ms = await reapOnce(warm);
    log(
      `reap warm-up (untimed): ${warm.method} reaped ${warm.allocs} ${warm.shape} leaks in ${ms.toFixed(1)} ms`,
    );
  }
  for (let rep = 0; rep < reps; rep++)
    for (const c of roundOrder(
      cases.filter((x) => x.reps > rep),
      rep,
    )) {
      const ms = await reapOnce(c);
      c.runsMs.push(ms);
      log(
        `reap rep ${rep + 1}: ${c.method} reaped ${c.allocs} ${c.shape} leaks in ${ms.toFixed(1)} ms`,
      );
    }
  return {
    cases: cases.map(({ method, shape, allocs, runsMs }) => ({ method, shape, allocs, runsMs })),
  };
}

await requireNetworkTestHost([
  'ip', 'iptables', 'iptables-restore', 'nsenter', `${PLUGIN_DIR}/bridge`, GOCNI_DRIVER, AGENT_MAIN,
  join(DIST, 'suite-inner.js'),
]); // prettier-ignore
const started = Date.now();
let results: SuiteResults;
try {
  results = {
    command: `node tools/bench/dist/suite.js${process.argv.slice(2).length > 0 ? ` ${process.argv.slice(2).join(' ')}` : ''}`,
    environment: await environment(),
    plan: PLAN,
    sequential: ONLY.has('sequential') ? await sequential() : undefined,
    concurrent: ONLY.has('concurrent') ? await concurrent() : undefined,
    scale: ONLY.has('scale') ? await scale() : undefined,
    reap: ONLY.has('reap') ? await reap() : undefined,
    durationS: 0,
  };
} finally {
  await removeLibcniCache(peerIds, hadLibcniDirs);
}
const final: SuiteResults = { ...results, durationS: (Date.now() - started) / 1000 };
mkdirSync(values.out, { recursive: true });
writeFileSync(join(values.out, 'suite.json'), `${JSON.stringify(final, null, 2)}\n`);
const summary = await writeReport(final, {
  out: values.out,
  docs: values.docs ? join(REPO, 'docs') : undefined,
});
process.stdout.write(summary);
log(`done in ${final.durationS.toFixed(0)} s; results in ${values.out}`);
