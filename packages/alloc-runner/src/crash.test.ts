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
      'ALLOCNET_CRASH_AT "setup:after-adds" is not a crash point; they are setup:after-intent, setup:after-netns, setup:after-add, setup:after-ready, teardown:after-intent, teardown:after-del, teardown:after-netns',
    ]);
  });

  it('passes other points by (the kill itself is tested on a real process in integration)', () => {
    const points = crashPointsFromEnv({ ALLOCNET_CRASH_AT: 'teardown:after-netns' });
    for (const p of CRASH_POINTS.filter((x) => x !== 'teardown:after-netns')) points.reached(p);
  });
});
