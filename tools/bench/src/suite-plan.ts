// The suite's command line: its flags, read once into the plan of the run (how many allocations,
// rounds and repetitions each scenario gets) and the scenarios it runs.
import { parseArgs } from 'node:util';
import { BenchError, intListFlag } from './errors.js';
import { RESULTS } from './paths.js';

export const SCENARIOS = ['sequential', 'concurrent', 'scale', 'reap', 'reap-agent'] as const;
export type Scenario = (typeof SCENARIOS)[number];

/** How many allocations, rounds and repetitions each scenario gets (`--quick`: fewer). */
export interface SuitePlan {
  readonly sequential: { readonly n: number; readonly reps: number };
  readonly concurrent: { readonly n: number; readonly width: number; readonly rounds: number };
  readonly scale: { readonly live: number; readonly window: number; readonly floorAllocs: number };
  readonly reap: {
    readonly sizes: readonly number[];
    readonly reps: number;
    readonly nomadAllocs: number;
    readonly nomadReps: number;
  };
  /** Leaked allocations per reap, live allocations beside them, rounds (a fresh agent each). */
  readonly reapAgent: { readonly leaks: number; readonly live: number; readonly rounds: number };
}

/** The suite's flags, read. */
export interface SuiteFlags {
  readonly out: string;
  readonly docs: boolean;
  readonly only: ReadonlySet<Scenario>;
  readonly pluginDir: string;
  readonly plan: SuitePlan;
}

function planOf(quick: boolean, reapAllocs: string | undefined): SuitePlan {
  return {
    sequential: { n: quick ? 10 : 50, reps: quick ? 1 : 3 },
    concurrent: { n: 64, width: 8, rounds: quick ? 1 : 5 },
    scale: { live: quick ? 100 : 1000, window: quick ? 20 : 50, floorAllocs: 10 },
    reap: {
      sizes:
        reapAllocs === undefined
          ? quick
            ? [1000]
            : [1000, 5000]
          : intListFlag('--reap-allocs', reapAllocs, 1, 10_000),
      reps: quick ? 3 : 7,
      nomadAllocs: quick ? 100 : 1000,
      nomadReps: quick ? 1 : 2,
    },
    reapAgent: { leaks: quick ? 1000 : 5000, live: quick ? 5 : 20, rounds: quick ? 1 : 10 },
  };
}

function onlyOf(only: string): ReadonlySet<Scenario> {
  return new Set(
    only.split(',').map((s) => {
      if (!(SCENARIOS as readonly string[]).includes(s))
        throw new BenchError(`--only ${JSON.stringify(s)} is not one of ${SCENARIOS.join(', ')}`, {
          code: 'invalid-flag',
          flag: '--only',
        });
      return s as Scenario;
    }),
  );
}

/**
 * `[--quick] [--out DIR] [--docs] [--only a,b] [--reap-allocs 1000,5000] [--plugin-dir DIR]`;
 * a bad flag throws a `BenchError` (`invalid-flag`).
 */
export function parseSuiteArgs(args: readonly string[]): SuiteFlags {
  const { values } = parseArgs({
    args: [...args],
    options: {
      quick: { type: 'boolean', default: false },
      out: { type: 'string', default: RESULTS },
      docs: { type: 'boolean', default: false },
      only: { type: 'string', default: SCENARIOS.join(',') },
      'reap-allocs': { type: 'string' },
      'plugin-dir': { type: 'string', default: '/usr/lib/cni' },
    },
  });
  return {
    out: values.out,
    docs: values.docs,
    plan: planOf(values.quick, values['reap-allocs']),
    only: onlyOf(values.only),
    pluginDir: values['plugin-dir'],
  };
}
