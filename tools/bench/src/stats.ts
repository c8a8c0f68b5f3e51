import { seeded } from '@allocnet/testns';

/** Summary of repeated timings, in milliseconds. */
export interface Summary {
  readonly runs: readonly number[];
  readonly median: number;
  readonly min: number;
  readonly max: number;
}

export function summarize(runs: readonly number[]): Summary {
  if (runs.length === 0) throw new Error('no runs to summarize');
  const sorted = [...runs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const median =
    sorted.length % 2 === 1
      ? (sorted[mid] as number)
      : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
  return { runs, median, min: sorted[0] as number, max: sorted[sorted.length - 1] as number };
}

/** How many times faster `fast` is than `slow`, by medians. */
export function ratio(slow: Summary, fast: Summary): number {
  return slow.median / fast.median;
}

/** The nearest-rank percentile of `values` (as go-cni's peer computes it), p in 0..100. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) throw new Error('no values');
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] as number;
}

/** Per-operation latencies of one phase, in the shape the go-cni peer prints. */
export interface PhaseStats {
  readonly ok: number;
  readonly failed: number;
  readonly p50Ms: number;
  readonly p95Ms: number;
  readonly meanMs: number;
  readonly totalMs: number;
  readonly errors?: Readonly<Record<string, number>>;
}

export function phaseStats(
  latencies: readonly number[],
  failures: readonly string[],
  totalMs: number,
): PhaseStats {
  const errors: Record<string, number> = {};
  for (const f of failures) errors[f] = (errors[f] ?? 0) + 1;
  const mean = latencies.length === 0 ? 0 : latencies.reduce((a, b) => a + b, 0) / latencies.length;
  return {
    ok: latencies.length,
    failed: failures.length,
    p50Ms: latencies.length === 0 ? 0 : percentile(latencies, 50),
    p95Ms: latencies.length === 0 ? 0 : percentile(latencies, 95),
    meanMs: mean,
    totalMs,
    ...(failures.length === 0 ? {} : { errors }),
  };
}

/** A ratio with its bootstrap 95% interval. */
export interface RatioInterval {
  readonly ratio: number;
  readonly lo: number;
  readonly hi: number;
}

/**
 * p50(`a`) / p50(`b`) with a percentile-bootstrap 95% interval: both sample sets resampled with
 * replacement `iterations` times, the ratio of their medians each time, the 2.5th and 97.5th
 * percentiles of those ratios.
 */
export function bootstrapRatio(
  a: readonly number[],
  b: readonly number[],
  iterations = 4000,
  seed = 1,
): RatioInterval {
  if (a.length === 0 || b.length === 0) throw new Error('no samples');
  const random = seeded(seed);
  const median = (v: readonly number[]) => summarize(v).median;
  const resample = (v: readonly number[]) =>
    v.map(() => v[Math.floor(random() * v.length)] as number);
  const ratios: number[] = [];
  for (let i = 0; i < iterations; i++) ratios.push(median(resample(a)) / median(resample(b)));
  ratios.sort((x, y) => x - y);
  const at = (q: number) =>
    ratios[Math.min(ratios.length - 1, Math.floor(q * ratios.length))] as number;
  return { ratio: median(a) / median(b), lo: at(0.025), hi: at(0.975) };
}

/** The median of `values` with a percentile-bootstrap 95% interval. */
export function bootstrapMedian(
  values: readonly number[],
  iterations = 4000,
  seed = 1,
): { readonly median: number; readonly lo: number; readonly hi: number } {
  const r = bootstrapRatio(values, [1], iterations, seed);
  return { median: r.ratio, lo: r.lo, hi: r.hi };
}
