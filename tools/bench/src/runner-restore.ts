#!/usr/bin/env node
// The alloc-runner's restart: for each N (default 200 and 1,000), on a fresh node namespace, N
// allocations of Nomad's bridge network (one port each) are set up by one runner process; then a
// new runner process restores them (store open, CHECK of every allocation, one reconcile), and
// its memory with N live allocations is read; then a third restores with a configurator whose
// CHECK does nothing (the runner's own cost); then all are torn down. Each phase is its own
// process in the node namespace (nsenter), as an agent restart is. The peer is the same restore
// without the plugins: how much of restore is the runner and how much is CHECK. Every restore
// must keep all N with their addresses, and teardown must bring the node back to its ruleset.
// Writes tools/bench/results/runner-restore.json.
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { execa } from 'execa';
import { tempDir } from '@allocnet/cni/testing';
import { createNetnsLab, requireNetworkTestHost } from '@allocnet/testns';

const here = dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({
  options: {
    n: { type: 'string', default: '200,1000' },
    concurrency: { type: 'string', default: '8' },
  },
});
const SIZES = values.n.split(',').map(Number);
for (const n of SIZES)
  if (!Number.isInteger(n) || n < 1 || n > 4000) throw new Error(`--n ${String(n)} is not 1-4000`);
const CONCURRENCY = Number(values.concurrency);

interface Memory {
  readonly rssMb: number;
  readonly heapUsedMb: number;
  readonly externalMb: number;
}
interface RestoreOut {
  readonly openMs: number;
  readonly restoreMs: number;
  readonly reconcileMs: number;
  readonly totalMs: number;
  readonly counts: Record<string, number>;
  readonly leaks: number;
  readonly live: number;
  readonly addresses: readonly string[];
  readonly memoryBefore: Memory;
  readonly memoryAfter: Memory;
}

async function one(n: number) {
  const lab = createNetnsLab();
  const tmp = await tempDir('allocnet-bench-runner-');
  const prefix = `${lab.prefix}-B${process.pid.toString(36)}-`;
  try {
    const node = await lab.node('bench');
    const phase = async <T>(name: string, count = n): Promise<T> => {
      const { stdout } = await execa('nsenter', [
        `--net=${node.path}`, '--', process.execPath, '--expose-gc', join(here, 'runner-restore-inner.js'),
        '--phase', name, '--n', String(count), '--data-dir', join(tmp.path, 'data'),
        '--ipam-dir', join(tmp.path, 'ipam'), '--cache-dir', join(tmp.path, 'cache'),
        '--prefix', prefix, '--concurrency', String(CONCURRENCY),
      ]); // prettier-ignore
      return JSON.parse(stdout) as T;
    };
    // One allocation up and down first, so the bridge and the shared chains are the baseline.
    await phase('setup', 1);
    await phase('teardown', 1);
    const before = await node.ruleset();

    const setup = await phase<{ ms: number; addresses: string[] }>('setup');
    const restore = await phase<RestoreOut>('restore');
    const overhead = await phase<RestoreOut>('overhead');
    for (const r of [restore, overhead]) {
      if (r.counts.kept !== n || r.leaks !== 0 || r.live !== n)
        throw new Error(`restore of ${n} did not keep them all: ${JSON.stringify(r.counts)}`);
      if (JSON.stringify([...r.addresses].sort()) !== JSON.stringify([...setup.addresses].sort()))
        throw new Error(`restore of ${n} changed addresses`);
    }
    const teardown = await phase<{ ms: number }>('teardown');
    if ((await node.ruleset()) !== before) throw new Error(`teardown of ${n} left rules behind`);
    const left = readdirSync('/run/netns').filter((name) => name.startsWith(prefix));
    if (left.length > 0) throw new Error(`teardown of ${n} left ${left.length} namespaces`);
    return { n, setupMs: setup.ms, restore, overhead, teardownMs: teardown.ms };
  } finally {
    for (const name of readdirSync('/run/netns').filter((x) => x.startsWith(prefix)))
      await execa('ip', ['netns', 'del', name], { reject: false });
    try {
      await lab.dispose();
    } finally {
      await tmp.remove();
    }
  }
}

async function main(): Promise<void> {
  await requireNetworkTestHost(['ip', 'iptables', 'nsenter', '/usr/lib/cni/bridge']);
  const runs = [];
  for (const n of SIZES) {
    const r = await one(n);
    runs.push(r);
    console.error(`n=${n} done`);
  }
  console.log(
    `alloc-runner restart, Nomad bridge network, one port per allocation, maxConcurrent ${CONCURRENCY}; each phase a fresh process`,
  );
  console.log(
    `${'n'.padStart(6)}${'setup s'.padStart(10)}${'open ms'.padStart(10)}${'restore s'.padStart(11)}${'reconcile s'.padStart(13)}${'runner-only ms'.padStart(16)}${'RSS MB'.padStart(9)}${'heap MB'.padStart(9)}${'teardown s'.padStart(12)}`,
  );
  for (const r of runs) {
    console.log(
      `${String(r.n).padStart(6)}${(r.setupMs / 1000).toFixed(1).padStart(10)}${r.restore.openMs.toFixed(1).padStart(10)}${(r.restore.restoreMs / 1000).toFixed(2).padStart(11)}${(r.restore.reconcileMs / 1000).toFixed(2).padStart(13)}${r.overhead.restoreMs.toFixed(0).padStart(16)}${r.restore.memoryAfter.rssMb.toFixed(1).padStart(9)}${r.restore.memoryAfter.heapUsedMb.toFixed(1).padStart(9)}${(r.teardownMs / 1000).toFixed(1).padStart(12)}`,
    );
  }
  console.log(
    'restore = CHECK of every allocation through the plugins; runner-only = the same restore with a no-op CHECK; RSS/heap after restore with n live allocations, after a GC',
  );
  const out = join(here, '..', 'results');
  mkdirSync(out, { recursive: true });
  writeFileSync(
    join(out, 'runner-restore.json'),
    `${JSON.stringify({ benchmark: 'runner-restore', concurrency: CONCURRENCY, date: new Date().toISOString(), runs }, null, 2)}\n`,
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
