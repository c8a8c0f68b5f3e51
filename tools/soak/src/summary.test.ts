import type { ChurnResult } from './churn.js';
import { formatSummary, summarize } from './summary.js';
import { leakFindings } from './verdict.js';

const CHURN: ChurnResult = {
  done: 64,
  failures: 0,
  failureMessages: [],
  setupMs: [100, 120, 300],
  teardownMs: [80, 90],
  warmRssMiB: 120,
  elapsedMs: 16_000,
};

describe('summarize', () => {
  const input = {
    count: 64,
    width: 8,
    warmup: 6,
    churn: CHURN,
    rssStartMiB: 90,
    rssEndMiB: 126,
    leaks: [],
  };

  it('passes a clean run with its figures', () => {
    expect(summarize(input)).toEqual({
      ok: true,
      count: 64,
      width: 8,
      warmup: 6,
      cycles: 64,
      failures: 0,
      failureMessages: [],
      elapsedMs: 16_000,
      cyclesPerSecond: 4,
      setupMs: { p50: 120, p99: 300 },
      teardownMs: { p50: 80, p99: 90 },
      rssMiB: { start: 90, warm: 120, end: 126 },
      rssGrowthPercent: 5,
      rssLimitPercent: 10,
      leaks: [],
      problems: [],
    });
  });

  it('fails on failed cycles, on a short run, on growth and on an unclean agent exit', () => {
    const failing = summarize({
      ...input,
      churn: {
        ...CHURN,
        done: 60,
        failures: 2,
        failureMessages: [
          'soak-0000007 setup: 13 INTERNAL: plugin "bridge" failed (ADD)',
          'soak-0000007 teardown: 14 UNAVAILABLE: No connection established',
        ],
      },
      rssEndMiB: 140,
      agentExitProblem: 'the agent did not exit cleanly on SIGTERM (1); its stderr ends:\nboom',
    });
    expect(failing.ok).toBe(false);
    expect(failing.problems).toEqual([
      'only 60 of 64 cycles ran to their end',
      '2 of 60 cycles failed; the first: soak-0000007 setup: 13 INTERNAL: plugin "bridge" failed (ADD)',
      'agent RSS grew 16.7% after the warm-up (120.0 → 140.0 MiB); the limit is 10%',
      'the agent did not exit cleanly on SIGTERM (1); its stderr ends:\nboom',
    ]);
  });

  it('fails on a rule planted in the node before the leak check, naming it', () => {
    const baseline = { ipv4: ['filter :FORWARD ACCEPT'], ipv6: ['filter :FORWARD ACCEPT'] };
    const planted = {
      ipv4: ['filter :FORWARD ACCEPT', 'filter -A FORWARD -d 172.26.64.9/32 -j ACCEPT'],
      ipv6: ['filter :FORWARD ACCEPT'],
    };
    const leaks = leakFindings(
      baseline,
      {
        rules: planted,
        namespaces: [],
        reservations: [],
        cacheFiles: [],
        allocations: [],
        leaks: [],
        orphans: { rules: 0, chains: 0, reservations: 0, cacheFiles: 0 },
        strayNamespaces: [],
      },
      { netnsPrefix: 'ant-1-s9-', ipamDir: '/ipam/nomad', cacheDir: '/data/cni' },
    );
    const summary = summarize({ ...input, leaks });
    expect(summary.ok).toBe(false);
    expect(summary.leaks).toEqual(leaks);
    expect(summary.problems).toEqual([
      'leak check: ipv4 rules: 1 line not in the baseline: "filter -A FORWARD -d 172.26.64.9/32 -j ACCEPT"',
    ]);
  });

  it('does not judge growth when the warm-up was the whole run', () => {
    const whole = summarize({ ...input, warmup: 64, rssEndMiB: 200 });
    expect(whole.ok).toBe(true);
    expect(whole.rssGrowthPercent).toBeNull();
  });

  it('prints a passing run for a person', () => {
    expect(formatSummary(summarize(input))).toBe(
      [
        'soak: 64 of 64 cycles, 8 wide, warm-up 6 cycles: PASSED',
        '  failures     0',
        '  rate         4.0 cycles/s (16.0 s)',
        '  setup        p50 120.0 ms, p99 300.0 ms',
        '  teardown     p50 80.0 ms, p99 90.0 ms',
        '  agent RSS    start 90.0 MiB, after the warm-up 120.0 MiB, end 126.0 MiB: +5.0% after the warm-up (limit 10%)',
        '  leak check   clean: rules v4/v6 as the baseline, no namespaces, IPAM and cache empty, alloc list empty, no leaks',
        '',
      ].join('\n'),
    );
  });

  it('prints a failing run with every problem and the failures kept', () => {
    const text = formatSummary(
      summarize({
        ...input,
        warmup: 64,
        churn: {
          ...CHURN,
          failures: 2,
          failureMessages: [
            'soak-0000001 setup: 4 DEADLINE_EXCEEDED: Deadline exceeded',
            'soak-0000002 setup: 4 DEADLINE_EXCEEDED: Deadline exceeded',
          ],
        },
        leaks: ['alloc list: 1 allocation left: "soak-0000002 PHASE_SETTING_UP"'],
      }),
    );
    expect(text).toBe(
      [
        'soak: 64 of 64 cycles, 8 wide, warm-up 64 cycles: FAILED',
        '  failures     2',
        '  rate         4.0 cycles/s (16.0 s)',
        '  setup        p50 120.0 ms, p99 300.0 ms',
        '  teardown     p50 80.0 ms, p99 90.0 ms',
        '  agent RSS    start 90.0 MiB, after the warm-up 120.0 MiB, end 126.0 MiB: growth not judged: the warm-up was the whole run',
        '  leak check   1 finding(s)',
        'problems:',
        '  - 2 of 64 cycles failed; the first: soak-0000001 setup: 4 DEADLINE_EXCEEDED: Deadline exceeded',
        '  - leak check: alloc list: 1 allocation left: "soak-0000002 PHASE_SETTING_UP"',
        'failures (the first 2):',
        '  - soak-0000001 setup: 4 DEADLINE_EXCEEDED: Deadline exceeded',
        '  - soak-0000002 setup: 4 DEADLINE_EXCEEDED: Deadline exceeded',
        '',
      ].join('\n'),
    );
  });
});
