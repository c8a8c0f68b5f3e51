// The suite’s report: the goals (each with its figure’s 95% interval and a verdict), then a table
// per scenario, every figure computed from the raw samples of suite.json by summary.ts, with the
// charts of charts.ts beside it. docs/performance.md is this report under a fixed text saying how
// things are measured; it says nothing about the results that its tables do not show.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as prettier from 'prettier';
import { latencySpec, png, scaleSpec, throughputSpec } from './charts.js';
import { f1, f2, fr } from './format.js';
import { goals } from './goals.js';
import { METHOD } from './report-method.js';
import { cliSection, reapCliSection, reapSection, scaleSection } from './report-sections.js';
import type { Verdict } from './stats.js';
import {
  CONTENDERS,
  concurrentRow,
  sequentialRatio,
  sequentialStats,
  throughputRatio,
} from './summary.js';
import type { Contender, Phase, SequentialRun, SuiteResults } from './summary.js';

export { GOALS, goals } from './goals.js';
export type { Goal } from './goals.js';
export { METHOD } from './report-method.js';

const VERDICT_TEXT: Readonly<Record<Verdict, string>> = {
  met: 'yes',
  missed: '**no**',
  undecided: '**no**: the interval straddles the goal',
};

function sequentialSection(seq: SequentialRun, images: Images): string[] {
  const ratio = (c: Contender, vs: Contender, phase: Phase) =>
    c === vs ? '1' : fr(sequentialRatio(seq, c, vs, phase));
  const lines = [
    `### Sequential: ${seq.n * seq.reps} setups, then as many teardowns, one at a time, the contenders interleaved operation by operation on one node`,
    '',
    '| contender | setup p50 ms | setup p95 ms | teardown p50 ms | teardown p95 ms | setup ÷ go-cni | teardown ÷ go-cni | setup ÷ floor | teardown ÷ floor |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const c of CONTENDERS) {
    const s = sequentialStats(seq, c, 'setup');
    const t = sequentialStats(seq, c, 'teardown');
    lines.push(
      `| ${c === 'peer' ? 'go-cni' : c} | ${f1(s.p50)} | ${f1(s.p95)} | ${f1(t.p50)} | ${f1(t.p95)} | ${ratio(c, 'peer', 'setup')} | ${ratio(c, 'peer', 'teardown')} | ${ratio(c, 'floor', 'setup')} | ${ratio(c, 'floor', 'teardown')} |`,
    );
  }
  const failures = CONTENDERS.flatMap((c) =>
    seq.samples[c].failures.length === 0
      ? []
      : [`${c}: ${seq.samples[c].failures.length} (${seq.samples[c].failures[0] ?? ''})`],
  );
  lines.push(
    '',
    `Each ratio is the two p50s of its row and column divided (the medians of the paired rounds), with its paired bootstrap 95% interval. Failed operations: ${failures.length === 0 ? 'none' : `${failures.join('; ')}; a round where either contender failed is left out of their ratio`}. Teardown through allocnet includes its leak audit; go-cni’s is its Remove; the floor’s is the plugins’ DEL alone.`,
    '',
  );
  if (images.latency !== undefined) lines.push(`![latency per contender](${images.latency})`, '');
  return lines;
}

interface Images {
  latency?: string;
  scale?: string;
  throughput?: string;
}

/** The markdown summary. */
export function markdown(r: SuiteResults, images: Images): string {
  const e = r.environment;
  const lines: string[] = [
    `Command: \`${r.command}\` (${r.durationS.toFixed(0)} s). Machine: ${e.cpu}, ${e.cores} cores, ${e.memoryGiB} GiB; kernel ${e.kernel}; Node ${e.node}; ${e.plugins}; ${e.iptables}; go-cni: ${e.goCni}; load before the run ${e.loadAverage}. ${e.date}. Code measured: \`${e.code}\`.`,
    '',
  ];
  const g = goals(r);
  if (g.length > 0) {
    lines.push(
      '### Goals',
      '',
      'Met only when the whole 95% interval is on the goal’s side; a figure measured once has no interval.',
      '',
      '| goal | measured [95% interval] | met |',
      '| --- | --- | --- |',
    );
    for (const x of g) lines.push(`| ${x.goal} | ${x.measured} | ${VERDICT_TEXT[x.verdict]} |`);
    lines.push('');
  }
  if (r.sequential !== undefined) lines.push(...sequentialSection(r.sequential, images));
  const con = r.concurrent;
  if (con !== undefined) {
    lines.push(
      `### Concurrent: ${con.n} setups ${con.width} at a time, each contender on a fresh node, ${con.rounds} round(s) interleaved`,
      '',
      '| contender | failed setups | retries | setups/s (median of rounds) | ÷ go-cni | setup p50 ms |',
      '| --- | --- | --- | --- | --- | --- |',
    );
    for (const c of CONTENDERS) {
      const row = concurrentRow(con, c);
      lines.push(
        `| ${c === 'peer' ? 'go-cni' : c} | ${row.failed} of ${row.attempted} | ${row.retries} | ${f2(row.throughput)} | ${c === 'peer' ? '1' : con.rounds < 2 ? `${f2(throughputRatio(con, c, 'peer').ratio)}× (one round)` : fr(throughputRatio(con, c, 'peer'))} | ${f1(row.p50)} |`,
      );
    }
    lines.push(
      '',
      'Setups/s are successful setups over the batch’s time from the first start to the last end, timed by the suite for every contender; the ratio is the two medians of the rounds’ setups/s divided, with a bootstrap 95% interval that resamples the rounds as pairs. go-cni and the floor make one attempt per setup (their failures are the first-setup race on a fresh node); allocnet retries as Nomad does and counts retries.',
      '',
    );
    if (images.throughput !== undefined) lines.push(`![throughput](${images.throughput})`, '');
  }
  if (r.scale !== undefined) lines.push(...scaleSection(r.scale, images.scale));
  if (r.reap !== undefined) lines.push(...reapSection(r.reap));
  if (r.cli !== undefined) lines.push(...cliSection(r.cli));
  if (r.reapCli !== undefined) lines.push(...reapCliSection(r.reapCli));
  const times = Object.entries(r.scenarioS ?? {});
  if (times.length > 0)
    lines.push(
      `Scenario times: ${times.map(([name, sec]) => `${name} ${sec.toFixed(0)} s`).join(', ')}.`,
      '',
    );
  return `${lines.join('\n')}\n`;
}

/**
 * The line in docs/performance.md under which runs made apart from the suite are written by hand
 * (a scenario run alone, on purpose): `--docs` rewrites what is above it and keeps what is below.
 */
export const KEPT_MARKER =
  '<!-- Below: runs made apart from the last full suite run, kept as they are by suite.js --docs. -->';

/** The hand-written part of a performance.md (from `KEPT_MARKER` on), or '' when it has none. */
export function keptPart(text: string): string {
  const at = text.indexOf(KEPT_MARKER);
  return at < 0 ? '' : text.slice(at);
}

/** Writes suite.md and the charts into `out` (and docs/performance.md with its images); returns the markdown. */
export async function writeReport(
  r: SuiteResults,
  where: { out: string; docs: string | undefined },
): Promise<string> {
  const targets = [{ dir: where.out }];
  if (where.docs !== undefined) targets.push({ dir: join(where.docs, 'performance') });
  for (const t of targets) {
    mkdirSync(t.dir, { recursive: true });
    if (r.sequential !== undefined)
      await png(latencySpec(r.sequential), join(t.dir, 'latency.png'));
    if (r.concurrent !== undefined)
      await png(throughputSpec(r.concurrent), join(t.dir, 'throughput.png'));
    if (r.scale !== undefined) await png(scaleSpec(r.scale), join(t.dir, 'scale.png'));
  }
  const images: Images = {
    ...(r.sequential === undefined ? {} : { latency: 'latency.png' }),
    ...(r.concurrent === undefined ? {} : { throughput: 'throughput.png' }),
    ...(r.scale === undefined ? {} : { scale: 'scale.png' }),
  };
  const summary = markdown(r, images);
  writeFileSync(join(where.out, 'suite.md'), summary);
  if (where.docs !== undefined) {
    const docImages = Object.fromEntries(
      Object.entries(images).map(([k, v]) => [k, `performance/${v}`]),
    );
    const file = join(where.docs, 'performance.md');
    const kept = existsSync(file) ? keptPart(readFileSync(file, 'utf8')) : '';
    const text = [
      '# Performance',
      '',
      METHOD,
      '',
      '## Latest run',
      '',
      markdown(r, docImages),
      kept,
    ].join('\n');
    // Formatted as the repository’s docs are (lint checks docs/ with prettier).
    writeFileSync(
      file,
      await prettier.format(text, { ...(await prettier.resolveConfig(file)), filepath: file }),
    );
  }
  return summary;
}
