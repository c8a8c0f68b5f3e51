#!/usr/bin/env node
// Reaping N leaked allocations (default 1,000) on a fresh node namespace per reap, in the shapes
// and the two ways reap.ts describes: allocnet's reapLeaks (discovery included) on each shape,
// and Nomad's per-allocation forceCleanup on the netns-deleted shape, reps interleaved (allocnet
// full, allocnet netns-deleted, nomad, then the next rep in another order), after one untimed
// warm-up reap. Every reap must bring the ruleset back to its baseline. Prints a table (medians
// with bootstrap 95% intervals) and writes JSON to tools/bench/results/leak-reap.json.
//
//   node tools/bench/dist/leak-reap.js [--allocs 1000] [--shape full,netns-deleted]
//        [--nomad-allocs N (default --allocs; 0: not measured)] [--reps 3] [--batch-size N]
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { requireNetworkTestHost } from '@allocnet/testns';
import { BenchError, intFlag } from './errors.js';
import { roundOrder } from './interleave.js';
import { RESULTS } from './paths.js';
import { LEAK_SHAPES, LINES_PER_LEAK, reapOnce } from './reap.js';
import type { LeakShape, ReapMethod } from './reap.js';
import { bootstrapMedian } from './stats.js';

const { values } = parseArgs({
  options: {
    allocs: { type: 'string', default: '1000' },
    shape: { type: 'string', default: LEAK_SHAPES.join(',') },
    'nomad-allocs': { type: 'string' },
    reps: { type: 'string', default: '3' },
    'batch-size': { type: 'string' },
  },
});
const ALLOCS = intFlag('--allocs', values.allocs, 1, 10_000);
const NOMAD_ALLOCS = intFlag('--nomad-allocs', values['nomad-allocs'] ?? values.allocs, 0, 10_000);
const REPS = intFlag('--reps', values.reps, 1, 100);
const BATCH =
  values['batch-size'] === undefined
    ? undefined
    : intFlag('--batch-size', values['batch-size'], 1, 10_000);
const SHAPES = values.shape.split(',').map((s) => {
  if (!(LEAK_SHAPES as readonly string[]).includes(s))
    throw new BenchError(`--shape ${JSON.stringify(s)} is not one of ${LEAK_SHAPES.join(', ')}`, {
      code: 'invalid-flag',
      flag: '--shape',
    });
  return s as LeakShape;
});

interface Case {
  readonly name: string;
  readonly method: ReapMethod;
  readonly shape: LeakShape;
  readonly allocs: number;
}
const cases: Case[] = [
  ...SHAPES.map((shape) => ({
    name: `allocnet ${shape}`,
    method: 'allocnet' as const,
    shape,
    allocs: ALLOCS,
  })),
  ...(NOMAD_ALLOCS > 0
    ? [
        {
          name: 'nomad netns-deleted',
          method: 'nomad' as const,
          shape: 'netns-deleted' as const,
          allocs: NOMAD_ALLOCS,
        },
      ]
    : []),
];

await requireNetworkTestHost(['ip', 'iptables', 'iptables-restore', 'nsenter']);
const runs = new Map<string, number[]>(cases.map((c) => [c.name, []]));
// One untimed reap first, as the suite does: a process's first reap loads the netlink bindings and
// compiles the parser.
const warm = cases[0];
if (warm !== undefined) {
  const { ms } = await reapOnce({ ...warm, ...(BATCH === undefined ? {} : { batchSize: BATCH }) });
  process.stderr.write(
    `warm-up (untimed): ${warm.name} reaped ${warm.allocs} in ${ms.toFixed(1)} ms\n`,
  );
}
for (let rep = 0; rep < REPS; rep++)
  for (const c of roundOrder(cases, rep)) {
    const { ms } = await reapOnce({ ...c, ...(BATCH === undefined ? {} : { batchSize: BATCH }) });
    runs.get(c.name)?.push(ms);
    process.stderr.write(
      `rep ${rep + 1}/${REPS}: ${c.name} reaped ${c.allocs} in ${ms.toFixed(1)} ms\n`,
    );
  }

const rows = cases.map((c) => {
  const ms = runs.get(c.name) ?? [];
  const m = bootstrapMedian(ms);
  return { ...c, linesPerAlloc: LINES_PER_LEAK[c.shape], runsMs: ms, medianMs: m.median, lo: m.lo, hi: m.hi, perAllocMs: m.median / c.allocs };
}); // prettier-ignore
const lines = [
  `reaping leaked allocations, ${REPS} rep(s) each, interleaved, a fresh node namespace per reap; median ms [bootstrap 95% interval]`,
  `${'case'.padEnd(22)}${'allocs'.padStart(7)}${'lines/alloc'.padStart(12)}  median ms [95% interval]      ms/alloc`,
  ...rows.map(
    (r) =>
      `${r.name.padEnd(22)}${String(r.allocs).padStart(7)}${String(r.linesPerAlloc).padStart(12)}  ${`${r.medianMs.toFixed(1)} [${r.lo.toFixed(1)}, ${r.hi.toFixed(1)}]`.padEnd(28)}${r.perAllocMs.toFixed(3).padStart(10)}`,
  ),
];
const nomad = rows.find((r) => r.method === 'nomad');
const same = rows.find((r) => r.method === 'allocnet' && r.shape === 'netns-deleted');
if (nomad !== undefined && same !== undefined)
  lines.push(
    `per allocation on the netns-deleted shape, allocnet is ${(nomad.perAllocMs / same.perAllocMs).toFixed(0)}x faster than Nomad's forceCleanup`,
  );
process.stdout.write(`${lines.join('\n')}\n`);
mkdirSync(RESULTS, { recursive: true });
writeFileSync(
  join(RESULTS, 'leak-reap.json'),
  `${JSON.stringify({ reps: REPS, batchSize: BATCH ?? 'default', rows }, null, 2)}\n`,
);
