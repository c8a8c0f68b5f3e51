import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { seeded } from '@allocnet/testns';
import { KEPT_MARKER, goals, keptPart, markdown, writeReport } from './report.js';
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

  it('judges the reaps against their save reads, paired by reap, and Nomad’s way per allocation', () => {
    const g = goals({
      ...EMPTY,
      reap: {
        cases: [
          { method: 'allocnet', shape: 'full', allocs: 1000, runsMs: [200, 210, 190, 205, 195], saveMs: [80, 84, 76, 82, 78] },
          { method: 'allocnet', shape: 'full', allocs: 5000, runsMs: [1300, 1200, 1400], saveMs: [600, 650, 640] },
          { method: 'allocnet', shape: 'netns-deleted', allocs: 1000, runsMs: [100, 110, 90], saveMs: [50, 50, 50] },
          { method: 'nomad', shape: 'netns-deleted', allocs: 1000, runsMs: [64_000, 66_000], saveMs: [50, 50] },
        ],
      },
    }); // prettier-ignore
    expect(g.map((x) => [x.goal, x.measured, x.verdict])).toEqual([
      ['reap 1000 full-shape leaked allocations, warm (discovery included) ≤ 2.00× the save read of the same ruleset', '2.50× [2.50, 2.50] (200.0 ms against 80.0 ms, 5 reaps)', 'missed'],
      ['reap 5000 full-shape leaked allocations, warm (discovery included) ≤ 2.00× the save read of the same ruleset', '2.03× [1.85, 2.19] (1300.0 ms against 640.0 ms, 3 reaps)', 'undecided'],
      ['reap (netns-deleted shape) per allocation ≥ 100× faster than Nomad’s forceCleanup', '650× [582, 733] (1000 by allocnet, 1000 by Nomad’s way)', 'met'],
    ]); // prettier-ignore
  });

  it('judges the scale scenario’s growth, serving and restore against this run’s comparators, RSS on its value', () => {
    const g = goals({ ...EMPTY, scale: scaleRun() });
    expect(g.map((x) => [x.goal, x.measured, x.verdict])).toEqual([
      ['scale: setup p50 at 951–1000 live ≤ 1.50× at 1–50', '2.00× [2.00, 2.00]', 'missed'],
      ['scale: teardown p50 at 951–1000 live ≤ 1.50× at 1–50', '1.00× [1.00, 1.00]', 'met'],
      ['scale: setup p50 at 231–250 live ≤ 1.20× at 1–20', '1.10× [1.10, 1.10] (go-cni’s own, beside it: 3.00× [3.00, 3.00])', 'met'],
      ['agent RSS ≤ 150 MiB with 1000 live allocations, before a restart (idle: once the agent handed the climb’s memory back, else 30 s after the last setup)', '99.4 MiB; at the last setup 171.3 MiB (one measurement)', 'met'],
      ['agent RSS ≤ 150 MiB with 1000 live allocations, after a restart (restore finished)', '182.5 MiB (one measurement)', 'missed'],
      ['serving (spawn to the first ListAllocNetworks answered) with 1000 allocations ≤ 1.50× with none', '1.20× [1.18, 1.22] (720.0 ms against 600.0 ms, median of 3 fresh agents holding nothing)', 'met'],
      ['restore of 1000 allocations ≤ 0.05× Nomad’s way (1000 × the floor’s CHECK p50 with 1000 live), none failed', '0.10× [0.09, 0.11] (9.0 s against 1000 × 90.0 ms; kept 1000, recreated 0, failed 0)', 'missed'],
      ['`allocnet alloc list` with 1000 allocations ≤ 3.00× `node -e 0`', '2.50× [2.50, 2.50] (250.0 ms against 100.0 ms, 10 rounds)', 'met'],
    ]); // prettier-ignore
  });

  it('calls a restore with a failed allocation missed, whatever its time', () => {
    const s = scaleRun();
    const g = goals({
      ...EMPTY,
      scale: { ...s, restart: { ...s.restart, restoreMs: 10, failed: 1 } },
    });
    expect(g.find((x) => x.goal.startsWith('restore'))?.verdict).toBe('missed');
  });

  it('judges the CLI’s start and its cold reap against node -e 0 and the save read, paired by round', () => {
    const rounds = 6;
    const node = Array.from({ length: rounds }, (_, i) => 100 + 10 * i);
    const g = goals({
      ...EMPTY,
      cli: { rounds, ms: { node, version: node.map((x) => 1.5 * x), help: node.map((x) => 2.5 * x) } },
      reapCli: { leaks: 1000, cliMs: [500, 600, 550], saveMs: [100, 120, 110], nodeMs: [100, 120, 110] },
    }); // prettier-ignore
    expect(g.map((x) => [x.goal, x.measured, x.verdict])).toEqual([
      ['`allocnet version` ≤ 2.00× `node -e 0`', '1.50× [1.50, 1.50] (187.5 ms against 125.0 ms, 6 rounds)', 'met'],
      ['`allocnet --help` ≤ 2.00× `node -e 0`', '2.50× [2.50, 2.50] (312.5 ms against 125.0 ms, 6 rounds)', 'missed'],
      ['`allocnet leaks --reap --local` of 1000 full-shape leaks, a fresh process ≤ 2.50× (the save read + `node -e 0`)', '2.50× [2.50, 2.50] (550.0 ms against 110.0 + 110.0 ms, 3 rounds)', 'met'], // at the limit is within it
    ]); // prettier-ignore
  });
});

/**
 * A scale run: setups 100 ms up to 950 live and 200 after, 110 from 231 to 250; teardowns 200;
 * go-cni 100 then 300 at 231–250; serving 720 ms against 600; restore 9 s against CHECKs of 90.
 */
function scaleRun(): NonNullable<SuiteResults['scale']> {
  const setupMs = Array.from({ length: 1000 }, (_, i) =>
    i >= 950 ? 200 : i >= 230 && i < 250 ? 110 : 100,
  );
  return {
    live: 1000,
    window: 50,
    setupMs,
    teardownMs: Array.from({ length: 1000 }, () => 200),
    rssMiB: 99.4,
    rssAtLastSetupMiB: 171.3,
    rssAfterRestoreMiB: 182.5,
    cpuSecondsPerSetup: 0.0126,
    restart: {
      spawnToFirstAnswerMs: 720,
      listedAtFirstAnswer: 1000,
      spawnToRestoreFinishedMs: 9_500,
      spawnToReadyMs: 9_600,
      restoreMs: 9_000,
      kept: 1000,
      recreated: 0,
      failed: 0,
    },
    floor: { empty: { setupMs: [1], checkMs: [1], teardownMs: [1] }, full: { setupMs: [1], checkMs: [80, 85, 90, 95, 100], teardownMs: [1] } },
    lib: { empty: { setupMs: [1], checkMs: [1], teardownMs: [1] }, full: { setupMs: [1], checkMs: [1], teardownMs: [1] } },
    peer: { live: 250, setupMs: Array.from({ length: 250 }, (_, i) => (i >= 230 ? 300 : 100)) },
    servingEmptyMs: [590, 600, 610],
    allocList: { node: Array.from({ length: 10 }, () => 100), list: Array.from({ length: 10 }, () => 250) },
  }; // prettier-ignore
}

describe('the scale section', () => {
  it('shows p50 by window of live allocations, go-cni’s beside allocnet’s, and each growth', () => {
    const text = markdown({ ...EMPTY, scale: scaleRun() }, {});
    expect(text).toContain('| p50 ms | 1–20 live | 1–50 live | 91–110 live | 231–250 live | 951–1000 live |');
    expect(row(text, 'allocnet setup (through the agent)')).toEqual(['100.0', '100.0', '100.0', '110.0', '200.0']);
    expect(row(text, 'go-cni setup (its own node, up to 250)')).toEqual(['100.0', '100.0', '100.0', '300.0', '–']);
    expect(row(text, '231–250 ÷ 1–20 live')).toEqual(['1.10× [1.10, 1.10]', '1.00× [1.00, 1.00]', '3.00× [3.00, 3.00]']);
    expect(row(text, '951–1000 ÷ 1–50 live')).toEqual(['2.00× [2.00, 2.00]', '1.00× [1.00, 1.00]', '–']);
    expect(text).toContain('Nomad’s way, 1000 × the floor’s CHECK p50 with 1000 live, is 90.0 s.');
  }); // prettier-ignore

  it('says whether the agent handed the climb’s memory back before its idle RSS was read', () => {
    const said = (handedBackIdle: boolean | undefined) =>
      markdown(
        {
          ...EMPTY,
          scale: { ...scaleRun(), ...(handedBackIdle === undefined ? {} : { handedBackIdle }) },
        },
        {},
      );
    expect(said(true)).toContain('MiB once idle (the climb’s memory handed back)');
    expect(said(undefined)).toContain('MiB once idle (the climb’s memory handed back)');
    expect(said(false)).toContain(
      'MiB once idle (no hand-back within 30 s of the last setup: the climb grew the RSS less than one needs)',
    );
  });
});

describe('the CLI sections', () => {
  it('prints each command’s p50 and its ratio to node -e 0, and the cold reap over its comparators', () => {
    const text = markdown(
      {
        ...EMPTY,
        cli: { rounds: 2, ms: { node: [100, 120], version: [300, 360], help: [200, 240] } },
        reapCli: { leaks: 1000, cliMs: [500, 520], saveMs: [100, 110], nodeMs: [100, 110] },
        scenarioS: { cli: 12.4, 'reap-cli': 30.6 },
      },
      {},
    );
    expect(row(text, '`allocnet version`')).toEqual(['330.0', '360.0', '3.00× [3.00, 3.00]']);
    expect(row(text, '`node -e 0`')).toEqual(['110.0', '120.0', '1']);
    expect(row(text, 'the CLI ÷ (save read + `node -e 0`)')).toEqual(['2.43× [2.36, 2.50]']);
    expect(text).toContain('Scenario times: cli 12 s, reap-cli 31 s.');
  });
});

describe('docs/performance.md', () => {
  it('is rewritten above the kept marker, and what is below it is kept as it was', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'allocnet-report-'));
    try {
      const docs = join(dir, 'docs');
      mkdirSync(docs);
      const hand = `${KEPT_MARKER}\n\n## A run made alone\n\n| a   | b   |\n| --- | --- |\n| 1   | 2   |\n`;
      writeFileSync(join(docs, 'performance.md'), `# Performance\n\nold run\n\n${hand}`);
      await writeReport(EMPTY, { out: join(dir, 'out'), docs });
      const text = readFileSync(join(docs, 'performance.md'), 'utf8');
      expect(text).not.toContain('old run');
      expect(text).toContain('## Latest run');
      expect(keptPart(text)).toBe(hand);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
