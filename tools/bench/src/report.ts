// The suite’s report: the goals (each with its figure’s 95% interval and a verdict), then a table
// per scenario, every figure computed from the raw samples of suite.json by summary.ts, with the
// charts of charts.ts beside it. docs/performance.md is this report under a fixed text saying how
// things are measured; it says nothing about the results that its tables do not show.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as prettier from 'prettier';
import { latencySpec, png, scaleSpec, throughputSpec } from './charts.js';
import { LINES_PER_LEAK } from './reap.js';
import { bootstrapRatio, median, verdict } from './stats.js';
import type { Bound, RatioInterval, Verdict } from './stats.js';
import {
  CONTENDERS,
  concurrentRow,
  growth,
  reapMedian,
  scaleWindows,
  sequentialRatio,
  sequentialStats,
  throughputRatio,
} from './summary.js';
import type {
  Contender,
  Phase,
  ReapAgentRun,
  ScaleRun,
  SequentialRun,
  SuiteResults,
} from './summary.js';

/** The goals (issue 17's, and issue 8's that still stand). */
export const GOALS = {
  /** Agent p50 over go-cni’s, setup and teardown, at most. */
  vsPeer: 0.95,
  /** Agent p50 over the floor’s, at most. */
  vsFloor: 1.1,
  /** Agent setups/s over go-cni’s, 64 at 8, at least. */
  concurrentVsPeer: 1.1,
  /** p50 at the last window of live allocations over the first, at most. */
  scaleGrowth: 1.5,
  rssMiB: 150,
  servingMs: 1000,
  restoreMs: 30_000,
  /** Full-shape leaks reaped (discovery included), by count: milliseconds at most. */
  reapMs: { 1000: 250, 5000: 1250 } as Readonly<Record<number, number>>,
  /** Per allocation, allocnet’s reap over Nomad’s forceCleanup (netns-deleted shape), at least. */
  reapVsNomad: 100,
  /** A running agent’s first ReapLeaks over its warm one, at most (issue 28). */
  firstReapVsWarm: 1.3,
  /** The worst probe call during a reap through the agent over the quiet agent’s worst, ms at most. */
  reapStallMs: 100,
} as const;

const f1 = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : '–');
const f2 = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : '–');
/** A ratio and its interval: `0.97× [0.95, 0.99]`. */
const fr = (r: RatioInterval) => `${f2(r.ratio)}× [${f2(r.lo)}, ${f2(r.hi)}]`;

export interface Goal {
  readonly goal: string;
  /** The figure, with its 95% interval, or "(one measurement)". */
  readonly measured: string;
  readonly verdict: Verdict;
}

const VERDICT_TEXT: Readonly<Record<Verdict, string>> = {
  met: 'yes',
  missed: '**no**',
  undecided: '**no**: the interval straddles the goal',
};

/** A goal on one measurement (no interval: its verdict is on the value itself). */
function once(goal: string, value: number, bound: Bound, measured: string): Goal {
  return {
    goal,
    measured: `${measured} (one measurement)`,
    verdict: verdict({ lo: value, hi: value }, bound),
  };
}

/** The goals measured in this run, in the order of the report’s sections. */
export function goals(r: SuiteResults): Goal[] {
  const out: Goal[] = [];
  const seq = r.sequential;
  if (seq !== undefined) {
    const vs = (phase: Phase, other: Contender, limit: number) => {
      const ratio = sequentialRatio(seq, 'allocnet-agent', other, phase);
      out.push({
        goal: `${phase} p50 through the agent ≤ ${f2(limit)}× ${other === 'peer' ? 'go-cni' : other}`,
        measured: fr(ratio),
        verdict: verdict(ratio, { at: 'most', limit }),
      });
    };
    vs('setup', 'peer', GOALS.vsPeer);
    vs('teardown', 'peer', GOALS.vsPeer);
    vs('setup', 'floor', GOALS.vsFloor);
    vs('teardown', 'floor', GOALS.vsFloor);
  }
  const con = r.concurrent;
  if (con !== undefined) {
    const agent = concurrentRow(con, 'allocnet-agent');
    out.push({
      goal: `concurrent (${con.n} at ${con.width}): zero failed setups through the agent`,
      measured: `${agent.failed} failed, ${agent.retries} retries in ${agent.attempted}`,
      verdict: agent.attempted > 0 && agent.failed === 0 ? 'met' : 'missed',
    });
    const ratio = throughputRatio(con, 'allocnet-agent', 'peer');
    const goal = `concurrent (${con.n} at ${con.width}): setups/s through the agent ≥ ${f2(GOALS.concurrentVsPeer)}× go-cni`;
    const bound = { at: 'least', limit: GOALS.concurrentVsPeer } as const;
    out.push(
      con.rounds < 2
        ? once(goal, ratio.ratio, bound, `${f2(ratio.ratio)}×`)
        : { goal, measured: fr(ratio), verdict: verdict(ratio, bound) },
    );
  }
  const s = r.scale;
  if (s !== undefined) {
    const w = scaleWindows(s);
    const high = `${s.live - s.window + 1}–${s.live}`;
    for (const [phase, ratio] of [
      ['setup', growth(w.setupHigh, w.setupLow)],
      ['teardown', growth(w.teardownHigh, w.teardownLow)],
    ] as const)
      out.push({
        goal: `scale: ${phase} p50 at ${high} live ≤ ${f2(GOALS.scaleGrowth)}× at 1–${s.window}`,
        measured: fr(ratio),
        verdict: verdict(ratio, { at: 'most', limit: GOALS.scaleGrowth }),
      });
    const rss = { at: 'most', limit: GOALS.rssMiB } as const;
    out.push(
      once(`agent RSS ≤ ${GOALS.rssMiB} MiB with ${s.live} live allocations, before a restart`, s.rssMiB, rss, `${f1(s.rssMiB)} MiB`),
      once(`agent RSS ≤ ${GOALS.rssMiB} MiB with ${s.live} live allocations, after a restart (restore finished)`, s.rssAfterRestoreMiB, rss, `${f1(s.rssAfterRestoreMiB)} MiB`),
      once(`serving (first ListAllocNetworks answered) ≤ ${GOALS.servingMs / 1000} s after the agent’s start with ${s.live} allocations`, s.restart.spawnToFirstAnswerMs, { at: 'most', limit: GOALS.servingMs }, `${f1(s.restart.spawnToFirstAnswerMs)} ms`),
    ); // prettier-ignore
    const restore = once(
      `restore of ${s.live} allocations ≤ ${GOALS.restoreMs / 1000} s, none failed`,
      s.restart.restoreMs,
      { at: 'most', limit: GOALS.restoreMs },
      `${f1(s.restart.restoreMs / 1000)} s (kept ${s.restart.kept}, recreated ${s.restart.recreated}, failed ${s.restart.failed})`,
    );
    out.push(s.restart.failed === 0 ? restore : { ...restore, verdict: 'missed' });
  }
  const reap = r.reap;
  if (reap !== undefined) {
    for (const c of reap.cases) {
      const limit = GOALS.reapMs[c.allocs];
      if (c.method !== 'allocnet' || c.shape !== 'full' || limit === undefined) continue;
      const m = reapMedian(c);
      out.push({
        goal: `reap ${c.allocs} full-shape leaked allocations (discovery included) ≤ ${limit} ms`,
        measured: `${f1(m.median)} ms [${f1(m.lo)}, ${f1(m.hi)}] (median of ${c.runsMs.length})`,
        verdict: verdict(m, { at: 'most', limit }),
      });
    }
    const nomad = reap.cases.find((c) => c.method === 'nomad');
    const same = reap.cases
      .filter((c) => c.method === 'allocnet' && c.shape === 'netns-deleted')
      .sort(
        (a, b) =>
          Math.abs(a.allocs - (nomad?.allocs ?? 0)) - Math.abs(b.allocs - (nomad?.allocs ?? 0)),
      )[0];
    if (nomad !== undefined && same !== undefined) {
      // (the reap-agent goals follow the reap ones, below)
      const ratio = speedup(nomad.runsMs, nomad.allocs, same.runsMs, same.allocs);
      out.push({
        goal: `reap (netns-deleted shape) per allocation ≥ ${GOALS.reapVsNomad}× faster than Nomad’s forceCleanup`,
        measured: `${ratio.ratio.toFixed(0)}× [${ratio.lo.toFixed(0)}, ${ratio.hi.toFixed(0)}] (${same.allocs} by allocnet, ${nomad.allocs} by Nomad’s way)`,
        verdict: verdict(ratio, { at: 'least', limit: GOALS.reapVsNomad }),
      });
    }
  }
  if (r.reapAgent !== undefined && r.reapAgent.rounds.length > 0)
    out.push(...reapAgentGoals(r.reapAgent));
  return out;
}

/** The reap-agent scenario’s goals: the first reap against the warm one, the probe during both. */
function reapAgentGoals(run: ReapAgentRun): Goal[] {
  const first = run.rounds.map((r) => r.firstMs);
  const warm = run.rounds.map((r) => r.warmMs);
  const ratio = bootstrapRatio(first, warm, { paired: true, seed: 28 });
  const worst = (v: readonly number[]) => Math.max(...v);
  // Per round: the worst call during either reap over the worst on the same agent when quiet.
  const excess = run.rounds.map(
    (r) => worst([...r.firstProbeMs, ...r.warmProbeMs]) - worst(r.quietMs),
  );
  const quiet = run.rounds.flatMap((r) => r.quietMs);
  const during = run.rounds.flatMap((r) => [...r.firstProbeMs, ...r.warmProbeMs]);
  const most = worst(excess);
  return [
    {
      goal: `reap ${run.leaks} leaks through a running agent: its first ReapLeaks ≤ ${f2(GOALS.firstReapVsWarm)}× the warm one`,
      measured: `${fr(ratio)} (first ${f1(median(first))} ms, warm ${f1(median(warm))} ms, medians of ${run.rounds.length} agents; each agent warmed its reap path once after its start, ${f1(median(run.rounds.map((r) => r.warmUpMs)))} ms median)`,
      verdict: verdict(ratio, { at: 'most', limit: GOALS.firstReapVsWarm }),
    },
    once(
      `reap ${run.leaks} leaks through a running agent (${run.live} live): worst ListAllocNetworks/GetAllocNetwork/Health during it ≤ quiet worst + ${GOALS.reapStallMs} ms`,
      most,
      { at: 'most', limit: GOALS.reapStallMs },
      `+${f1(most)} ms at worst over ${run.rounds.length} agents (worst ${f1(worst(during))} ms during, ${f1(worst(quiet))} ms quiet; p50 ${f1(median(during))} ms during, ${f1(median(quiet))} ms quiet)`,
    ),
  ];
}

/** Nomad’s time per allocation over allocnet’s, with an (unpaired) bootstrap interval. */
function speedup(
  nomadMs: readonly number[],
  nomadAllocs: number,
  allocnetMs: readonly number[],
  allocnetAllocs: number,
): RatioInterval {
  const a = nomadMs.map((ms) => ms / nomadAllocs);
  const b = allocnetMs.map((ms) => ms / allocnetAllocs);
  return bootstrapRatio(a, b, { seed: 29 });
}

function sequentialSection(seq: SequentialRun, images: Images): string[] {
  const ratio = (c: Contender, vs: Contender, phase: Phase) =>
    c === vs ? '1' : fr(sequentialRatio(seq, c, vs, phase));
  const lines = [
    `### Sequential: ${seq.n * seq.reps} setups, then as many teardowns, one at a time, the contenders interleaved operation by operation on one node`,
    '',
    '| contender | setup p50 ms | setup p95 ms | teardown p50 ms | teardown p95 ms | setup ÷ go-cni | teardown ÷ go-cni | setup ÷ floor | teardown ÷ floor |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const c of CONTENDERS) {
    const s = sequentialStats(seq, c, 'setup');
    const t = sequentialStats(seq, c, 'teardown');
    lines.push(
      `| ${c === 'peer' ? 'go-cni' : c} | ${f1(s.p50)} | ${f1(s.p95)} | ${f1(t.p50)} | ${f1(t.p95)} | ${ratio(c, 'peer', 'setup')} | ${ratio(c, 'peer', 'teardown')} | ${ratio(c, 'floor', 'setup')} | ${ratio(c, 'floor', 'teardown')} |`,
    );
  }
  const failures = CONTENDERS.flatMap((c) =>
    seq.samples[c].failures.length === 0
      ? []
      : [`${c}: ${seq.samples[c].failures.length} (${seq.samples[c].failures[0] ?? ''})`],
  );
  lines.push(
    '',
    `Each ratio is the two p50s of its row and column divided (the medians of the paired rounds), with its paired bootstrap 95% interval. Failed operations: ${failures.length === 0 ? 'none' : `${failures.join('; ')}; a round where either contender failed is left out of their ratio`}. Teardown through allocnet includes its leak audit; go-cni’s is its Remove; the floor’s is the plugins’ DEL alone.`,
    '',
  );
  if (images.latency !== undefined) lines.push(`![latency per contender](${images.latency})`, '');
  return lines;
}

interface Images {
  latency?: string;
  scale?: string;
  throughput?: string;
}

/** The markdown summary. */
export function markdown(r: SuiteResults, images: Images): string {
  const e = r.environment;
  const lines: string[] = [
    `Command: \`${r.command}\` (${r.durationS.toFixed(0)} s). Machine: ${e.cpu}, ${e.cores} cores, ${e.memoryGiB} GiB; kernel ${e.kernel}; Node ${e.node}; ${e.plugins}; ${e.iptables}; go-cni: ${e.goCni}; load before the run ${e.loadAverage}. ${e.date}. Code measured: \`${e.code}\`.`,
    '',
  ];
  const g = goals(r);
  if (g.length > 0) {
    lines.push(
      '### Goals',
      '',
      'Met only when the whole 95% interval is on the goal’s side; a figure measured once has no interval.',
      '',
      '| goal | measured [95% interval] | met |',
      '| --- | --- | --- |',
    );
    for (const x of g) lines.push(`| ${x.goal} | ${x.measured} | ${VERDICT_TEXT[x.verdict]} |`);
    lines.push('');
  }
  if (r.sequential !== undefined) lines.push(...sequentialSection(r.sequential, images));
  const con = r.concurrent;
  if (con !== undefined) {
    lines.push(
      `### Concurrent: ${con.n} setups ${con.width} at a time, each contender on a fresh node, ${con.rounds} round(s) interleaved`,
      '',
      '| contender | failed setups | retries | setups/s (median of rounds) | ÷ go-cni | setup p50 ms |',
      '| --- | --- | --- | --- | --- | --- |',
    );
    for (const c of CONTENDERS) {
      const row = concurrentRow(con, c);
      lines.push(
        `| ${c === 'peer' ? 'go-cni' : c} | ${row.failed} of ${row.attempted} | ${row.retries} | ${f2(row.throughput)} | ${c === 'peer' ? '1' : con.rounds < 2 ? `${f2(throughputRatio(con, c, 'peer').ratio)}× (one round)` : fr(throughputRatio(con, c, 'peer'))} | ${f1(row.p50)} |`,
      );
    }
    lines.push(
      '',
      'Setups/s are successful setups over the batch’s time from the first start to the last end, timed by the suite for every contender; the ratio is the two medians of the rounds’ setups/s divided, with a bootstrap 95% interval that resamples the rounds as pairs. go-cni and the floor make one attempt per setup (their failures are the first-setup race on a fresh node); allocnet retries as Nomad does and counts retries.',
      '',
    );
    if (images.throughput !== undefined) lines.push(`![throughput](${images.throughput})`, '');
  }
  if (r.scale !== undefined) lines.push(...scaleSection(r.scale, images));
  const reap = r.reap;
  if (reap !== undefined) {
    lines.push(
      '### Leak reap',
      '',
      '| reaped by | shape | leaked allocations | iptables-save lines each | reaps | median ms [95% interval] | ms per allocation |',
      '| --- | --- | --- | --- | --- | --- | --- |',
    );
    for (const c of reap.cases) {
      const m = reapMedian(c);
      lines.push(
        `| ${c.method === 'nomad' ? 'Nomad’s forceCleanup' : 'allocnet reapLeaks'} | ${c.shape} | ${c.allocs} | ${LINES_PER_LEAK[c.shape]} | ${c.runsMs.length} | ${f1(m.median)} [${f1(m.lo)}, ${f1(m.hi)}] | ${(m.median / c.allocs).toFixed(3)} |`,
      );
    }
    lines.push(
      '',
      'Each reap on a fresh node namespace, discovery included for allocnet; every one brought the node’s whole ruleset back to its baseline (the run stops otherwise).',
      '',
    );
  }
  return `${lines.join('\n')}\n`;
}

function scaleSection(s: ScaleRun, images: Images): string[] {
  const w = scaleWindows(s);
  const p50 = (v: readonly number[]) => median(v);
  const row = (label: string, low: readonly number[], high: readonly number[]) =>
    `| ${label} | ${f1(p50(low))} | ${f1(p50(high))} | ${f2(p50(high) / p50(low))} |`;
  const r = s.restart;
  return [
    `### Scale: the agent up to ${s.live} live allocations, one operation at a time`,
    '',
    `| | 1–${s.window} live | ${s.live - s.window + 1}–${s.live} live | ratio |`,
    '| --- | --- | --- | --- |',
    row('setup p50 ms', w.setupLow, w.setupHigh),
    row('teardown p50 ms', w.teardownLow, w.teardownHigh),
    row(`floor ADD p50 ms (empty node / ${s.live} live)`, s.floor.empty.setupMs, s.floor.full.setupMs),
    row(`floor DEL p50 ms (empty node / ${s.live} live)`, s.floor.empty.teardownMs, s.floor.full.teardownMs),
    row(`floor CHECK p50 ms, without portmap (empty node / ${s.live} live)`, s.floor.empty.checkMs, s.floor.full.checkMs),
    row(`allocnet-lib CHECK p50 ms (empty node / ${s.live} live)`, s.lib.empty.checkMs, s.lib.full.checkMs),
    '',
    "The floor rows are the plugins alone (each exec’d directly, 10 setups, CHECKs and teardowns on the same node before the first allocation and with all of them live): how much of the growth is the plugins’ own. The floor’s CHECK runs loopback, bridge (with host-local) and firewall; allocnet’s runs loopback and bridge and checks the firewall’s and portmap’s rules itself. A restore is one CHECK per allocation.",
    '',
    `Restart with ${s.live} allocations: first ListAllocNetworks answered ${f1(r.spawnToFirstAnswerMs)} ms after the spawn (listing ${r.listedAtFirstAnswer}); \`restore finished\` logged after ${f1(r.spawnToRestoreFinishedMs / 1000)} s (the restore itself ${f1(r.restoreMs / 1000)} s: kept ${r.kept}, recreated ${r.recreated}, failed ${r.failed}); ready file after ${f1(r.spawnToReadyMs / 1000)} s. Agent RSS: ${f1(s.rssMiB)} MiB with ${s.live} live before the restart, ${f1(s.rssAfterRestoreMiB)} MiB after it once restored. Agent CPU per setup: ${(s.cpuSecondsPerSetup * 1000).toFixed(1)} ms (the agent process alone; plugins are separate processes).`,
    '',
    ...(images.scale === undefined ? [] : [`![p50 against live allocations](${images.scale})`, '']),
  ]; // prettier-ignore
}

/**
 * How the numbers are made, the fixed text of docs/performance.md above the run’s report. It
 * states the method only: every result is in the tables below it.
 */
export const METHOD = [
  'allocnet against go-cni (the library Nomad’s client uses: `tools/gocni-driver`, Debian’s go-cni 1.1.7 doing Nomad’s Setup and Remove calls) and against the plugins’ own floor (a plain loop exec’ing each plugin of the chain), measured side by side in one run. Made by the command below as root after set-up, with nothing from outside the repository; `--quick` is a short run, `--only sequential,concurrent,scale,reap,reap-agent` picks scenarios. Every raw sample is in `tools/bench/results/suite.json`.',
  '',
  '## How it is measured',
  '',
  '- **Contenders.** `floor` (`suite-inner.js --method floor`), `go-cni` (`gocni-driver serve`: one long-lived go-cni, as in Nomad’s client, one attempt per setup), `allocnet-lib` (`@allocnet/cni-configurator` in a process of its own) and `allocnet-agent` (the agent process, called over its unix socket by the suite). Each is a process of its own in the node namespace (`nsenter --net=`); all run allocnet’s default network (the agent’s embedded conflist, the same file for go-cni) with one host-local store, and map one port each, as tcp and udp, to 8080. Every allocation’s network namespace is made beforehand, the same way for all.',
  '- **What a time is.** go-cni’s is its Setup or Remove call in the driver (what Nomad’s client pays); the floor’s and the library’s are the operation in their process; the agent’s is the gRPC call from the suite, its client (what the agent’s caller pays, the unix socket included).',
  '- **Sequential.** The contenders share one node and take turns operation by operation: round *i* sets up allocation *i* of each contender, in an order that rotates (a Williams square: over four rounds each contender is first once and follows each other once), then the teardowns the same way. Sample *i* of each contender is taken beside the others’, on the same node state, so the machine’s drift lands on all of them. One untimed setup and teardown each first.',
  '- **Concurrent.** Each contender sets up N allocations W at a time on a fresh node of its own, then tears them down; the contenders’ batches take turns in rotating order, round after round.',
  '- **Ratios and goals.** Every p50 is the median of the samples; a ratio is two p50s divided, the sequential ones over the paired rounds, with a bootstrap 95% interval (4,000 resamplings, seeded; the sequential and concurrent ones resample the rounds as pairs). A goal is met only when its whole interval is on the goal’s side; one that straddles the limit is not met. A figure measured once (RSS, a restart) has no interval and is judged on its value.',
  '- **Scale and restart.** The agent alone up to M live allocations one at a time, the floor and the library on the same node empty and full, then a restart: the time from the spawn to the first answered `ListAllocNetworks` (asked every few ms, each time on a new channel), to the agent’s `restore finished` log line, and its RSS before the restart and after the restore (read once the agent logs `restored allocations from the last run`: the restore and the first reconcile done, and the heap they freed handed back to the kernel).',
  '- **Leak reap.** Leaked allocations in the exact shapes the Debian plugins leave (`tools/bench/src/reap.ts`): **full**, when DEL ran without its cached result (bridge’s masquerade jump and chain, portmap’s DNAT jump and CNI-DN chain with 3 rules, the firewall’s two CNI-FORWARD accepts: 11 iptables-save lines an allocation), and **netns-deleted**, what an out-of-band deletion of the namespace leaves (the masquerade jump and chain). One `reapLeaks` call, discovery included, at 1,000 and 5,000, on a fresh node per reap, after one untimed warm-up reap (a process’s first reap loads the netlink bindings and compiles the parser: ~300 ms against ~200 at 1,000); Nomad’s per-allocation forceCleanup on the netns-deleted shape. Every reap must bring the node’s whole ruleset back to its baseline, or the run stops.',
  '- **Leak reap through a running agent.** What an operator meets (`tools/bench/src/suite-reap-agent.ts`): per round a fresh node, a fresh agent process and 20 live allocations; 5,000 full-shape leaks reaped by the agent’s **first** `ReapLeaks` (its first reap: nothing warmed by an earlier one), then 5,000 more by a second (**warm**); the time is the gRPC stream’s, from the call to its end. During each reap a client on a thread of its own (`probe-worker.ts`: the bench’s main thread decoding a 5,000-leak summary would otherwise count as the agent’s stall) asks the agent, one call at a time every 20 ms, `ListAllocNetworks`, `GetAllocNetwork` and `grpc.health.v1` `Check` in turn, and records each call’s latency; the same client asks the quiet agent for 3 s before. First over warm is a paired ratio over the rounds; the stall is each round’s worst call during a reap less its worst when quiet, judged on the worst round. Every reap must bring the node back to its ruleset with the live allocations alone.',
].join('\n');

/** Writes suite.md and the charts into `out` (and docs/performance.md with its images); returns the markdown. */
export async function writeReport(
  r: SuiteResults,
  where: { out: string; docs: string | undefined },
): Promise<string> {
  const targets = [{ dir: where.out }];
  if (where.docs !== undefined) targets.push({ dir: join(where.docs, 'performance') });
  for (const t of targets) {
    mkdirSync(t.dir, { recursive: true });
    if (r.sequential !== undefined)
      await png(latencySpec(r.sequential), join(t.dir, 'latency.png'));
    if (r.concurrent !== undefined)
      await png(throughputSpec(r.concurrent), join(t.dir, 'throughput.png'));
    if (r.scale !== undefined) await png(scaleSpec(r.scale), join(t.dir, 'scale.png'));
  }
  const images: Images = {
    ...(r.sequential === undefined ? {} : { latency: 'latency.png' }),
    ...(r.concurrent === undefined ? {} : { throughput: 'throughput.png' }),
    ...(r.scale === undefined ? {} : { scale: 'scale.png' }),
  };
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
      METHOD,
      '',
      '## Latest run',
      '',
      markdown(r, docImages),
    ].join('\n');
    // Formatted as the repository’s docs are (lint checks docs/ with prettier).
    writeFileSync(
      file,
      await prettier.format(text, { ...(await prettier.resolveConfig(file)), filepath: file }),
    );
  }
  return summary;
}
