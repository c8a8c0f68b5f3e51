import { seeded } from '@allocnet/testns';
import { goals, markdown } from './report.js';
import type { Contender, ContenderSamples, SuiteResults } from './summary.js';
import { median } from './stats.js';

const ENV = {
  date: '2026-11-24T00:00:00.000Z',
  cpu: 'test cpu',
  cores: 2,
  memoryGiB: 24,
  kernel: '6.1',
  node: 'v20.19.0',
  plugins: 'containernetworking-plugins 1.1.1',
  iptables: 'iptables v1.8.9 (nf_tables)',
  goCni: 'go-cni 1.1.7',
  loadAverage: '0.1 0.1 0.1',
  code: 'abc1234',
};

const EMPTY: SuiteResults = {
  command: 'node tools/bench/dist/suite.js',
  environment: ENV,
  plan: {},
  sequential: undefined,
  concurrent: undefined,
  scale: undefined,
  reap: undefined,
  durationS: 1,
};

/**
 * Sequential samples with a drift between reps that moves every contender (the machine slowing
 * down and speeding up), each contender a fixed factor of the drift plus seeded noise.
 */
function sequentialOf(factors: Readonly<Record<Contender, number>>, n = 60) {
  const random = seeded(5);
  const drift = Array.from({ length: n }, (_, k) =>
    k < n / 3 ? 100 : k < (2 * n) / 3 ? 150 : 120,
  );
  const samples = (f: number): ContenderSamples => ({
    setupMs: drift.map((d) => d * f + random() * 4),
    teardownMs: drift.map((d) => 2 * d * f + random() * 4),
    failures: [],
    retries: 0,
  });
  return {
    n: n / 3,
    reps: 3,
    samples: {
      floor: samples(factors.floor),
      peer: samples(factors.peer),
      'allocnet-lib': samples(factors['allocnet-lib']),
      'allocnet-agent': samples(factors['allocnet-agent']),
    },
  };
}

/** The cells of the markdown table row that starts with `| name |`. */
function row(text: string, name: string): string[] {
  const line = text.split('\n').find((l) => l.startsWith(`| ${name} |`));
  if (line === undefined) throw new Error(`no row ${name}`);
  return line
    .split('|')
    .slice(2, -1)
    .map((c) => c.trim());
}

describe('the sequential table', () => {
  it('prints each ratio as its own row’s and column’s p50s divided, with the interval', () => {
    const seq = sequentialOf({ floor: 1.2, peer: 1, 'allocnet-lib': 0.95, 'allocnet-agent': 1.08 });
    const text = markdown({ ...EMPTY, sequential: seq }, {});
    const agent = row(text, 'allocnet-agent');
    const peer = row(text, 'go-cni');
    const floor = row(text, 'floor');
    // setup p50, teardown p50, then setup ÷ go-cni, teardown ÷ go-cni, setup ÷ floor, teardown ÷ floor.
    const ratioOf = (cell: string) => /^(\d+\.\d\d)× \[(\d+\.\d\d), (\d+\.\d\d)\]$/.exec(cell);
    const exact = (a: ContenderSamples['setupMs'], b: ContenderSamples['setupMs']) =>
      (median(a) / median(b)).toFixed(2);
    const setupVsPeer = ratioOf(agent[4] ?? '');
    expect(setupVsPeer?.[1]).toBe(
      exact(seq.samples['allocnet-agent'].setupMs, seq.samples.peer.setupMs),
    );
    expect(ratioOf(agent[5] ?? '')?.[1]).toBe(
      exact(seq.samples['allocnet-agent'].teardownMs, seq.samples.peer.teardownMs),
    );
    expect(ratioOf(agent[6] ?? '')?.[1]).toBe(
      exact(seq.samples['allocnet-agent'].setupMs, seq.samples.floor.setupMs),
    );
    // The printed p50s are the same medians, to their printed precision.
    expect(agent[0]).toBe(median(seq.samples['allocnet-agent'].setupMs).toFixed(1));
    expect(peer[0]).toBe(median(seq.samples.peer.setupMs).toFixed(1));
    expect(floor[2]).toBe(median(seq.samples.floor.teardownMs).toFixed(1));
    expect(peer[4]).toBe('1');
    // The paired interval sees the steady 8% under the drift.
    expect(Number(setupVsPeer?.[2])).toBeGreaterThan(1.03);
    expect(Number(setupVsPeer?.[3])).toBeLessThan(1.13);
  });

  it('names the failed operations and says their rounds are left out of the ratios', () => {
    const seq = sequentialOf({ floor: 1, peer: 1, 'allocnet-lib': 1, 'allocnet-agent': 1 });
    const peer = seq.samples.peer;
    const failed = {
      ...seq,
      samples: {
        ...seq.samples,
        peer: { ...peer, setupMs: [Number.NaN, ...peer.setupMs.slice(1)], failures: ['go-cni setup of "x" failed: boom'] },
      },
    }; // prettier-ignore
    expect(markdown({ ...EMPTY, sequential: failed }, {})).toContain(
      'Failed operations: peer: 1 (go-cni setup of "x" failed: boom); a round where either contender failed is left out of their ratio.',
    );
  });
});

describe('goals', () => {
  it('meets a ratio goal only when the whole interval is under it', () => {
    const fast = goals({
      ...EMPTY,
      sequential: sequentialOf({ floor: 1, peer: 1, 'allocnet-lib': 1, 'allocnet-agent': 0.85 }),
    });
    expect(fast.map((g) => [g.goal, g.verdict])).toEqual([
      ['setup p50 through the agent ≤ 0.95× go-cni', 'met'],
      ['teardown p50 through the agent ≤ 0.95× go-cni', 'met'],
      ['setup p50 through the agent ≤ 1.10× floor', 'met'],
      ['teardown p50 through the agent ≤ 1.10× floor', 'met'],
    ]);
    const close = goals({
      ...EMPTY,
      sequential: sequentialOf({ floor: 1, peer: 1, 'allocnet-lib': 1, 'allocnet-agent': 0.95 }),
    });
    expect(close[0]?.verdict).toBe('undecided');
    const slow = goals({
      ...EMPTY,
      sequential: sequentialOf({ floor: 1, peer: 1, 'allocnet-lib': 1, 'allocnet-agent': 1.09 }),
    });
    expect(slow[0]?.verdict).toBe('missed');
    expect(slow[0]?.measured).toMatch(/^1\.\d\d× \[1\.\d\d, 1\.\d\d\]$/);
    expect(slow[2]?.verdict).toBe('met');
  });

  it('prints an undecided goal as not met, saying why', () => {
    const text = markdown(
      {
        ...EMPTY,
        sequential: sequentialOf({ floor: 1, peer: 1, 'allocnet-lib': 1, 'allocnet-agent': 0.95 }),
      },
      {},
    );
    expect(row(text, 'setup p50 through the agent ≤ 0.95× go-cni')[1]).toBe(
      '**no**: the interval straddles the goal',
    );
  });

  it('judges the concurrent throughput by rounds, and any failed setup', () => {
    const batch = (contender: Contender, round: number, perSecond: number, failures: string[] = []) => ({
      round, contender, setupMs: Array.from({ length: 64 - failures.length }, () => 700), failures, retries: 0,
      totalMs: ((64 - failures.length) / perSecond) * 1000,
    }); // prettier-ignore
    const rounds = [0, 1, 2, 3, 4];
    const g = goals({
      ...EMPTY,
      concurrent: {
        n: 64,
        width: 8,
        rounds: 5,
        batches: rounds.flatMap((r) => [
          batch('peer', r, 10 + r, r === 0 ? ['race'] : []),
          batch('allocnet-agent', r, (10 + r) * 1.2),
        ]),
      },
    });
    expect(g).toEqual([
      {
        goal: 'concurrent (64 at 8): zero failed setups through the agent',
        measured: '0 failed, 0 retries in 320',
        verdict: 'met',
      },
      {
        goal: 'concurrent (64 at 8): setups/s through the agent ≥ 1.10× go-cni',
        measured: '1.20× [1.20, 1.20]',
        verdict: 'met',
      },
    ]);
    const one = goals({
      ...EMPTY,
      concurrent: {
        n: 64,
        width: 8,
        rounds: 1,
        batches: [batch('peer', 0, 10), batch('allocnet-agent', 0, 10.5)],
      },
    });
    expect(one[1]).toEqual({
      goal: 'concurrent (64 at 8): setups/s through the agent ≥ 1.10× go-cni',
      measured: '1.05× (one measurement)',
      verdict: 'missed',
    });
  });

  it('judges reaps at 1,000 and 5,000 full-shape leaks by their medians’ intervals, and RSS and the restart once', () => {
    const g = goals({
      ...EMPTY,
      reap: {
        cases: [
          { method: 'allocnet', shape: 'full', allocs: 1000, runsMs: [200, 210, 190, 205, 195] },
          { method: 'allocnet', shape: 'full', allocs: 5000, runsMs: [1300, 1200, 1400] },
          { method: 'allocnet', shape: 'full', allocs: 200, runsMs: [40] },
          { method: 'allocnet', shape: 'netns-deleted', allocs: 1000, runsMs: [100, 110, 90] },
          { method: 'nomad', shape: 'netns-deleted', allocs: 1000, runsMs: [64_000, 66_000] },
        ],
      },
      scale: {
        live: 1000,
        window: 50,
        setupMs: Array.from({ length: 1000 }, () => 100),
        teardownMs: Array.from({ length: 1000 }, () => 200),
        rssMiB: 99.4,
        rssAfterRestoreMiB: 182.5,
        cpuSecondsPerSetup: 0.0126,
        restart: {
          spawnToFirstAnswerMs: 53_000,
          listedAtFirstAnswer: 1000,
          spawnToRestoreFinishedMs: 53_000,
          spawnToReadyMs: 53_000,
          restoreMs: 52_000,
          kept: 1000,
          recreated: 0,
          failed: 0,
        },
        floor: { empty: { setupMs: [1], checkMs: [1], teardownMs: [1] }, full: { setupMs: [1], checkMs: [1], teardownMs: [1] } },
        lib: { empty: { setupMs: [1], checkMs: [1], teardownMs: [1] }, full: { setupMs: [1], checkMs: [1], teardownMs: [1] } },
      },
    }); // prettier-ignore
    expect(g.map((x) => [x.goal, x.measured, x.verdict])).toEqual([
      ['scale: setup p50 at 951–1000 live ≤ 1.50× at 1–50', '1.00× [1.00, 1.00]', 'met'],
      ['scale: teardown p50 at 951–1000 live ≤ 1.50× at 1–50', '1.00× [1.00, 1.00]', 'met'],
      ['agent RSS ≤ 150 MiB with 1000 live allocations, before a restart', '99.4 MiB (one measurement)', 'met'],
      ['agent RSS ≤ 150 MiB with 1000 live allocations, after a restart (restore finished)', '182.5 MiB (one measurement)', 'missed'],
      ['serving (first ListAllocNetworks answered) ≤ 1 s after the agent’s start with 1000 allocations', '53000.0 ms (one measurement)', 'missed'],
      ['restore of 1000 allocations ≤ 30 s, none failed', '52.0 s (kept 1000, recreated 0, failed 0) (one measurement)', 'missed'],
      ['reap 1000 full-shape leaked allocations (discovery included) ≤ 250 ms', '200.0 ms [190.0, 210.0] (median of 5)', 'met'],
      ['reap 5000 full-shape leaked allocations (discovery included) ≤ 1250 ms', '1300.0 ms [1200.0, 1400.0] (median of 3)', 'undecided'],
      ['reap (netns-deleted shape) per allocation ≥ 100× faster than Nomad’s forceCleanup', '650× [582, 733] (1000 by allocnet, 1000 by Nomad’s way)', 'met'],
    ]); // prettier-ignore
  });
});
