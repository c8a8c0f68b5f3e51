// The suite's report: a markdown summary (p50/p95, ratios against the floor and the peer from the
// same run, the goals), with the charts of charts.ts beside it.
import { mkdirSync, writeFileSync } from 'node:fs';
import * as prettier from 'prettier';
import { join } from 'node:path';
import { latencySpec, png, scaleSpec, throughputSpec } from './charts.js';
import { percentile } from './stats.js';
import { CONTENDERS, median, phases, windowP50 } from './summary.js';
import type { Contender, ConcurrentRun, ScaleRun, SequentialRun, SuiteResults } from './summary.js';

export type {
  ConcurrentRun,
  Contender,
  InnerSamples,
  ReapRun,
  ScaleRun,
  SequentialRun,
  SuiteResults,
} from './summary.js';

const f1 = (n: number) => (Number.isNaN(n) ? '–' : n.toFixed(1));
const f2 = (n: number) => (Number.isNaN(n) ? '–' : n.toFixed(2));

interface Goal {
  readonly goal: string;
  readonly measured: string;
  readonly met: boolean | undefined;
}

/** Per contender and phase: medians over reps of p50 and p95, and per-rep ratios' medians. */
function sequentialTable(runs: readonly SequentialRun[]) {
  const byRep = new Map<number, Map<Contender, ReturnType<typeof phases>>>();
  for (const run of runs) {
    const m = byRep.get(run.rep) ?? new Map<Contender, ReturnType<typeof phases>>();
    m.set(run.contender, phases(run.result));
    byRep.set(run.rep, m);
  }
  const reps = [...byRep.values()];
  const stat = (c: Contender, phase: 'setup' | 'teardown', key: 'p50' | 'p95') =>
    median(reps.map((m) => m.get(c)?.[phase][key] ?? Number.NaN));
  const ratio = (c: Contender, vs: Contender, phase: 'setup' | 'teardown') =>
    median(
      reps.map(
        (m) => (m.get(c)?.[phase].p50 ?? Number.NaN) / (m.get(vs)?.[phase].p50 ?? Number.NaN),
      ),
    );
  return { stat, ratio, reps: reps.length };
}

function concurrentTable(runs: readonly ConcurrentRun[]) {
  const rows = CONTENDERS.map((c) => {
    const mine = runs.filter((r) => r.contender === c).map((r) => phases(r.result).setup);
    return {
      contender: c,
      failed: mine.reduce((n, p) => n + p.failed, 0),
      retries: mine.reduce((n, p) => n + p.retries, 0),
      attempted: mine.reduce((n, p) => n + p.ok + p.failed, 0),
      throughput: median(mine.map((p) => p.ok / (p.totalMs / 1000))),
      p50: median(mine.map((p) => p.p50)),
    };
  });
  return rows;
}

function scaleSummary(s: ScaleRun) {
  const w = s.window;
  const setupLow = windowP50(s.setupMs, 0, w);
  const setupHigh = windowP50(s.setupMs, s.live - w, s.live);
  // Teardowns run from `live` allocations down to one: the first window is at the high count.
  const teardownHigh = windowP50(s.teardownMs, 0, w);
  const teardownLow = windowP50(s.teardownMs, s.live - w, s.live);
  const p50 = (v: readonly number[]) => (v.length === 0 ? Number.NaN : percentile(v, 50));
  return {
    setupLow,
    setupHigh,
    teardownLow,
    teardownHigh,
    floorSetupLow: p50(s.floor.empty.setupMs),
    floorSetupHigh: p50(s.floor.full.setupMs),
    floorTeardownLow: p50(s.floor.empty.teardownMs),
    floorTeardownHigh: p50(s.floor.full.teardownMs),
    floorCheckLow: p50(s.floor.empty.checkMs ?? []),
    floorCheckHigh: p50(s.floor.full.checkMs ?? []),
    libCheckLow: p50(s.lib?.empty.checkMs ?? []),
    libCheckHigh: p50(s.lib?.full.checkMs ?? []),
  };
}

/** The goals of issue 8, measured in this run. */
function goals(r: SuiteResults): Goal[] {
  const out: Goal[] = [];
  if (r.sequential.length > 0) {
    const t = sequentialTable(r.sequential);
    const check = (phase: 'setup' | 'teardown', vs: Contender, limit: number) => {
      const v = t.ratio('allocnet-agent', vs, phase);
      out.push({
        goal: `${phase} p50 through the agent ≤ ${limit.toFixed(2)}× ${vs}`,
        measured: `${f2(v)}×`,
        met: Number.isNaN(v) ? undefined : v <= limit,
      });
    };
    check('setup', 'floor', 1.1);
    check('setup', 'peer', 1.0);
    check('teardown', 'floor', 1.1);
    check('teardown', 'peer', 1.0);
  }
  if (r.concurrent.length > 0) {
    const rows = concurrentTable(r.concurrent);
    const agent = rows.find((x) => x.contender === 'allocnet-agent');
    const peer = rows.find((x) => x.contender === 'peer');
    if (agent !== undefined)
      out.push({
        goal: 'concurrent: zero failed setups through the agent',
        measured: `${agent.failed} failed, ${agent.retries} retries in ${agent.attempted}`,
        met: agent.failed === 0,
      });
    if (agent !== undefined && peer !== undefined)
      out.push({
        goal: 'concurrent: throughput through the agent ≥ go-cni',
        measured: `${f2(agent.throughput)} vs ${f2(peer.throughput)} setups/s`,
        met: agent.throughput >= peer.throughput,
      });
  }
  if (r.scale !== undefined) {
    const s = scaleSummary(r.scale);
    const w = r.scale.window;
    out.push({
      goal: `scale: setup p50 at ${r.scale.live - w + 1}–${r.scale.live} live ≤ 1.5× at 1–${w}`,
      measured: `${f2(s.setupHigh / s.setupLow)}× (${f1(s.setupHigh)} / ${f1(s.setupLow)} ms)`,
      met: s.setupHigh / s.setupLow <= 1.5,
    });
    out.push({
      goal: `scale: teardown p50 at ${r.scale.live - w + 1}–${r.scale.live} live ≤ 1.5× at 1–${w}`,
      measured: `${f2(s.teardownHigh / s.teardownLow)}× (${f1(s.teardownHigh)} / ${f1(s.teardownLow)} ms)`,
      met: s.teardownHigh / s.teardownLow <= 1.5,
    });
    out.push({
      goal: `agent RSS ≤ 150 MB with ${r.scale.live} live allocations`,
      measured: `${f1(r.scale.rssMiB)} MiB (${f1(r.scale.rssAfterRestoreMiB)} after the restart)`,
      met: r.scale.rssMiB * 1.048576 <= 150,
    });
    out.push({
      goal: `restore of ${r.scale.live} allocations ≤ 60 s`,
      measured: `${f1(r.scale.restart.restoreMs / 1000)} s (${f1(r.scale.restart.spawnToReadyMs / 1000)} s from spawn to serving; kept ${r.scale.restart.kept}, recreated ${r.scale.restart.recreated}, failed ${r.scale.restart.failed})`,
      met: r.scale.restart.restoreMs <= 60_000 && r.scale.restart.failed === 0,
    });
  }
  if (r.reap !== undefined) {
    const speedup = r.reap.nomadMs / r.reap.nomadAllocs / (r.reap.allocnetMs / r.reap.allocs);
    out.push({
      goal: `reap ${r.reap.allocs} leaked allocations ≥ 100× faster than per-allocation cleanup`,
      measured: `${speedup.toFixed(0)}× per allocation`,
      met: speedup >= 100,
    });
    out.push({
      goal: `reap ${r.reap.allocs} leaked allocations in < 1 s`,
      measured: `${f1(r.reap.allocnetMs)} ms`,
      met: r.reap.allocnetMs < 1000,
    });
  }
  return out;
}

/** The markdown summary. */
export function markdown(
  r: SuiteResults,
  images: { latency?: string; scale?: string; throughput?: string },
): string {
  const e = r.environment;
  const lines: string[] = [
    `Command: \`${r.command}\` (${r.durationS.toFixed(0)} s). Machine: ${e.cpu}, ${e.cores} cores, ${e.memoryGiB} GiB; kernel ${e.kernel}; Node ${e.node}; ${e.plugins}; ${e.iptables}; peer: ${e.goCni}; load before the run ${e.loadAverage}. ${e.date}.`,
    '',
  ];
  const g = goals(r);
  if (g.length > 0) {
    lines.push('### Goals', '', '| goal | measured | met |', '| --- | --- | --- |');
    for (const x of g)
      lines.push(
        `| ${x.goal} | ${x.measured} | ${x.met === undefined ? '–' : x.met ? 'yes' : '**no**'} |`,
      );
    lines.push('');
  }
  if (r.sequential.length > 0) {
    const t = sequentialTable(r.sequential);
    const n = (r.plan as { sequential: { n: number } }).sequential.n;
    lines.push(
      `### Sequential: ${n} setups, then ${n} teardowns, one at a time (medians over ${t.reps} rep(s), fresh node each)`,
      '',
      '| contender | setup p50 ms | setup p95 ms | teardown p50 ms | teardown p95 ms | setup ÷ floor | setup ÷ peer | teardown ÷ floor | teardown ÷ peer |',
      '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    );
    for (const c of CONTENDERS)
      lines.push(
        `| ${c} | ${f1(t.stat(c, 'setup', 'p50'))} | ${f1(t.stat(c, 'setup', 'p95'))} | ${f1(t.stat(c, 'teardown', 'p50'))} | ${f1(t.stat(c, 'teardown', 'p95'))} | ${f2(t.ratio(c, 'floor', 'setup'))} | ${f2(t.ratio(c, 'peer', 'setup'))} | ${f2(t.ratio(c, 'floor', 'teardown'))} | ${f2(t.ratio(c, 'peer', 'teardown'))} |`,
      );
    lines.push(
      '',
      "Teardown of allocnet includes the leak audit; the peer's is go-cni's Remove; the floor's is the plugins' DEL alone.",
      '',
    );
    if (images.latency !== undefined) lines.push(`![latency per contender](${images.latency})`, '');
  }
  if (r.concurrent.length > 0) {
    const p = r.plan as { concurrent: { n: number; width: number; reps: number } };
    lines.push(
      `### Concurrent: ${p.concurrent.n} setups ${p.concurrent.width} at a time on a fresh node (${p.concurrent.reps} rep(s))`,
      '',
      '| contender | failed setups | retries | setups/s (median) | setup p50 ms |',
      '| --- | --- | --- | --- | --- |',
    );
    for (const row of concurrentTable(r.concurrent))
      lines.push(
        `| ${row.contender} | ${row.failed} of ${row.attempted} | ${row.retries} | ${f2(row.throughput)} | ${f1(row.p50)} |`,
      );
    lines.push(
      '',
      'The peer and the floor make one attempt per setup (their failures are the first-setup race); allocnet retries as Nomad does and counts retries.',
      '',
    );
    if (images.throughput !== undefined) lines.push(`![throughput](${images.throughput})`, '');
  }
  if (r.scale !== undefined) {
    const s = scaleSummary(r.scale);
    const w = r.scale.window;
    lines.push(
      `### Scale: the agent up to ${r.scale.live} live allocations, one operation at a time`,
      '',
      `| | 1–${w} live | ${r.scale.live - w + 1}–${r.scale.live} live | ratio |`,
      '| --- | --- | --- | --- |',
      `| setup p50 ms | ${f1(s.setupLow)} | ${f1(s.setupHigh)} | ${f2(s.setupHigh / s.setupLow)} |`,
      `| teardown p50 ms | ${f1(s.teardownLow)} | ${f1(s.teardownHigh)} | ${f2(s.teardownHigh / s.teardownLow)} |`,
      `| floor ADD p50 ms (empty node / ${r.scale.live} live) | ${f1(s.floorSetupLow)} | ${f1(s.floorSetupHigh)} | ${f2(s.floorSetupHigh / s.floorSetupLow)} |`,
      `| floor DEL p50 ms (empty node / ${r.scale.live} live) | ${f1(s.floorTeardownLow)} | ${f1(s.floorTeardownHigh)} | ${f2(s.floorTeardownHigh / s.floorTeardownLow)} |`,
      ...(Number.isNaN(s.floorCheckLow)
        ? []
        : [
            `| floor CHECK p50 ms, without portmap (empty node / ${r.scale.live} live) | ${f1(s.floorCheckLow)} | ${f1(s.floorCheckHigh)} | ${f2(s.floorCheckHigh / s.floorCheckLow)} |`,
            `| allocnet-lib CHECK p50 ms (empty node / ${r.scale.live} live) | ${f1(s.libCheckLow)} | ${f1(s.libCheckHigh)} | ${f2(s.libCheckHigh / s.libCheckLow)} |`,
          ]),
      '',
      "The floor rows are the plugins alone (each exec'd directly, 10 setups, CHECKs and teardowns on the same node before the first allocation and with all of them live): how much of the growth is the plugins' own (their iptables and netlink calls slow down as the ruleset and the bridge grow). The floor's CHECK runs loopback, bridge (with host-local) and firewall; allocnet's runs loopback and bridge and checks the firewall's and portmap's rules itself. A restore is one CHECK per allocation, 8 at a time.",
      '',
      `Agent RSS with ${r.scale.live} live: ${f1(r.scale.rssMiB)} MiB (${f1(r.scale.rssAfterRestoreMiB)} MiB after the restart); agent CPU per setup: ${(r.scale.cpuSecondsPerSetup * 1000).toFixed(1)} ms (the agent process alone; plugins are separate processes). Restore of ${r.scale.live} after a restart: ${f1(r.scale.restart.restoreMs / 1000)} s (kept ${r.scale.restart.kept}, recreated ${r.scale.restart.recreated}, failed ${r.scale.restart.failed}); ${f1(r.scale.restart.spawnToReadyMs / 1000)} s from spawn to serving.`,
      '',
    );
    if (images.scale !== undefined)
      lines.push(`![p50 against live allocations](${images.scale})`, '');
  }
  if (r.reap !== undefined) {
    lines.push(
      '### Leak reap',
      '',
      `allocnet reaped ${r.reap.allocs} leaked allocations (discovery included) in ${f1(r.reap.allocnetMs)} ms (${(r.reap.allocnetMs / r.reap.allocs).toFixed(3)} ms each); Nomad's per-allocation cleanup took ${f1(r.reap.nomadMs)} ms for ${r.reap.nomadAllocs} (${(r.reap.nomadMs / r.reap.nomadAllocs).toFixed(1)} ms each).`,
      '',
    );
  }
  return `${lines.join('\n')}\n`;
}

/** Writes suite.md and the charts into `out` (and docs/performance.md with its images); returns the markdown. */
export async function writeReport(
  r: SuiteResults,
  where: { out: string; docs: string | undefined },
): Promise<string> {
  const targets = [{ dir: where.out, prefix: '' }];
  if (where.docs !== undefined)
    targets.push({ dir: join(where.docs, 'performance'), prefix: 'performance/' });
  const images: { latency?: string; scale?: string; throughput?: string } = {};
  for (const t of targets) {
    mkdirSync(t.dir, { recursive: true });
    if (r.sequential.length > 0) await png(latencySpec(r), join(t.dir, 'latency.png'));
    if (r.concurrent.length > 0) await png(throughputSpec(r), join(t.dir, 'throughput.png'));
    if (r.scale !== undefined) await png(scaleSpec(r.scale), join(t.dir, 'scale.png'));
  }
  if (r.sequential.length > 0) images.latency = 'latency.png';
  if (r.concurrent.length > 0) images.throughput = 'throughput.png';
  if (r.scale !== undefined) images.scale = 'scale.png';
  const summary = markdown(r, images);
  writeFileSync(join(where.out, 'suite.md'), summary);
  if (where.docs !== undefined) {
    const docImages = Object.fromEntries(
      Object.entries(images).map(([k, v]) => [k, `performance/${v}`]),
    );
    const file = join(where.docs, 'performance.md');
    const text = [
      '# Performance',
      '',
      "allocnet against go-cni (`../shared/peer`, the library Nomad uses) and against the plugins' own floor (a plain loop exec'ing each plugin), measured side by side in one run, each contender on fresh throwaway namespaces. Made by the command below (root, after set-up, with the peer built by `../shared/peer/build.sh`); `--quick` is a short run. Every raw sample is in `tools/bench/results/suite.json`.",
      '',
      '## Latest run',
      '',
      markdown(r, docImages),
    ].join('\n');
    // Formatted as the repository's docs are (lint checks docs/ with prettier).
    writeFileSync(
      file,
      await prettier.format(text, { ...(await prettier.resolveConfig(file)), filepath: file }),
    );
  }
  return summary;
}
