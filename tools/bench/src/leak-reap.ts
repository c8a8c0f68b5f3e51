#!/usr/bin/env node
// Reaping N leaked allocations (default 1,000) two ways, in the same run, each on a fresh node
// namespace holding exactly what the bridge plugin leaves when an allocation's netns is deleted
// out of band (a tagged POSTROUTING jump and its CNI-<h> chain with two rules):
//   allocnet : one CniConfigurator.reapLeaks call, discovery included (iptables-save of both
//              families, the IPAM and CNI cache scan, planning, one iptables-restore per batch)
//   nomad    : Nomad's forceCleanup per allocation (list POSTROUTING, delete the jump, flush the
//              chain, delete it), one process each, for allocations it already knows
// Building the leaks (one iptables-restore) is not timed. Both must end at the same ruleset as
// before the leaks. Prints a table and writes JSON to tools/bench/results/leak-reap.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createCniRuntime } from '@allocnet/cni';
import { tempDir } from '@allocnet/cni/testing';
import { allocChains, createCniConfigurator } from '@allocnet/cni-configurator';
import { addPluginShapes } from '@allocnet/cni-configurator/testing';
import { createBatch, createIptables } from '@allocnet/iptables-node';
import type { Iptables } from '@allocnet/iptables-node';
import { requireNetworkTestHost, withNetnsLab } from '@allocnet/testns';
import { ratio, summarize } from './stats.js';

const { values } = parseArgs({
  options: {
    allocs: { type: 'string', default: '1000' },
    'nomad-allocs': { type: 'string' },
    reps: { type: 'string', default: '3' },
    'batch-size': { type: 'string', default: '250' },
  },
});
const ALLOCS = Number(values.allocs);
const NOMAD_ALLOCS = Number(values['nomad-allocs'] ?? values.allocs);
const REPS = Number(values.reps);
const BATCH = Number(values['batch-size']);
for (const [flag, n, max] of [
  ['--allocs', ALLOCS, 4000],
  ['--nomad-allocs', NOMAD_ALLOCS, 4000],
  ['--reps', REPS, 100],
  ['--batch-size', BATCH, 4000],
] as const)
  if (!Number.isInteger(n) || n < 1 || n > max) throw new Error(`${flag} ${n} is not 1-${max}`);

const idOf = (i: number) => `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`;
const ipOf = (i: number) => `172.26.${64 + Math.floor(i / 250)}.${(i % 250) + 2}`;

async function baseline(ipt: Iptables): Promise<string> {
  const tables = await ipt.save();
  return JSON.stringify(
    tables.map((t) => [t.name, t.chains, t.rules.map((r) => [r.chain, r.spec])]),
  );
}

async function leak(ipt: Iptables, n: number): Promise<void> {
  const batch = createBatch();
  for (let i = 0; i < n; i++)
    addPluginShapes(batch, { network: 'nomad', allocId: idOf(i), ip: ipOf(i) });
  await ipt.restore(batch);
}

const methods = {
  async allocnet(ipt: Iptables, ipt6: Iptables, n: number, dir: string) {
    const configurator = await createCniConfigurator({
      runtime: createCniRuntime({ cacheDir: join(dir, 'cache') }),
      iptables: { ipv4: ipt, ipv6: ipt6 },
      defaultNetwork: { ipamDataDir: join(dir, 'ipam') },
    });
    try {
      const started = performance.now();
      const report = await configurator.reapLeaks([], { batchSize: BATCH });
      const ms = performance.now() - started;
      if (report.reaped.length !== n)
        throw new Error(`allocnet reaped ${report.reaped.length} of ${n}`);
      return ms;
    } finally {
      await configurator.close();
    }
  },
  async nomad(ipt: Iptables, _ipt6: Iptables, n: number) {
    const started = performance.now();
    for (let i = 0; i < n; i++) {
      // Nomad's forceCleanup: find the allocation's POSTROUTING jump, delete it, then its chain.
      const comment = `name: "nomad" id: "${idOf(i)}"`;
      const rules = await ipt.listRules('nat', 'POSTROUTING');
      const jump = rules.find((r) => r.comment === comment);
      if (jump === undefined) throw new Error(`no POSTROUTING rule for ${idOf(i)}`);
      await ipt.delete('nat', 'POSTROUTING', jump.spec);
      const chain = allocChains('nomad', idOf(i)).masq;
      await ipt.clearChain('nat', chain);
      await ipt.deleteChain('nat', chain);
    }
    return performance.now() - started;
  },
} as const;
type Method = keyof typeof methods;

await requireNetworkTestHost(['ip', 'iptables', 'iptables-restore', 'nsenter']);
const runs: Record<Method, number[]> = { allocnet: [], nomad: [] };
for (let rep = 0; rep < REPS; rep++) {
  const order: Method[] = rep % 2 === 0 ? ['allocnet', 'nomad'] : ['nomad', 'allocnet'];
  for (const method of order) {
    const n = method === 'nomad' ? NOMAD_ALLOCS : ALLOCS;
    await withNetnsLab(async (lab) => {
      const node = await lab.node('reap');
      const tmp = await tempDir('allocnet-bench-');
      try {
        const ipt = createIptables({ netns: node.path });
        const ipt6 = createIptables({ family: 'ipv6', netns: node.path });
        await ipt.restore(createBatch().newChain('nat', 'CNI-HOSTPORT-DNAT'));
        const before = await baseline(ipt);
        await leak(ipt, n);
        const ms = await methods[method](ipt, ipt6, n, tmp.path);
        if ((await baseline(ipt)) !== before)
          throw new Error(`${method} did not bring nat back to its baseline`);
        runs[method].push(ms);
        process.stderr.write(
          `rep ${rep + 1}/${REPS}: ${method} reaped ${n} in ${ms.toFixed(1)} ms\n`,
        );
      } finally {
        await tmp.remove();
      }
    });
  }
}

const allocnet = summarize(runs.allocnet);
const nomad = summarize(runs.nomad);
const perAllocNomad = nomad.median / NOMAD_ALLOCS;
const perAllocAllocnet = allocnet.median / ALLOCS;
const speedup = perAllocNomad / perAllocAllocnet;
const lines = [
  `reaping leaked allocations (bridge masquerade jump + chain each), ${REPS} reps, fresh node namespace per run`,
  `method      allocs   median ms      min      max   ms/alloc`,
  `allocnet  ${String(ALLOCS).padStart(7)} ${allocnet.median.toFixed(1).padStart(11)} ${allocnet.min.toFixed(1).padStart(8)} ${allocnet.max.toFixed(1).padStart(8)} ${perAllocAllocnet.toFixed(3).padStart(10)}`,
  `nomad     ${String(NOMAD_ALLOCS).padStart(7)} ${nomad.median.toFixed(1).padStart(11)} ${nomad.min.toFixed(1).padStart(8)} ${nomad.max.toFixed(1).padStart(8)} ${perAllocNomad.toFixed(3).padStart(10)}`,
  `allocnet is ${speedup.toFixed(0)}x faster per allocation (goal >= 100x); allocnet for ${ALLOCS}: ${allocnet.median.toFixed(0)} ms (goal < 1000 ms)`,
];
process.stdout.write(`${lines.join('\n')}\n`);
const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, '..', 'results');
mkdirSync(out, { recursive: true });
writeFileSync(
  join(out, 'leak-reap.json'),
  `${JSON.stringify({ allocs: ALLOCS, nomadAllocs: NOMAD_ALLOCS, reps: REPS, batchSize: BATCH, allocnet, nomad, speedupPerAlloc: speedup, ratioOfMedians: ratio(nomad, allocnet) }, null, 2)}\n`,
);
