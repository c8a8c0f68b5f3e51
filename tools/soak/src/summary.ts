// The soak's summary: what ran, what it measured and the verdict, as JSON (`--json`) or text.
import type { ChurnResult } from './churn.js';
import { RSS_GROWTH_LIMIT_PERCENT, growthPercent, percentile, rssProblem } from './verdict.js';

export interface Latency {
  readonly p50: number;
  readonly p99: number;
}

export interface SoakSummary {
  /** True when every cycle passed, the leak check found nothing and RSS stayed under the limit. */
  readonly ok: boolean;
  readonly count: number;
  readonly width: number;
  readonly warmup: number;
  /** Cycles that ran to their end. */
  readonly cycles: number;
  readonly failures: number;
  readonly failureMessages: readonly string[];
  readonly elapsedMs: number;
  readonly cyclesPerSecond: number;
  readonly setupMs: Latency;
  readonly teardownMs: Latency;
  readonly rssMiB: { readonly start: number; readonly warm: number; readonly end: number };
  /**
   * The end's RSS above the warm reading, in percent; null when not judged: the warm-up was the
   * whole run (`--warmup` = `--count`), or the churn stopped before the warm-up was over.
   */
  readonly rssGrowthPercent: number | null;
  readonly rssLimitPercent: number;
  /** The leak check's findings; empty when the node is clean. */
  readonly leaks: readonly string[];
  /** Each reason `ok` is false, one line each. */
  readonly problems: readonly string[];
}

export interface SummaryInput {
  readonly count: number;
  readonly width: number;
  readonly warmup: number;
  readonly churn: ChurnResult;
  readonly rssStartMiB: number;
  readonly rssEndMiB: number;
  readonly leaks: readonly string[];
  /** The agent's exit on SIGTERM after the leak check, when it was not a clean one. */
  readonly agentExitProblem?: string | undefined;
}

function latency(values: readonly number[]): Latency {
  return { p50: percentile(values, 50), p99: percentile(values, 99) };
}

export function summarize(input: SummaryInput): SoakSummary {
  const { churn } = input;
  // A churn that did not get past its warm-up has no warm reading; the end stands in for it.
  const warm = churn.warmRssMiB ?? input.rssEndMiB;
  const judged = churn.warmRssMiB !== undefined && input.warmup < input.count;
  const problems: string[] = [];
  if (churn.done < input.count)
    problems.push(`only ${churn.done} of ${input.count} cycles ran to their end`);
  if (churn.failures > 0)
    problems.push(
      `${churn.failures} of ${churn.done} cycles failed; the first: ${churn.failureMessages[0] ?? '?'}`,
    );
  problems.push(...input.leaks.map((l) => `leak check: ${l}`));
  const rss = judged ? rssProblem(warm, input.rssEndMiB) : undefined;
  if (rss !== undefined) problems.push(rss);
  if (input.agentExitProblem !== undefined) problems.push(input.agentExitProblem);
  return {
    ok: problems.length === 0,
    count: input.count,
    width: input.width,
    warmup: input.warmup,
    cycles: churn.done,
    failures: churn.failures,
    failureMessages: churn.failureMessages,
    elapsedMs: churn.elapsedMs,
    cyclesPerSecond: churn.elapsedMs > 0 ? (churn.done * 1000) / churn.elapsedMs : 0,
    setupMs: latency(churn.setupMs),
    teardownMs: latency(churn.teardownMs),
    rssMiB: { start: input.rssStartMiB, warm, end: input.rssEndMiB },
    rssGrowthPercent: judged ? growthPercent(warm, input.rssEndMiB) : null,
    rssLimitPercent: RSS_GROWTH_LIMIT_PERCENT,
    leaks: input.leaks,
    problems,
  };
}

const f1 = (n: number) => n.toFixed(1);

function growthText(s: SoakSummary): string {
  if (s.rssGrowthPercent === null) return 'growth not judged: the warm-up was the whole run';
  const sign = s.rssGrowthPercent >= 0 ? '+' : '';
  return `${sign}${f1(s.rssGrowthPercent)}% after the warm-up (limit ${s.rssLimitPercent}%)`;
}

/** The summary for a person: what ran, the figures, then every problem. */
export function formatSummary(s: SoakSummary): string {
  const lines = [
    `soak: ${s.cycles} of ${s.count} cycles, ${s.width} wide, warm-up ${s.warmup} cycle${s.warmup === 1 ? '' : 's'}: ${s.ok ? 'PASSED' : 'FAILED'}`,
    `  failures     ${s.failures}`,
    `  rate         ${f1(s.cyclesPerSecond)} cycles/s (${f1(s.elapsedMs / 1000)} s)`,
    `  setup        p50 ${f1(s.setupMs.p50)} ms, p99 ${f1(s.setupMs.p99)} ms`,
    `  teardown     p50 ${f1(s.teardownMs.p50)} ms, p99 ${f1(s.teardownMs.p99)} ms`,
    `  agent RSS    start ${f1(s.rssMiB.start)} MiB, after the warm-up ${f1(s.rssMiB.warm)} MiB, end ${f1(s.rssMiB.end)} MiB: ${growthText(s)}`,
    `  leak check   ${s.leaks.length === 0 ? 'clean: rules v4/v6 as the baseline, no namespaces, IPAM and cache empty, alloc list empty, no leaks' : `${s.leaks.length} finding(s)`}`,
  ];
  if (s.problems.length > 0) lines.push('problems:', ...s.problems.map((p) => `  - ${p}`));
  if (s.failureMessages.length > 1)
    lines.push(
      `failures (the first ${s.failureMessages.length}):`,
      ...s.failureMessages.map((m) => `  - ${m}`),
    );
  return `${lines.join('\n')}\n`;
}
