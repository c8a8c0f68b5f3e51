/**
 * Why a benchmark stopped short of its report (a contender's failed operation is a sample, not an
 * error: it is counted and shown):
 * - `invalid-flag`: a flag's value is not what it takes; `flag` names it;
 * - `not-exact`: a reap did not bring the node's ruleset back to its baseline;
 * - `driver-ended`: a contender's process (the agent, gocni-driver, suite-inner) exited with
 *   calls unanswered, or could not start;
 * - `missing`: something the run needs is not there (not built, not installed).
 */
export type BenchErrorCode = 'invalid-flag' | 'not-exact' | 'driver-ended' | 'missing';

export interface BenchErrorDetails {
  readonly code: BenchErrorCode;
  /** For `invalid-flag`: the flag as typed, `--allocs`. */
  readonly flag?: string;
  readonly cause?: unknown;
}

/** The one error type of the benchmarks; its message is for the person at the terminal. */
export class BenchError extends Error {
  readonly code: BenchErrorCode;
  readonly flag: string | undefined;

  constructor(message: string, details: BenchErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'BenchError';
    this.code = details.code;
    this.flag = details.flag;
  }
}

/** A whole number in [min, max] from a flag's text, or `invalid-flag` naming the flag. */
export function intFlag(flag: string, text: string, min: number, max: number): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new BenchError(
      `${flag} ${JSON.stringify(text)} is not a whole number from ${min} to ${max}`,
      {
        code: 'invalid-flag',
        flag,
      },
    );
  return n;
}

/** A comma-separated list of whole numbers in [min, max] (`--reap-allocs 1000,5000`). */
export function intListFlag(flag: string, text: string, min: number, max: number): number[] {
  return text.split(',').map((part) => intFlag(flag, part.trim(), min, max));
}

/** The message of anything thrown, for a failure sample or a log line. */
export function messageOf(error: unknown): string {
  // Not `instanceof Error`: an error made in another realm (a vm context, jest's) is not one.
  if (typeof error === 'object' && error !== null && 'message' in error) {
    const { message } = error;
    if (typeof message === 'string') return message;
  }
  return String(error);
}
