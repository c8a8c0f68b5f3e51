// The suite's results as it records them (every raw sample, in the order taken) and the figures
// the report reads from them. Pure: the tests give results directly.
import type { BenchEnvironment } from './env.js';
import type { ProcessSamples } from './fresh-process.js';
import type { LeakShape, ReapMethod } from './reap.js';
import { bootstrapMedian, bootstrapRatio, median, percentile } from './stats.js';
import type { RatioInterval } from './stats.js';

export type { ProcessSamples };

export type Contender = 'floor' | 'peer' | 'allocnet-lib' | 'allocnet-agent';

/** The contenders in the order of the tables; the interleaving's first round starts with the agent. */
export const CONTENDERS: readonly Contender[] = ['floor', 'peer', 'allocnet-lib', 'allocnet-agent'];
export const INTERLEAVING: readonly Contender[] = [
  'allocnet-agent',
  'peer',
  'floor',
  'allocnet-lib',
];

/**
 * One contender's operations in an interleaved phase: sample k was taken in round k, beside
 * every other contender's sample k, on the same node state; NaN where the operation failed.
 */
export interface ContenderSamples {
  readonly setupMs: readonly number[];
  readonly teardownMs: readonly number[];
  /** Each failed operation's message. */
  readonly failures: readonly string[];
  /** ADD attempts beyond the first, over the setups. */
  readonly retries: number;
}

/** The sequential scenario: `reps` × `n` rounds of one setup per contender, then as many teardowns. */
export interface SequentialRun {
  readonly n: number;
  readonly reps: number;
  readonly samples: Readonly<Record<Contender, ContenderSamples>>;
}

/** One contender's batch of the concurrent scenario: `n` setups `width` at a time on a fresh node. */
export interface ConcurrentBatch {
  readonly round: number;
  readonly contender: Contender;
  /** Each successful setup's time. */
  readonly setupMs: readonly number[];
  readonly failures: readonly string[];
  readonly retries: number;
  /** From the first setup's start to the last one's end, timed by the suite for every contender. */
  readonly totalMs: number;
}

export interface ConcurrentRun {
  readonly n: number;
  readonly width: number;
  readonly rounds: number;
  readonly batches: readonly ConcurrentBatch[];
}

/** Setups, CHECKs and teardowns of a few allocations of the floor or the library on the scale node. */
export interface InnerSamples {
  readonly setupMs: readonly number[];
  readonly checkMs: readonly number[];
  readonly teardownMs: readonly number[];
}

/** A window of live allocations, 1-based and inclusive: `1–20` is the setups that made the 1st to the 20th live. */
export interface LiveWindow {
  readonly from: number;
  readonly to: number;
}

export interface ScaleRun {
  readonly live: number;
  readonly window: number;
  /** Setup i was made with i allocations already live. */
  readonly setupMs: readonly number[];
  /** Teardown i was made with live - i allocations live. */
  readonly teardownMs: readonly number[];
  /**
   * The agent's RSS with `live` allocations, before the restart: once it handed back the climb's
   * memory (its idle hand-back's log line), or 30 s after the last setup without one.
   */
  readonly rssMiB: number;
  /**
   * Whether the agent logged a hand-back before `rssMiB` was read (false: none within 30 s, the
   * climb having grown its RSS less than a hand-back needs). Absent in results of older runs.
   */
  readonly handedBackIdle?: boolean;
  /** Its RSS right after the last setup of the climb. */
  readonly rssAtLastSetupMiB: number;
  /** Its RSS after the restart, once the agent logged its restore and first reconcile done. */
  readonly rssAfterRestoreMiB: number;
  readonly cpuSecondsPerSetup: number;
  readonly restart: {
    /** From the spawn to the first answered ListAllocNetworks. */
    readonly spawnToFirstAnswerMs: number;
    /** How many allocations that first answer listed. */
    readonly listedAtFirstAnswer: number;
    /** From the spawn to the agent's `restore finished` log line. */
    readonly spawnToRestoreFinishedMs: number;
    /** From the spawn to its ready file. */
    readonly spawnToReadyMs: number;
    /** The restore's own duration, as the agent logs it. */
    readonly restoreMs: number;
    readonly kept: number;
    readonly recreated: number;
    readonly failed: number;
  };
  /** The floor (each plugin exec'd directly) on the same node, empty and with `live` allocations. */
  readonly floor: { readonly empty: InnerSamples; readonly full: InnerSamples };
  /** allocnet-lib the same way, for its CHECK (what a restore runs). */
  readonly lib: { readonly empty: InnerSamples; readonly full: InnerSamples };
  /**
   * go-cni's own climb on a node of its own, one setup at a time, each beside the agent's setup of
   * the same rank: setup i was made with i of go-cni's allocations already live.
   */
  readonly peer: { readonly live: number; readonly setupMs: readonly number[] };
  /** From the spawn to the first answered ListAllocNetworks of fresh agents holding nothing. */
  readonly servingEmptyMs: readonly number[];
  /** With `live` allocations: `allocnet alloc list` against the agent, and `node -e 0`. */
  readonly allocList: ProcessSamples<'node' | 'list'>;
}

/** The CLI's start: `node -e 0`, `allocnet version` and `allocnet --help`, fresh processes. */
export interface CliRun {
  readonly rounds: number;
  readonly ms: ProcessSamples<'node' | 'version' | 'help'>;
  /**
   * The first run of `version` and of `--help`, before the rounds: its code not in the CLI's code
   * cache yet, which it writes (absent from runs made before the cache).
   */
  readonly firstMs?: { readonly version: number; readonly help: number };
}

/** Every reap of one case, in milliseconds. */
export interface ReapCase {
  readonly method: ReapMethod;
  readonly shape: LeakShape;
  readonly allocs: number;
  readonly runsMs: readonly number[];
  /**
   * Before each reap, on the same node state: the wall time of the read any reap must do,
   * `iptables-save` and `ip6tables-save` at once in fresh processes (what the reap's scan reads).
   */
  readonly saveMs: readonly number[];
}

/**
 * `allocnet leaks --reap --local` of `leaks` full-shape leaks as a fresh process, and on the same
 * node state just before it, in turn, the save read (as `ReapCase.saveMs`) and `node -e 0`.
 */
export interface ReapCliRun {
  readonly leaks: number;
  readonly cliMs: readonly number[];
  readonly saveMs: readonly number[];
  readonly nodeMs: readonly number[];
  /**
   * The command's first run, before the rounds, with its comparators: its code not in the CLI's
   * code cache yet, which it writes (absent from runs made before the cache).
   */
  readonly first?: { readonly cliMs: number; readonly saveMs: number; readonly nodeMs: number };
}

export interface ReapRun {
  readonly cases: readonly ReapCase[];
}

/** One round of the reap-agent scenario: a fresh agent's first and warm ReapLeaks, the probe's ms. */
export interface ReapAgentRound {
  /** The agent's warm-up of the reap path after its start (its `warmed the reap path` line). */
  readonly warmUpMs: number;
  readonly firstMs: number;
  readonly warmMs: number;
  /** Each probe call's latency on the quiet agent, during the first reap, during the warm one. */
  readonly quietMs: readonly number[];
  readonly firstProbeMs: readonly number[];
  readonly warmProbeMs: readonly number[];
}

export interface ReapAgentRun {
  readonly leaks: number;
  readonly live: number;
  readonly probeEveryMs: number;
  readonly rounds: readonly ReapAgentRound[];
}

export interface SuiteResults {
  readonly command: string;
  readonly environment: BenchEnvironment;
  readonly plan: unknown;
  readonly sequential: SequentialRun | undefined;
  readonly concurrent: ConcurrentRun | undefined;
  readonly scale: ScaleRun | undefined;
  readonly reap: ReapRun | undefined;
  readonly reapAgent?: ReapAgentRun | undefined;
  readonly cli?: CliRun | undefined;
  readonly reapCli?: ReapCliRun | undefined;
  /** Each scenario's seconds, as run. */
  readonly scenarioS?: Readonly<Record<string, number>>;
  readonly durationS: number;
}

const ok = (v: readonly number[]) => v.filter((x) => !Number.isNaN(x));

/** p50 (the median: the one every ratio divides) and p95 (nearest rank) of the successful samples. */
export function p50p95(samples: readonly number[]): { readonly p50: number; readonly p95: number } {
  const v = ok(samples);
  return { p50: median(v), p95: v.length === 0 ? Number.NaN : percentile(v, 95) };
}

export type Phase = 'setup' | 'teardown';

const phaseSamples = (s: ContenderSamples, phase: Phase) =>
  phase === 'setup' ? s.setupMs : s.teardownMs;

/**
 * p50(`c`) / p50(`vs`) over the interleaved rounds, with its paired bootstrap 95% interval. A
 * round where either failed is left out of both, so with no failures the ratio is the table's two
 * p50s divided.
 */
export function sequentialRatio(
  run: SequentialRun,
  c: Contender,
  vs: Contender,
  phase: Phase,
): RatioInterval {
  return bootstrapRatio(phaseSamples(run.samples[c], phase), phaseSamples(run.samples[vs], phase), {
    paired: true,
    seed: phase === 'setup' ? 11 : 13,
  });
}

export function sequentialStats(run: SequentialRun, c: Contender, phase: Phase) {
  return p50p95(phaseSamples(run.samples[c], phase));
}

/** Successful setups per second of each batch of `c`, by round. */
export function throughputs(run: ConcurrentRun, c: Contender): number[] {
  const out: number[] = new Array<number>(run.rounds).fill(Number.NaN);
  for (const b of run.batches)
    if (b.contender === c) out[b.round] = b.setupMs.length / (b.totalMs / 1000);
  return out;
}

export function concurrentRow(run: ConcurrentRun, c: Contender) {
  const mine = run.batches.filter((b) => b.contender === c);
  return {
    contender: c,
    failed: mine.reduce((n, b) => n + b.failures.length, 0),
    retries: mine.reduce((n, b) => n + b.retries, 0),
    attempted: mine.reduce((n, b) => n + b.setupMs.length + b.failures.length, 0),
    throughput: median(throughputs(run, c)),
    p50: median(mine.flatMap((b) => b.setupMs)),
  };
}

/** The agent's setups/s over `vs`'s, paired by round, with its bootstrap 95% interval. */
export function throughputRatio(run: ConcurrentRun, c: Contender, vs: Contender): RatioInterval {
  return bootstrapRatio(throughputs(run, c), throughputs(run, vs), { paired: true, seed: 17 });
}

/** The p50 of `samples[from…to)` (the chart's moving windows). */
export function windowP50(samples: readonly number[], from: number, to: number): number {
  return median(samples.slice(from, to));
}

/** The windows the scale tables show: 1–20, 1–W, 91–110, 231–250 and the last W, those that fit. */
export function scaleWindowList(live: number, window: number): LiveWindow[] {
  const all = [
    { from: 1, to: 20 },
    { from: 1, to: window },
    { from: 91, to: 110 },
    { from: 231, to: 250 },
    { from: live - window + 1, to: live },
  ];
  const fit = all.filter((w) => w.from >= 1 && w.to <= live && w.from <= w.to);
  return fit
    .filter((w, i) => fit.findIndex((x) => x.from === w.from && x.to === w.to) === i)
    .sort((a, b) => a.from - b.from || a.to - b.to);
}

/** The setups that made the `from`th to the `to`th allocation live (setup i had i live before it). */
export function setupWindow(setupMs: readonly number[], w: LiveWindow): number[] {
  return setupMs.slice(w.from - 1, w.to);
}

/** The teardowns made with `to` down to `from` live (teardown j had `live` − j live before it). */
export function teardownWindow(
  teardownMs: readonly number[],
  live: number,
  w: LiveWindow,
): number[] {
  return teardownMs.slice(live - w.to, live - w.from + 1);
}

/** The scale scenario's windows: setups at 1..w and live-w+1..live; teardowns the same counts. */
export function scaleWindows(s: ScaleRun) {
  const low = { from: 1, to: s.window };
  const high = { from: s.live - s.window + 1, to: s.live };
  return {
    setupLow: setupWindow(s.setupMs, low),
    setupHigh: setupWindow(s.setupMs, high),
    teardownHigh: teardownWindow(s.teardownMs, s.live, high),
    teardownLow: teardownWindow(s.teardownMs, s.live, low),
  };
}

/** p50 at the high window over p50 at the low one, with an (unpaired) bootstrap 95% interval. */
export function growth(high: readonly number[], low: readonly number[]): RatioInterval {
  return bootstrapRatio(high, low, { seed: 19 });
}

/** A reap case's median with its bootstrap 95% interval over the reps. */
export function reapMedian(c: ReapCase) {
  return bootstrapMedian(c.runsMs, { seed: 23 });
}

/** `c`'s wall time over `vs`'s, paired by round, with its bootstrap 95% interval. */
export function processRatio<K extends string>(
  samples: ProcessSamples<K>,
  c: K,
  vs: K,
): RatioInterval {
  return bootstrapRatio(samples[c], samples[vs], { paired: true, seed: 31 });
}

/** A warm reap over the save read of the same node state, paired by rep. */
export function warmReapRatio(c: ReapCase): RatioInterval {
  return bootstrapRatio(c.runsMs, c.saveMs, { paired: true, seed: 37 });
}

/** The CLI's cold reap over (the save read + `node -e 0`) of the same node state, paired by round. */
export function coldReapRatio(r: ReapCliRun): RatioInterval {
  const comparator = r.saveMs.map((ms, i) => ms + (r.nodeMs[i] ?? Number.NaN));
  return bootstrapRatio(r.cliMs, comparator, { paired: true, seed: 41 });
}

/**
 * The restore over Nomad's way of restoring (one CHECK through the plugins per allocation, one
 * after another): `live` × the floor's CHECK p50 with `live` allocations. The restore is one
 * measurement; the interval resamples the floor's CHECKs.
 */
export function restoreRatio(s: ScaleRun): RatioInterval {
  const nomad = s.floor.full.checkMs.map((ms) => ms * s.live);
  return bootstrapRatio([s.restart.restoreMs], nomad, { seed: 43 });
}

/**
 * Serving with `live` allocations (one restart) over serving with none (fresh agents on an empty
 * node); the interval resamples the empty agents.
 */
export function servingRatio(s: ScaleRun): RatioInterval {
  return bootstrapRatio([s.restart.spawnToFirstAnswerMs], s.servingEmptyMs, { seed: 47 });
}
