// The suite's goals, each a ratio to something measured in the same run (issue 30: a goal in
// milliseconds does not travel between machines) with its bootstrap 95% interval, met only when
// the whole interval is on the goal's side; memory keeps absolute bounds. Pure: summary.ts's
// figures of the raw samples.
import { f1, f2, fr } from './format.js';
import { bootstrapRatio, median, verdict } from './stats.js';
import type { Bound, RatioInterval, Verdict } from './stats.js';
import {
  coldReapRatio,
  concurrentRow,
  growth,
  processRatio,
  restoreRatio,
  scaleWindowList,
  sequentialRatio,
  servingRatio,
  setupWindow,
  teardownWindow,
  throughputRatio,
  warmReapRatio,
} from './summary.js';
import type {
  CliRun,
  Contender,
  LiveWindow,
  Phase,
  ReapAgentRun,
  ReapCliRun,
  ReapRun,
  ScaleRun,
  SuiteResults,
} from './summary.js';

/** The goals (issue 30's, and those of issues 8, 17 and 28 that still stand, as ratios). */
export const GOALS = {
  /** Agent p50 over go-cni’s, setup and teardown, at most. */
  vsPeer: 0.95,
  /** Agent p50 over the floor’s, at most. */
  vsFloor: 1.1,
  /** Agent setups/s over go-cni’s, 64 at 8, at least. */
  concurrentVsPeer: 1.1,
  /** p50 at the last window of live allocations over the first, at most. */
  scaleGrowth: 1.5,
  /** Setup p50 at 231–250 live over 1–20, at most (a dense Kubernetes or Nomad node). */
  denseGrowth: 1.2,
  rssMiB: 150,
  /** Serving (spawn to first answer) with M allocations over with none, at most. */
  servingVsEmpty: 1.5,
  /** The restore of M over M × the floor’s CHECK p50 with M live (Nomad’s way), at most. */
  restoreVsNomad: 0.05,
  /** `allocnet version` and `--help` over `node -e 0`, at most. */
  cliStartVsNode: 2,
  /** `allocnet alloc list` with M allocations over `node -e 0`, at most. */
  listVsNode: 3,
  /** The CLI’s cold reap over (the save read + `node -e 0`), at most. */
  coldReapVsSave: 2.5,
  /** A warm reap (the library’s, full shape) over the save read of the same ruleset, at most. */
  warmReapVsSave: 2,
  /** Per allocation, allocnet’s reap over Nomad’s forceCleanup (netns-deleted shape), at least. */
  reapVsNomad: 100,
  /** A running agent’s first ReapLeaks over its warm one, at most (issue 28). */
  firstReapVsWarm: 1.3,
  /** The worst probe call during a reap through the agent over the quiet agent’s worst, ms at most. */
  reapStallMs: 100,
} as const;

export interface Goal {
  readonly goal: string;
  /** The figure, with its 95% interval, or "(one measurement)". */
  readonly measured: string;
  readonly verdict: Verdict;
}

/** A goal on one measurement (no interval: its verdict is on the value itself). */
function once(goal: string, value: number, bound: Bound, measured: string): Goal {
  return {
    goal,
    measured: `${measured} (one measurement)`,
    verdict: verdict({ lo: value, hi: value }, bound),
  };
}

/** A ratio goal: its interval and what it divides, judged on the interval. */
function ratioGoal(goal: string, r: RatioInterval, bound: Bound, detail = ''): Goal {
  return {
    goal,
    measured: `${fr(r)}${detail === '' ? '' : ` (${detail})`}`,
    verdict: verdict(r, bound),
  };
}

const most = (limit: number): Bound => ({ at: 'most', limit });
const span = (w: LiveWindow) => `${w.from}–${w.to}`;

function sequentialGoals(r: SuiteResults): Goal[] {
  const seq = r.sequential;
  if (seq === undefined) return [];
  const vs = (phase: Phase, other: Contender, limit: number) =>
    ratioGoal(
      `${phase} p50 through the agent ≤ ${f2(limit)}× ${other === 'peer' ? 'go-cni' : other}`,
      sequentialRatio(seq, 'allocnet-agent', other, phase),
      most(limit),
    );
  return [
    vs('setup', 'peer', GOALS.vsPeer),
    vs('teardown', 'peer', GOALS.vsPeer),
    vs('setup', 'floor', GOALS.vsFloor),
    vs('teardown', 'floor', GOALS.vsFloor),
  ];
}

function concurrentGoals(r: SuiteResults): Goal[] {
  const con = r.concurrent;
  if (con === undefined) return [];
  const agent = concurrentRow(con, 'allocnet-agent');
  const ratio = throughputRatio(con, 'allocnet-agent', 'peer');
  const goal = `concurrent (${con.n} at ${con.width}): setups/s through the agent ≥ ${f2(GOALS.concurrentVsPeer)}× go-cni`;
  const bound = { at: 'least', limit: GOALS.concurrentVsPeer } as const;
  return [
    {
      goal: `concurrent (${con.n} at ${con.width}): zero failed setups through the agent`,
      measured: `${agent.failed} failed, ${agent.retries} retries in ${agent.attempted}`,
      verdict: agent.attempted > 0 && agent.failed === 0 ? 'met' : 'missed',
    },
    con.rounds < 2
      ? once(goal, ratio.ratio, bound, `${f2(ratio.ratio)}×`)
      : { goal, measured: fr(ratio), verdict: verdict(ratio, bound) },
  ];
}

/** The scale scenario's goals: growth, RSS, serving, the restore, `alloc list`. */
export function scaleGoals(s: ScaleRun): Goal[] {
  const low = { from: 1, to: s.window };
  const high = { from: s.live - s.window + 1, to: s.live };
  const setup = (w: LiveWindow) => setupWindow(s.setupMs, w);
  const teardown = (w: LiveWindow) => teardownWindow(s.teardownMs, s.live, w);
  const out = [
    ratioGoal(`scale: setup p50 at ${span(high)} live ≤ ${f2(GOALS.scaleGrowth)}× at ${span(low)}`, growth(setup(high), setup(low)), most(GOALS.scaleGrowth)),
    ratioGoal(`scale: teardown p50 at ${span(high)} live ≤ ${f2(GOALS.scaleGrowth)}× at ${span(low)}`, growth(teardown(high), teardown(low)), most(GOALS.scaleGrowth)),
  ]; // prettier-ignore
  const dense = { from: 231, to: 250 };
  const first = { from: 1, to: 20 };
  if (scaleWindowList(s.live, s.window).some((w) => w.from === 231 && w.to === 250)) {
    const peer = s.peer.live >= 250 ? growth(setupWindow(s.peer.setupMs, dense), setupWindow(s.peer.setupMs, first)) : undefined; // prettier-ignore
    out.push(
      ratioGoal(
        `scale: setup p50 at ${span(dense)} live ≤ ${f2(GOALS.denseGrowth)}× at ${span(first)}`,
        growth(setup(dense), setup(first)),
        most(GOALS.denseGrowth),
        peer === undefined ? '' : `go-cni’s own, beside it: ${fr(peer)}`,
      ),
    );
  }
  const rss = most(GOALS.rssMiB);
  const r = s.restart;
  const checkP50 = median(s.floor.full.checkMs);
  const restore = ratioGoal(
    `restore of ${s.live} allocations ≤ ${f2(GOALS.restoreVsNomad)}× Nomad’s way (${s.live} × the floor’s CHECK p50 with ${s.live} live), none failed`,
    restoreRatio(s),
    most(GOALS.restoreVsNomad),
    `${f1(r.restoreMs / 1000)} s against ${s.live} × ${f1(checkP50)} ms; kept ${r.kept}, recreated ${r.recreated}, failed ${r.failed}`,
  );
  out.push(
    once(`agent RSS ≤ ${GOALS.rssMiB} MiB with ${s.live} live allocations, before a restart (idle: once the agent handed the climb’s memory back, else 30 s after the last setup)`, s.rssMiB, rss, `${f1(s.rssMiB)} MiB; at the last setup ${f1(s.rssAtLastSetupMiB)} MiB`),
    once(`agent RSS ≤ ${GOALS.rssMiB} MiB with ${s.live} live allocations, after a restart (restore finished)`, s.rssAfterRestoreMiB, rss, `${f1(s.rssAfterRestoreMiB)} MiB`),
    ratioGoal(`serving (spawn to the first ListAllocNetworks answered) with ${s.live} allocations ≤ ${f2(GOALS.servingVsEmpty)}× with none`, servingRatio(s), most(GOALS.servingVsEmpty), `${f1(r.spawnToFirstAnswerMs)} ms against ${f1(median(s.servingEmptyMs))} ms, median of ${s.servingEmptyMs.length} fresh agents holding nothing`),
    r.failed === 0 ? restore : { ...restore, verdict: 'missed' },
    ratioGoal(`\`allocnet alloc list\` with ${s.live} allocations ≤ ${f2(GOALS.listVsNode)}× \`node -e 0\``, processRatio(s.allocList, 'list', 'node'), most(GOALS.listVsNode), `${f1(median(s.allocList.list))} ms against ${f1(median(s.allocList.node))} ms, ${s.allocList.list.length} rounds`),
  ); // prettier-ignore
  return out;
}

/** The library's warm reaps against their save reads, and Nomad’s forceCleanup. */
function reapGoals(reap: ReapRun): Goal[] {
  const out: Goal[] = [];
  for (const c of reap.cases) {
    if (c.method !== 'allocnet' || c.shape !== 'full') continue;
    out.push(
      ratioGoal(
        `reap ${c.allocs} full-shape leaked allocations, warm (discovery included) ≤ ${f2(GOALS.warmReapVsSave)}× the save read of the same ruleset`,
        warmReapRatio(c),
        most(GOALS.warmReapVsSave),
        `${f1(median(c.runsMs))} ms against ${f1(median(c.saveMs))} ms, ${c.runsMs.length} reaps`,
      ),
    );
  }
  const nomad = reap.cases.find((c) => c.method === 'nomad');
  const same = reap.cases
    .filter((c) => c.method === 'allocnet' && c.shape === 'netns-deleted')
    .sort(
      (a, b) =>
        Math.abs(a.allocs - (nomad?.allocs ?? 0)) - Math.abs(b.allocs - (nomad?.allocs ?? 0)),
    )[0];
  if (nomad !== undefined && same !== undefined) {
    const ratio = speedup(nomad.runsMs, nomad.allocs, same.runsMs, same.allocs);
    out.push({
      goal: `reap (netns-deleted shape) per allocation ≥ ${GOALS.reapVsNomad}× faster than Nomad’s forceCleanup`,
      measured: `${ratio.ratio.toFixed(0)}× [${ratio.lo.toFixed(0)}, ${ratio.hi.toFixed(0)}] (${same.allocs} by allocnet, ${nomad.allocs} by Nomad’s way)`,
      verdict: verdict(ratio, { at: 'least', limit: GOALS.reapVsNomad }),
    });
  }
  return out;
}

/** The CLI's start against `node -e 0`. */
function cliGoals(c: CliRun): Goal[] {
  return (['version', 'help'] as const).map((k) =>
    ratioGoal(
      `\`allocnet ${k === 'help' ? '--help' : k}\` ≤ ${f2(GOALS.cliStartVsNode)}× \`node -e 0\``,
      processRatio(c.ms, k, 'node'),
      most(GOALS.cliStartVsNode),
      `${f1(median(c.ms[k]))} ms against ${f1(median(c.ms.node))} ms, ${c.rounds} rounds`,
    ),
  );
}

function reapCliGoal(r: ReapCliRun): Goal {
  return ratioGoal(
    `\`allocnet leaks --reap --local\` of ${r.leaks} full-shape leaks, a fresh process ≤ ${f2(GOALS.coldReapVsSave)}× (the save read + \`node -e 0\`)`,
    coldReapRatio(r),
    most(GOALS.coldReapVsSave),
    `${f1(median(r.cliMs))} ms against ${f1(median(r.saveMs))} + ${f1(median(r.nodeMs))} ms, ${r.cliMs.length} rounds`,
  );
}

/** The goals measured in this run, in the order of the report’s sections. */
export function goals(r: SuiteResults): Goal[] {
  return [
    ...sequentialGoals(r),
    ...concurrentGoals(r),
    ...(r.scale === undefined ? [] : scaleGoals(r.scale)),
    ...(r.reap === undefined ? [] : reapGoals(r.reap)),
    ...(r.reapAgent !== undefined && r.reapAgent.rounds.length > 0
      ? reapAgentGoals(r.reapAgent)
      : []),
    ...(r.cli === undefined ? [] : cliGoals(r.cli)),
    ...(r.reapCli === undefined ? [] : [reapCliGoal(r.reapCli)]),
  ];
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
