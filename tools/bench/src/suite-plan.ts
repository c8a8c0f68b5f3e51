// The suite's command line: its flags, read once into the plan of the run (how many allocations,
// rounds and repetitions each scenario gets) and the scenarios it runs.
import { parseArgs } from 'node:util';
import { BenchError, intListFlag } from './errors.js';
import { RESULTS } from './paths.js';

export const SCENARIOS = [
  'sequential',
  'concurrent',
  'scale',
  'reap',
  'reap-agent',
  'cli',
  'reap-cli',
] as const;
export type Scenario = (typeof SCENARIOS)[number];

/** How many allocations, rounds and repetitions each scenario gets (`--quick`: fewer). */
export interface SuitePlan {
  readonly sequential: { readonly n: number; readonly reps: number };
  readonly concurrent: { readonly n: number; readonly width: number; readonly rounds: number };
  readonly scale: {
    readonly live: number;
    readonly window: number;
    /** Allocations of the floor and the library, each CHECKed `checkRounds` times. */
    readonly floorAllocs: number;
    readonly checkRounds: number;
    /** go-cni's own climb beside the agent's first setups. */
    readonly peerLive: number;
    /** Rounds of `allocnet alloc list` and `node -e 0` with `live` allocations. */
    readonly listRounds: number;
    /** Fresh agents holding nothing, timed to their first answer. */
    readonly servingEmpty: number;
  };
  readonly reap: {
    readonly sizes: readonly number[];
    readonly reps: number;
    readonly nomadAllocs: number;
    readonly nomadReps: number;
  };
  /** Leaked allocations per reap, live allocations beside them, rounds (a fresh agent each). */
  readonly reapAgent: { readonly leaks: number; readonly live: number; readonly rounds: number };
  /** Rounds of `node -e 0`, `allocnet version` and `allocnet --help`. */
  readonly cli: { readonly rounds: number };
  /** Full-shape leaks per CLI reap (`allocnet leaks --reap --local`), rounds (a fresh node each). */
  readonly reapCli: { readonly leaks: number; readonly rounds: number };
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
    // --quick climbs to 250: the dense node, its goal and go-cni's climb beside it.
    scale: {
      live: quick ? 250 : 1000,
      window: 50,
      floorAllocs: 10,
      checkRounds: 3,
      peerLive: 250,
      listRounds: quick ? 4 : 12,
      servingEmpty: quick ? 3 : 7,
    },
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
    reapAgent: { leaks: quick ? 1000 : 5000, live: quick ? 5 : 20, rounds: quick ? 1 : 16 },
    // Three contenders: a Williams square balances its neighbours over 6 rounds.
    cli: { rounds: quick ? 6 : 18 },
    reapCli: { leaks: 1000, rounds: quick ? 3 : 20 },
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
