import { CRASH_POINTS, crashPointsFromEnv, noCrashPoints } from './crash.js';
import { isRunnerError } from './errors.js';

describe('crashPointsFromEnv', () => {
  it('does nothing when ALLOCNET_CRASH_AT is unset or empty', () => {
    expect(crashPointsFromEnv({})).toBe(noCrashPoints);
    expect(crashPointsFromEnv({ ALLOCNET_CRASH_AT: '' })).toBe(noCrashPoints);
  });

  it('refuses a name that is not a crash point, listing them', () => {
    let error: unknown;
    try {
      crashPointsFromEnv({ ALLOCNET_CRASH_AT: 'setup:after-adds' });
    } catch (e) {
      error = e;
    }
    expect(isRunnerError(error) && [error.code, error.field, error.message]).toEqual([
      'invalid-argument',
      'ALLOCNET_CRASH_AT',
      'ALLOCNET_CRASH_AT "setup:after-adds" is not a crash point; they are setup:after-intent, setup:after-netns, setup:after-add, setup:after-attachment-intent, setup:after-attachment-add, setup:after-ready, teardown:after-intent, teardown:after-del, teardown:after-netns',
    ]);
  });

  it('kills the process with SIGKILL at the named point, and passes every other point by', () => {
    const kills: [number, NodeJS.Signals][] = [];
    const points = crashPointsFromEnv({ ALLOCNET_CRASH_AT: 'teardown:after-netns' }, (pid, sig) =>
      kills.push([pid, sig]),
    );
    for (const p of CRASH_POINTS.filter((x) => x !== 'teardown:after-netns')) points.reached(p);
    expect(kills).toEqual([]);
    points.reached('teardown:after-netns');
    // The real kill of a real process is tested in integration (runner-crash.test.ts).
    expect(kills).toEqual([[process.pid, 'SIGKILL']]);
  });
});
