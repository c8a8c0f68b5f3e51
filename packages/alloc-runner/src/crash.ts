import { RunnerError } from './errors.js';

/**
 * The phase boundaries at which crash tests kill the runner. Each is reached right after the
 * step it names is durable (a record) or done (a namespace, the plugins).
 */
export const CRASH_POINTS = [
  'setup:after-intent', // the setting-up record is committed; no namespace, no plugin yet
  'setup:after-netns', // the namespace is made; no plugin yet
  'setup:after-add', // the configurator's setup (ADD) returned; the ready record is not written
  'setup:after-attachment-intent', // a secondary's intent (its `extra` entry) is committed; its ADD not run
  'setup:after-attachment-add', // a secondary's ADD returned; its entry is not recorded ready yet
  'setup:after-ready', // the ready record is committed
  'teardown:after-intent', // the tearing-down record is committed; no DEL yet
  'teardown:after-del', // the configurator's teardown (DEL and audit) returned
  'teardown:after-netns', // the namespace is removed; the record is still there
] as const;

export type CrashPoint = (typeof CRASH_POINTS)[number];

/** The hook the runner calls at each crash point. */
export interface CrashPoints {
  reached(point: CrashPoint): void;
}

/** The environment variable crash tests set to the point at which the runner kills itself. */
export const CRASH_ENV = 'ALLOCNET_CRASH_AT';

/** Crash points that do nothing: what the runner uses outside tests. */
export const noCrashPoints: CrashPoints = {
  reached() {
    // Nothing to do: no crash is asked for.
  },
};

/**
 * Reads `ALLOCNET_CRASH_AT` once: when it names a crash point, the process kills itself with
 * SIGKILL on reaching it (no handler, no `finally`, no flush runs, as in a real crash). Unset (the
 * normal case), nothing happens. Only tests set it. An unknown name is an error, so that a typo
 * does not make a crash test pass without crashing. `kill` is the seam unit tests use.
 */
export function crashPointsFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  kill: (pid: number, signal: NodeJS.Signals) => void = (pid, signal) => {
    process.kill(pid, signal);
  },
): CrashPoints {
  const at = env[CRASH_ENV];
  if (at === undefined || at === '') return noCrashPoints;
  if (!(CRASH_POINTS as readonly string[]).includes(at)) {
    throw new RunnerError(
      `${CRASH_ENV} ${JSON.stringify(at)} is not a crash point; they are ${CRASH_POINTS.join(', ')}`,
      { code: 'invalid-argument', path: [CRASH_ENV] },
    );
  }
  return {
    reached(point) {
      if (point === at) kill(process.pid, 'SIGKILL');
    },
  };
}
