// The suite's charts: vega-lite specs rendered to SVG, then to PNG with resvg.
import { writeFileSync } from 'node:fs';
import { Resvg } from '@resvg/resvg-js';
import * as vega from 'vega';
import { compile } from 'vega-lite';
import type { TopLevelSpec } from 'vega-lite';
import { percentile } from './stats.js';
import { CONTENDERS, windowP50 } from './summary.js';
import type { ConcurrentRun, Contender, ScaleRun, SequentialRun } from './summary.js';

/** The name a chart shows: the peer is go-cni. */
const label = (c: Contender) => (c === 'peer' ? 'go-cni' : c);

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

export function latencySpec(seq: SequentialRun): TopLevelSpec {
  const raw: { contender: string; phase: string; ms: number }[] = [];
  for (const c of CONTENDERS)
    for (const phase of ['setup', 'teardown'] as const)
      for (const ms of seq.samples[c][phase === 'setup' ? 'setupMs' : 'teardownMs'])
        if (!Number.isNaN(ms)) raw.push({ contender: label(c), phase, ms });
  const y = {
    field: 'contender',
    type: 'nominal',
    sort: CONTENDERS.map(label),
    title: null,
  } as const;
  // The axis ends a little past the slowest p95, so that one slow operation does not squeeze
  // every box into a line; operations past it are drawn at the edge.
  const panel = (phase: 'setup' | 'teardown') => {
    const p95s = CONTENDERS.flatMap((c) => {
      const mine = raw.filter((x) => x.phase === phase && x.contender === label(c));
      return mine.length > 0
        ? [
            percentile(
              mine.map((x) => x.ms),
              95,
            ),
          ]
        : [];
    });
    const max = Math.ceil((Math.max(...p95s, 1) * 1.4) / 50) * 50;
    return {
      width: 640,
      height: 130,
      data: { values: raw.filter((d) => d.phase === phase) },
      mark: { type: 'boxplot', extent: 1.5 },
      encoding: {
        y,
        x: {
          field: 'ms',
          type: 'quantitative',
          title: `${phase} ms`,
          scale: { domain: [0, max], clamp: true },
        },
        color: { field: 'contender', type: 'nominal', legend: null },
      },
    };
  };
  return spec({
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    title: 'Latency per operation, contenders interleaved (quartiles; whiskers 1.5 IQR)',
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
      op: 'allocnet setup',
      p50: windowP50(s.setupMs, from, from + w),
    });
    // Teardown i happens with live - i allocations live.
    values.push({
      live: s.live - from,
      op: 'allocnet teardown',
      p50: windowP50(s.teardownMs, from, from + w),
    });
  }
  // go-cni's own climb, on its own node beside the agent's first setups.
  for (let from = 0; from < s.peer.live; from += w)
    values.push({
      live: Math.min(from + w, s.peer.live),
      op: 'go-cni setup',
      p50: windowP50(s.peer.setupMs, from, from + w),
    });
  return spec({
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    title: `p50 per ${w} operations against live allocations (the agent and go-cni, one at a time)`,
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

export function throughputSpec(con: ConcurrentRun): TopLevelSpec {
  const sort = CONTENDERS.map(label);
  return spec({
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    title: `${con.n} setups ${con.width} at a time on a fresh node: successful setups per second (each round)`,
    config: CONFIG,
    width: 640,
    height: 160,
    data: {
      values: con.batches.map((b) => ({
        contender: label(b.contender),
        perSecond: b.setupMs.length / (b.totalMs / 1000),
      })),
    },
    layer: [
      {
        mark: { type: 'bar', opacity: 0.35 },
        encoding: {
          y: { field: 'contender', type: 'nominal', sort, title: null },
          x: { aggregate: 'median', field: 'perSecond', type: 'quantitative', title: 'setups/s' },
        },
      },
      {
        mark: { type: 'point', filled: true },
        encoding: {
          y: { field: 'contender', type: 'nominal', sort },
          x: { field: 'perSecond', type: 'quantitative' },
        },
      },
    ],
  });
}
