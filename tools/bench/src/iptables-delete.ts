#!/usr/bin/env node
// Deleting N rules (default 1,000) shaped like the bridge plugin's masquerade jumps: one
// `iptables-restore --noflush` batch against one `iptables -D` process per rule, both through
// @allocnet/iptables-node, in the same run, alternating which goes first. Each repetition uses a
// fresh node namespace; building the rules (one restore) is not timed. Prints a table and writes
// JSON to tools/bench/results/.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createBatch, createIptables } from '@allocnet/iptables-node';
import type { Iptables } from '@allocnet/iptables-node';
import { requireNetworkTestHost, withNetnsLab } from '@allocnet/testns';
import { ratio, summarize } from './stats.js';

const { values } = parseArgs({
  options: {
    rules: { type: 'string', default: '1000' },
    reps: { type: 'string', default: '3' },
  },
});
const RULES = Number(values.rules);
const REPS = Number(values.reps);
if (!Number.isInteger(RULES) || RULES < 1 || RULES > 60_000)
  throw new Error(`--rules ${values.rules} is not 1-60000`);
if (!Number.isInteger(REPS) || REPS < 1)
  throw new Error(`--reps ${values.reps} is not a positive whole number`);

const CHAIN = 'CNI-BENCH';

function specs(): string[][] {
  return Array.from({ length: RULES }, (_, i) => {
    const id = `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`;
    const ip = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}/32`;
    return ['-s', ip, '-m', 'comment', '--comment', `name: "nomad" id: "${id}"`, '-j', CHAIN];
  });
}

async function build(ipt: Iptables, rules: readonly string[][]): Promise<void> {
  const batch = createBatch();
  for (const spec of rules) batch.append('nat', 'POSTROUTING', spec);
  await ipt.restore(batch);
}

async function expectEmpty(ipt: Iptables, method: string): Promise<void> {
  const left = await ipt.listRules('nat', 'POSTROUTING');
  if (left.length !== 0) throw new Error(`${method} left ${left.length} rules`);
}

const methods = {
  'one iptables-restore batch': async (ipt: Iptables, rules: readonly string[][]) => {
    const batch = createBatch();
    for (const spec of rules) batch.delete('nat', 'POSTROUTING', spec);
    await ipt.restore(batch);
  },
  'one iptables -D per rule': async (ipt: Iptables, rules: readonly string[][]) => {
    for (const spec of rules) await ipt.delete('nat', 'POSTROUTING', spec);
  },
} as const;
type Method = keyof typeof methods;

async function main(): Promise<void> {
  await requireNetworkTestHost(['ip', 'iptables', 'nsenter']);
  const rules = specs();
  const times: Record<Method, number[]> = {
    'one iptables-restore batch': [],
    'one iptables -D per rule': [],
  };
  const order = Object.keys(methods) as Method[];
  for (let rep = 0; rep < REPS; rep++) {
    await withNetnsLab(async (lab) => {
      const node = await lab.node('bench');
      const ipt = createIptables({ netns: node.path });
      await ipt.newChain('nat', CHAIN);
      for (const method of rep % 2 === 0 ? order : [...order].reverse()) {
        await build(ipt, rules);
        const started = performance.now();
        await methods[method](ipt, rules);
        const ms = performance.now() - started;
        await expectEmpty(ipt, method);
        times[method].push(ms);
        console.error(`rep ${rep + 1}/${REPS}: ${method}: ${ms.toFixed(1)} ms`);
      }
    });
  }
  const batch = summarize(times['one iptables-restore batch']);
  const perRule = summarize(times['one iptables -D per rule']);
  const result = {
    benchmark: 'iptables-delete',
    rules: RULES,
    reps: REPS,
    date: new Date().toISOString(),
    batch,
    perRule,
    speedup: ratio(perRule, batch),
  };
  const fmt = (n: number) => n.toFixed(1).padStart(10);
  console.log(
    `deleting ${RULES} rules from nat/POSTROUTING, ${REPS} reps, fresh node namespace per rep`,
  );
  console.log(
    `${'method'.padEnd(28)}${'median ms'.padStart(10)}${'min'.padStart(10)}${'max'.padStart(10)}${'ms/rule'.padStart(10)}`,
  );
  for (const [name, s] of [
    ['one iptables-restore batch', batch],
    ['one iptables -D per rule', perRule],
  ] as const) {
    console.log(
      `${name.padEnd(28)}${fmt(s.median)}${fmt(s.min)}${fmt(s.max)}${(s.median / RULES).toFixed(3).padStart(10)}`,
    );
  }
  console.log(
    `batch is ${result.speedup.toFixed(0)}x faster than one process per rule (median / median)`,
  );
  const out = join(dirname(fileURLToPath(import.meta.url)), '..', 'results');
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'iptables-delete.json'), `${JSON.stringify(result, null, 2)}\n`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
