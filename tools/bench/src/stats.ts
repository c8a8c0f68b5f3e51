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
  return {
    runs,
    median: median(runs),
    min: sorted[0] as number,
    max: sorted[sorted.length - 1] as number,
  };
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

/**
 * The median of `values` (the mean of the two middle ones for an even count), NaN ignored; NaN
 * when nothing is left. Every p50 the benchmarks print and every ratio they compute is this one,
 * so that a table's ratio is its own p50s divided.
 */
export function median(values: readonly number[]): number {
  const v = values.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  if (v.length === 0) return Number.NaN;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 === 1
    ? (v[mid] as number)
    : ((v[mid - 1] as number) + (v[mid] as number)) / 2;
}

/** A ratio with its bootstrap 95% interval. */
export interface RatioInterval {
  readonly ratio: number;
  readonly lo: number;
  readonly hi: number;
}

export interface BootstrapOptions {
  /** Resamplings; default 4000. */
  readonly iterations?: number;
  /** Seed of the resampling's random numbers (the same samples give the same interval). */
  readonly seed?: number;
  /**
   * `a[i]` and `b[i]` were measured together (interleaved, on the same node state): resample the
   * pairs, keeping each together, so that the machine's drift, which moves both, cancels out.
   * Pairs with a NaN on either side (a failed operation) are left out. Otherwise the two sets are
   * resampled independently.
   */
  readonly paired?: boolean;
}

/**
 * median(`a`) / median(`b`) with a percentile-bootstrap 95% interval: the samples resampled with
 * replacement `iterations` times (as pairs when `paired`), the ratio of the medians each time,
 * the 2.5th and 97.5th percentiles of those ratios.
 */
export function bootstrapRatio(
  a: readonly number[],
  b: readonly number[],
  options: BootstrapOptions = {},
): RatioInterval {
  const { iterations = 4000, seed = 1, paired = false } = options;
  let xs = a.filter((x) => !Number.isNaN(x));
  let ys = b.filter((y) => !Number.isNaN(y));
  if (paired) {
    if (a.length !== b.length)
      throw new Error(`paired samples differ in length: ${a.length} and ${b.length}`);
    const kept = a.flatMap((x, i) => (Number.isNaN(x) || Number.isNaN(b[i] as number) ? [] : [i]));
    xs = kept.map((i) => a[i] as number);
    ys = kept.map((i) => b[i] as number);
  }
  if (xs.length === 0 || ys.length === 0) throw new Error('no samples');
  const random = seeded(seed);
  const pick = (n: number) => Math.floor(random() * n);
  // Resamples into typed arrays: their sort is numeric and many times faster than an array's.
  const rx = new Float64Array(xs.length);
  const ry = new Float64Array(ys.length);
  const mid = (v: Float64Array) => {
    v.sort();
    const m = Math.floor(v.length / 2);
    return v.length % 2 === 1 ? (v[m] as number) : ((v[m - 1] as number) + (v[m] as number)) / 2;
  };
  const ratios: number[] = [];
  for (let k = 0; k < iterations; k++) {
    if (paired) {
      for (let j = 0; j < xs.length; j++) {
        const i = pick(xs.length);
        rx[j] = xs[i] as number;
        ry[j] = ys[i] as number;
      }
    } else {
      for (let j = 0; j < xs.length; j++) rx[j] = xs[pick(xs.length)] as number;
      for (let j = 0; j < ys.length; j++) ry[j] = ys[pick(ys.length)] as number;
    }
    ratios.push(mid(rx) / mid(ry));
  }
  ratios.sort((x, y) => x - y);
  const at = (q: number) =>
    ratios[Math.min(ratios.length - 1, Math.floor(q * ratios.length))] as number;
  return { ratio: median(xs) / median(ys), lo: at(0.025), hi: at(0.975) };
}

/** The median of `values` with a percentile-bootstrap 95% interval. */
export function bootstrapMedian(
  values: readonly number[],
  options: Omit<BootstrapOptions, 'paired'> = {},
): { readonly median: number; readonly lo: number; readonly hi: number } {
  const r = bootstrapRatio(values, [1], options);
  return { median: r.ratio, lo: r.lo, hi: r.hi };
}

/** Which side of a goal a figure must be on: at most `limit`, or at least. */
export interface Bound {
  readonly at: 'most' | 'least';
  readonly limit: number;
}

/**
 * A goal's verdict from an interval (a single measurement is the interval [v, v]): `met` only
 * when the whole interval is on the goal's side, `missed` when the whole of it is on the other,
 * `undecided` when it straddles the limit (the run cannot tell; it is not met).
 */
export type Verdict = 'met' | 'missed' | 'undecided';

export function verdict(
  interval: { readonly lo: number; readonly hi: number },
  bound: Bound,
): Verdict {
  const { lo, hi } = interval;
  if (Number.isNaN(lo) || Number.isNaN(hi)) return 'undecided';
  const inside = (v: number) => (bound.at === 'most' ? v <= bound.limit : v >= bound.limit);
  if (inside(lo) && inside(hi)) return 'met';
  if (!inside(lo) && !inside(hi)) return 'missed';
  return 'undecided';
}
