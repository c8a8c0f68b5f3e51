// The suite's results as the report reads them: what each scenario recorded, and a phase's p50,
// p95 and counts whoever ran it (allocnet's raw samples or the peer's aggregate).
import type { PeerPhase, PeerResult } from './contenders.js';
import type { BenchEnvironment } from './env.js';
import type { InnerResult, PhaseSamples } from './samples.js';
import { percentile } from './stats.js';

export type Contender = 'floor' | 'peer' | 'allocnet-lib' | 'allocnet-agent';

export interface SequentialRun {
  readonly rep: number;
  readonly contender: Contender;
  readonly result: InnerResult | PeerResult;
}
export type ConcurrentRun = SequentialRun;

export interface ScaleRun {
  readonly live: number;
  readonly window: number;
  /** Setup i was made with i allocations already live. */
  readonly setupMs: readonly number[];
  /** Teardown i was made with live - i allocations live. */
  readonly teardownMs: readonly number[];
  readonly rssMiB: number;
  readonly rssAfterRestoreMiB: number;
  readonly cpuSecondsPerSetup: number;
  readonly restart: {
    readonly spawnToReadyMs: number;
    readonly restoreMs: number;
    readonly kept: number;
    readonly recreated: number;
    readonly failed: number;
  };
  /** The floor (each plugin exec'd directly), 10 setups and teardowns on the same node, empty and with `live` allocations. */
  readonly floor: { readonly empty: InnerSamples; readonly full: InnerSamples };
  /** allocnet-lib the same way on the same node, for its CHECK (what a restore runs). */
  readonly lib?: { readonly empty: InnerSamples; readonly full: InnerSamples };
}

/** Setups, CHECKs (absent in runs before CHECK was measured) and teardowns of 10 allocations. */
export interface InnerSamples {
  readonly setupMs: readonly number[];
  readonly checkMs?: readonly number[];
  readonly teardownMs: readonly number[];
}

export interface ReapRun {
  readonly allocs: number;
  readonly nomadAllocs: number;
  readonly allocnetMs: number;
  readonly nomadMs: number;
}

export interface SuiteResults {
  readonly command: string;
  readonly environment: BenchEnvironment;
  readonly plan: unknown;
  readonly sequential: readonly SequentialRun[];
  readonly concurrent: readonly ConcurrentRun[];
  readonly scale: ScaleRun | undefined;
  readonly reap: ReapRun | undefined;
  readonly durationS: number;
}

export const CONTENDERS: readonly Contender[] = ['floor', 'peer', 'allocnet-lib', 'allocnet-agent'];

export function isPeer(r: InnerResult | PeerResult): r is PeerResult {
  return 'remove' in r;
}

/** p50, p95 and counts of one phase, whoever ran it. */
export interface PhaseSummary {
  readonly p50: number;
  readonly p95: number;
  readonly ok: number;
  readonly failed: number;
  readonly retries: number;
  readonly totalMs: number;
}

export function summarizePhase(phase: PhaseSamples | PeerPhase): PhaseSummary {
  if ('samplesMs' in phase)
    return {
      p50: phase.samplesMs.length === 0 ? Number.NaN : percentile(phase.samplesMs, 50),
      p95: phase.samplesMs.length === 0 ? Number.NaN : percentile(phase.samplesMs, 95),
      ok: phase.samplesMs.length,
      failed: phase.failures.length,
      retries: phase.retries,
      totalMs: phase.totalMs,
    };
  return {
    p50: phase.p50Ms,
    p95: phase.p95Ms,
    ok: phase.ok,
    failed: phase.failed,
    retries: phase.retriedOps ?? 0,
    totalMs: phase.totalMs,
  };
}

export function phases(r: InnerResult | PeerResult): {
  setup: PhaseSummary;
  teardown: PhaseSummary;
} {
  return isPeer(r)
    ? { setup: summarizePhase(r.setup), teardown: summarizePhase(r.remove) }
    : { setup: summarizePhase(r.setup), teardown: summarizePhase(r.teardown) };
}

export function median(values: readonly number[]): number {
  const v = values.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  if (v.length === 0) return Number.NaN;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 === 1
    ? (v[mid] as number)
    : ((v[mid - 1] as number) + (v[mid] as number)) / 2;
}

export function windowP50(samples: readonly number[], from: number, to: number): number {
  const slice = samples.slice(from, to);
  return slice.length === 0 ? Number.NaN : percentile(slice, 50);
}
