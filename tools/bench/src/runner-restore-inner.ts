#!/usr/bin/env node
// One phase of the runner-restore benchmark, in its own process INSIDE the node namespace
// (`nsenter --net=`; the namespaces the runner makes stay visible outside): the agent's runner on
// the real configurator and plugins. Prints one JSON line.
//   --phase setup    : N setups (one port each), all requested at once (the runner's limit applies)
//   --phase restore  : a fresh runner process: open the store, start() = restore (CHECK of every
//                      allocation) + one reconcile; then memory with N live allocations
//   --phase overhead : the same restore with a configurator whose check does nothing: the
//                      runner's own cost (store, queue, namespace checks)
//   --phase teardown : N teardowns
import { parseArgs } from 'node:util';
import { createAllocRunner } from '@allocnet/alloc-runner';
import { createCniRuntime } from '@allocnet/cni';
import { createCniConfigurator } from '@allocnet/cni-configurator';
import type { CniConfigurator } from '@allocnet/cni-configurator';
import { createIptables } from '@allocnet/iptables-node';

const { values } = parseArgs({
  options: {
    phase: { type: 'string' },
    n: { type: 'string' },
    'data-dir': { type: 'string' },
    'ipam-dir': { type: 'string' },
    'cache-dir': { type: 'string' },
    prefix: { type: 'string' },
    concurrency: { type: 'string', default: '8' },
  },
});
const N = Number(values.n);
const PHASES = ['setup', 'restore', 'overhead', 'teardown'] as const;
const phase = PHASES.find((p) => p === values.phase);
if (phase === undefined) throw new Error(`--phase is one of ${PHASES.join(', ')}`);
function required(name: 'data-dir' | 'ipam-dir' | 'cache-dir' | 'prefix'): string {
  const value = values[name];
  if (value === undefined) throw new Error(`--${name} is required`);
  return value;
}
const dataDir = required('data-dir');
const ipamDir = required('ipam-dir');
const cacheDir = required('cache-dir');
const prefix = required('prefix');

const idOf = (i: number) => `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`;

function memory() {
  (globalThis as { gc?: () => void }).gc?.();
  const m = process.memoryUsage();
  return {
    rssMb: m.rss / 2 ** 20,
    heapUsedMb: m.heapUsed / 2 ** 20,
    externalMb: m.external / 2 ** 20,
  };
}

async function main(phase: (typeof PHASES)[number]): Promise<void> {
  const real = await createCniConfigurator({
    runtime: createCniRuntime({ pluginDirs: ['/usr/lib/cni'], cacheDir }),
    iptables: { ipv4: createIptables(), ipv6: createIptables({ family: 'ipv6' }) },
    defaultNetwork: { ipamDataDir: ipamDir },
    watchConfDir: false,
  });
  const configurator: CniConfigurator =
    phase === 'overhead' ? { ...real, check: () => Promise.resolve({ ran: false }) } : real;
  const before = memory();
  const began = performance.now();
  const runner = await createAllocRunner({
    configurator,
    dataDir,
    netnsPrefix: prefix,
    maxConcurrent: Number(values.concurrency),
    reconcile: { mode: 'reap', intervalMs: 0 },
  });
  const openMs = performance.now() - began;
  try {
    switch (phase) {
      case 'setup': {
        const t0 = performance.now();
        const statuses = await Promise.all(
          Array.from({ length: N }, (_, i) =>
            runner.setup({
              allocId: idOf(i),
              namespace: 'default',
              jobId: 'bench',
              groupName: 'g',
              ports: [{ label: 'http', value: 20000 + i, to: 80 }],
            }),
          ),
        );
        const ms = performance.now() - t0;
        process.stdout.write(
          `${JSON.stringify({ phase, ms, addresses: statuses.map((s) => s.address) })}\n`,
        );
        break;
      }
      case 'restore':
      case 'overhead': {
        const started = await runner.start();
        const totalMs = performance.now() - began;
        const after = memory();
        const live = runner.list().filter((r) => r.phase === 'ready');
        process.stdout.write(
          `${JSON.stringify({
            phase,
            openMs,
            restoreMs: started.restore.durationMs,
            reconcileMs: started.reconcile.durationMs,
            totalMs,
            counts: started.restore.counts,
            leaks: started.reconcile.leakedAllocations + started.reconcile.orphanNamespaces,
            live: live.length,
            addresses: live.map((r) => r.status?.address ?? ''),
            memoryBefore: before,
            memoryAfter: after,
          })}\n`,
        );
        break;
      }
      case 'teardown': {
        const t0 = performance.now();
        await Promise.all(Array.from({ length: N }, (_, i) => runner.teardown(idOf(i))));
        process.stdout.write(`${JSON.stringify({ phase, ms: performance.now() - t0 })}\n`);
        break;
      }
    }
  } finally {
    await runner.close();
    await real.close();
  }
}

main(phase).catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
