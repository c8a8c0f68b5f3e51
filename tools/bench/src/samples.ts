/** Every sample of one phase (setup or teardown) of one run. */
export interface PhaseSamples {
  /** Per successful operation, in milliseconds, in the order they were started. */
  readonly samplesMs: readonly number[];
  readonly failures: readonly string[];
  /** ADD attempts beyond the first, summed over the phase. */
  readonly retries: number;
  /** From the first start to the last end. */
  readonly totalMs: number;
}

/** What one inner run prints. */
export interface InnerResult {
  readonly method: string;
  readonly n: number;
  readonly concurrency: number;
  readonly setup: PhaseSamples;
  /** With `--check`: a CHECK of every allocation, between the setups and the teardowns. */
  readonly check?: PhaseSamples;
  readonly teardown: PhaseSamples;
}
