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
