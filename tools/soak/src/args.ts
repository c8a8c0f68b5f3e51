import { parseArgs } from 'node:util';
import { SoakError } from './errors.js';

/** The first host port: slot `s` of the churn maps `PORT_BASE + s`. */
export const PORT_BASE = 20000;
/** At most this many in flight: the slots' host ports stay below 65536 with room to spare. */
export const MAX_WIDTH = 1000;
export const MAX_COUNT = 10_000_000;

export interface SoakOptions {
  /** Setup→teardown cycles, after the one that warms the node up for the baseline. */
  readonly count: number;
  /** Cycles in flight at once; each slot has its own host port. */
  readonly width: number;
  /** Cycles before the "warm" RSS reading: 10% of `count` (at least 1) unless given. */
  readonly warmup: number;
  /** A progress line every this many cycles: `count / 20` rounded up unless given. */
  readonly progressEvery: number;
  /** Print the summary as one JSON object on stdout instead of text. */
  readonly json: boolean;
}

export const USAGE = `Usage: allocnet-soak [--count N] [--width W] [--warmup N] [--progress-every N] [--json]

Churns setup→teardown cycles through a real agent in a throwaway node namespace (needs root),
then checks the node for leaks and the agent's memory for growth after the warm-up.

  --count N           cycles (default 2000)
  --width W           cycles in flight, one host port each, ${PORT_BASE}+slot (default 16, at most ${MAX_WIDTH})
  --warmup N          cycles before the warm RSS reading (default 10% of --count, at least 1);
                      equal to --count: the growth is not judged (a short run's RSS still grows)
  --progress-every N  a progress line on stderr every N cycles (default --count / 20)
  --json              the summary as JSON on stdout
  -h, --help          this text

Exits 0 when every cycle passed, nothing leaked and RSS grew less than 10% after the warm-up;
1 when not (the summary says what), 2 on a bad flag, 130 when interrupted (after cleaning up).
`;

function positive(flag: string, text: string | undefined, fallback: number, max: number): number {
  if (text === undefined) return fallback;
  const n = /^[0-9]+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 1 || n > max)
    throw new SoakError(`${flag} ${JSON.stringify(text)} is not a whole number from 1 to ${max}`, {
      code: 'invalid-flag',
      flag,
    });
  return n;
}

/** The options from the command line, or `help` for -h/--help; a bad flag is a `SoakError`. */
export function parseSoakArgs(argv: readonly string[]): SoakOptions | 'help' {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        count: { type: 'string' },
        width: { type: 'string' },
        warmup: { type: 'string' },
        'progress-every': { type: 'string' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    // parseArgs's own message names the flag (`Unknown option '--cont'`, `… argument missing`).
    throw new SoakError(`allocnet-soak: ${(error as Error).message}`, {
      code: 'invalid-flag',
      cause: error,
    });
  }
  if (values.help) return 'help';
  const count = positive('--count', values.count, 2000, MAX_COUNT);
  const width = positive('--width', values.width, 16, MAX_WIDTH);
  const warmup = positive('--warmup', values.warmup, Math.max(1, Math.floor(count / 10)), count);
  const progressEvery = positive(
    '--progress-every',
    values['progress-every'],
    Math.ceil(count / 20),
    count,
  );
  return { count, width, warmup, progressEvery, json: values.json };
}
