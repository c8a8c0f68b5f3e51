// The suite's charts: vega-lite specs rendered to SVG, then to PNG with resvg.
import { writeFileSync } from 'node:fs';
import { Resvg } from '@resvg/resvg-js';
import * as vega from 'vega';
import { compile } from 'vega-lite';
import type { TopLevelSpec } from 'vega-lite';
import { percentile } from './stats.js';
import { CONTENDERS, isPeer, phases, windowP50 } from './summary.js';
import type { ScaleRun, SuiteResults } from './summary.js';

export async function png(spec: TopLevelSpec, file: string): Promise<void> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' });
  const svg = await view.toSVG();
  const image = new Resvg(svg, {
    background: 'white',
    font: { loadSystemFonts: true, defaultFontFamily: 'DejaVu Sans' },
    fitTo: { mode: 'zoom', value: 2 },
  }).render();
  writeFileSync(file, image.asPng());
  view.finalize();
}

const CONFIG = { font: 'DejaVu Sans', axis: { labelFontSize: 11, titleFontSize: 12 } };

/**
 * A vega-lite spec built from data. vega-lite checks a spec when it compiles it (and throws on a
 * bad one); its TypeScript types are too narrow to describe specs assembled from computed parts,
 * so the one cast is here.
 */
function spec(json: Record<string, unknown>): TopLevelSpec {
  return json as unknown as TopLevelSpec;
}

export function latencySpec(r: SuiteResults): TopLevelSpec {
  const raw: { contender: string; phase: string; ms: number }[] = [];
  const peer: { contender: string; phase: string; p50: number; p95: number }[] = [];
  for (const run of r.sequential) {
    if (isPeer(run.result)) {
      for (const [phase, p] of [
        ['setup', run.result.setup],
        ['teardown', run.result.remove],
      ] as const)
        peer.push({ contender: 'peer', phase, p50: p.p50Ms, p95: p.p95Ms });
    } else {
      for (const ms of run.result.setup.samplesMs)
        raw.push({ contender: run.contender, phase: 'setup', ms });
      for (const ms of run.result.teardown.samplesMs)
        raw.push({ contender: run.contender, phase: 'teardown', ms });
    }
  }
  const y = { field: 'contender', type: 'nominal', sort: CONTENDERS, title: null } as const;
  // The axis ends a little past the slowest p95, so that one slow first setup on a fresh node
  // does not squeeze every box into a line; operations past it are drawn at the edge.
  const panel = (phase: 'setup' | 'teardown') => {
    const mine = raw.filter((x) => x.phase === phase).map((x) => x.ms);
    const p95s = [
      ...peer.filter((x) => x.phase === phase).map((x) => x.p95),
      ...(mine.length > 0 ? [percentile(mine, 95)] : []),
    ];
    const max = Math.ceil((Math.max(...p95s, 1) * 1.4) / 50) * 50;
    const x = {
      type: 'quantitative',
      title: `${phase} ms`,
      scale: { domain: [0, max], clamp: true },
    } as const;
    return {
      width: 640,
      height: 130,
      layer: [
        {
          data: { values: raw.filter((d) => d.phase === phase) },
          mark: { type: 'boxplot', extent: 1.5 },
          encoding: {
            y,
            x: { field: 'ms', ...x },
            color: { field: 'contender', type: 'nominal', legend: null },
          },
        },
        {
          data: { values: peer.filter((d) => d.phase === phase) },
          mark: { type: 'rule', strokeWidth: 2 },
          encoding: {
            y,
            x: { aggregate: 'min', field: 'p50', ...x },
            x2: { aggregate: 'max', field: 'p95' },
          },
        },
        {
          data: { values: peer.filter((d) => d.phase === phase) },
          mark: { type: 'tick', thickness: 3, color: 'black' },
          encoding: { y, x: { field: 'p50', ...x } },
        },
      ],
    };
  };
  return spec({
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    title:
      'Latency per operation, one at a time (boxes: quartiles and 1.5 IQR whiskers of every sample; peer: its p50 per rep (ticks) to its p95)',
    config: CONFIG,
    vconcat: [panel('setup'), panel('teardown')],
  });
}

export function scaleSpec(s: ScaleRun): TopLevelSpec {
  const w = s.window;
  const values: { live: number; op: string; p50: number }[] = [];
  for (let from = 0; from < s.live; from += w) {
    values.push({
      live: Math.min(from + w, s.live),
      op: 'setup',
      p50: windowP50(s.setupMs, from, from + w),
    });
    // Teardown i happens with live - i allocations live.
    values.push({
      live: s.live - from,
      op: 'teardown',
      p50: windowP50(s.teardownMs, from, from + w),
    });
  }
  return spec({
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    title: `p50 per ${w} operations against live allocations (the agent, one at a time)`,
    config: CONFIG,
    width: 640,
    height: 280,
    data: { values },
    mark: { type: 'line', point: true },
    encoding: {
      x: { field: 'live', type: 'quantitative', title: 'live allocations' },
      y: { field: 'p50', type: 'quantitative', title: 'p50 ms' },
      color: { field: 'op', type: 'nominal', title: null },
    },
  });
}

export function throughputSpec(r: SuiteResults): TopLevelSpec {
  return spec({
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    title: 'Concurrent setups on a fresh node: successful setups per second (each rep)',
    config: CONFIG,
    width: 640,
    height: 160,
    data: {
      values: r.concurrent.map((run) => {
        const s = phases(run.result).setup;
        return { contender: run.contender, perSecond: s.ok / (s.totalMs / 1000), failed: s.failed };
      }),
    },
    layer: [
      {
        mark: { type: 'bar', opacity: 0.35 },
        encoding: {
          y: { field: 'contender', type: 'nominal', sort: CONTENDERS, title: null },
          x: { aggregate: 'median', field: 'perSecond', type: 'quantitative', title: 'setups/s' },
        },
      },
      {
        mark: { type: 'point', filled: true },
        encoding: {
          y: { field: 'contender', type: 'nominal', sort: CONTENDERS },
          x: { field: 'perSecond', type: 'quantitative' },
        },
      },
    ],
  });
}
