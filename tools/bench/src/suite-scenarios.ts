// The suite's timed scenarios but scale (suite-scale.ts): sequential, concurrent and reap, each
// on what suite-node.ts gives it; how each is measured is report.ts's METHOD.
import type { TestNetns } from '@allocnet/testns';
import type { Allocation, ContenderDriver, OpResult } from './contenders.js';
import { interleave, roundOrder } from './interleave.js';
import { pool } from './pool.js';
import { reapOnce } from './reap.js';
import type { LeakShape } from './reap.js';
import { TAG, allocation, log, startAll, stopAll, withNode } from './suite-node.js';
import type { SuiteContext } from './suite-node.js';
import type { SuitePlan } from './suite-plan.js';
import { CONTENDERS, INTERLEAVING } from './summary.js';
import type {
  ConcurrentBatch,
  ConcurrentRun,
  Contender,
  ContenderSamples,
  ReapCase,
  ReapRun,
  SequentialRun,
} from './summary.js';

/** The four contenders on one node, interleaved operation by operation: N setups, N teardowns, R reps. */
export async function sequential(
  ctx: SuiteContext,
  { n, reps }: SuitePlan['sequential'],
): Promise<SequentialRun> {
  // Per contender n namespaces, reused by every rep (a teardown leaves one as it was made).
  return withNode(CONTENDERS.length * n, async (lab, node, ctrs, dir) => {
    const netnsOf = (c: Contender, i: number) => ctrs[CONTENDERS.indexOf(c) * n + i] as TestNetns;
    const drivers = await startAll(ctx, INTERLEAVING, lab, node, dir);
    const samples = new Map<Contender, { setupMs: number[]; teardownMs: number[]; failures: string[]; retries: number }>(
      CONTENDERS.map((c) => [c, { setupMs: [], teardownMs: [], failures: [], retries: 0 }]),
    ); // prettier-ignore
    const record = (c: Contender, phase: 'setupMs' | 'teardownMs', r: OpResult) => {
      const s = samples.get(c);
      if (s === undefined) return;
      if (r.ok) {
        s[phase].push(r.ms);
        s.retries += r.retries;
      } else {
        s[phase].push(Number.NaN);
        s.failures.push(r.error);
      }
    };
    const run = (c: Contender) => drivers.get(c) as ContenderDriver;
    try {
      // One untimed setup and teardown each: the bridge, the shared chains, warm caches.
      for (const c of roundOrder(INTERLEAVING, 0)) {
        const warm = allocation(ctx, c, `${TAG[c].slice(0, 4)}ffff`, 0, netnsOf(c, 0));
        for (const r of [await run(c).setup(warm), await run(c).teardown(warm)])
          if (!r.ok) log(`sequential: ${c}'s untimed warm-up failed: ${r.error}`);
      }
      for (let rep = 0; rep < reps; rep++) {
        log(
          `sequential rep ${rep + 1}/${reps}: ${n} rounds of setups, then of teardowns, interleaved`,
        );
        for (const [phase, op] of [
          ['setupMs', 'setup'],
          ['teardownMs', 'teardown'],
        ] as const)
          // Round k = rep·n + i: allocation i of each contender, in that round's order.
          for (const { contender: c, index: i } of interleave(INTERLEAVING, n, rep * n)) {
            const k = rep * n + i;
            record(c, phase, await run(c)[op](allocation(ctx, c, TAG[c], k, netnsOf(c, i))));
          }
      }
    } finally {
      await stopAll(drivers);
    }
    const out = Object.fromEntries(
      CONTENDERS.map((c) => [c, samples.get(c) as ContenderSamples]),
    ) as Record<Contender, ContenderSamples>;
    return { n, reps, samples: out };
  });
}

/** One contender's batch: N setups W at a time on a fresh node, timed, then N teardowns. */
async function batch(
  ctx: SuiteContext,
  { n, width }: SuitePlan['concurrent'],
  c: Contender,
  round: number,
): Promise<ConcurrentBatch> {
  return withNode(n, async (lab, node, ctrs, dir) => {
    const drivers = await startAll(ctx, [c], lab, node, dir);
    const driver = drivers.get(c) as ContenderDriver;
    const tag = `${TAG[c].slice(0, 6)}${round.toString(16).padStart(2, '0')}`;
    const allocs = ctrs.map((ns, i) => allocation(ctx, c, tag, i, ns));
    const setupMs: number[] = [];
    const failures: string[] = [];
    let retries = 0;
    try {
      const started = performance.now();
      await pool(n, width, async (i) => {
        const r = await driver.setup(allocs[i] as Allocation);
        if (r.ok) {
          setupMs.push(r.ms);
          retries += r.retries;
        } else failures.push(r.error);
      });
      const totalMs = performance.now() - started;
      await pool(n, width, async (i) => {
        // A teardown's time is not a figure here; a failed one shows in the node's disposal.
        const r = await driver.teardown(allocs[i] as Allocation);
        if (!r.ok) log(`concurrent: ${c} teardown failed: ${r.error}`);
      });
      return { round, contender: c, setupMs, failures, retries, totalMs };
    } finally {
      await stopAll(drivers);
    }
  });
}

/** N setups W at a time, each contender on a fresh node, rounds interleaved. */
export async function concurrent(
  ctx: SuiteContext,
  plan: SuitePlan['concurrent'],
): Promise<ConcurrentRun> {
  const { n, width, rounds } = plan;
  const batches: ConcurrentBatch[] = [];
  for (let round = 0; round < rounds; round++)
    for (const c of roundOrder(INTERLEAVING, round)) {
      log(
        `concurrent round ${round + 1}/${rounds}: ${c}, ${n} setups ${width} at a time, fresh node`,
      );
      batches.push(await batch(ctx, plan, c, round));
    }
  return { n, width, rounds, batches };
}

/** Leaked allocations reaped by allocnet in both shapes; Nomad's forceCleanup on netns-deleted. */
export async function reap({
  sizes,
  reps,
  nomadAllocs,
  nomadReps,
}: SuitePlan['reap']): Promise<ReapRun> {
  const cases: (ReapCase & { runsMs: number[]; saveMs: number[]; reps: number })[] = [
    ...sizes.flatMap((allocs) =>
      (['full', 'netns-deleted'] as const).map((shape: LeakShape) => ({
        method: 'allocnet' as const,
        shape,
        allocs,
        runsMs: [] as number[],
        saveMs: [] as number[],
        reps,
      })),
    ),
    {
      method: 'nomad' as const,
      shape: 'netns-deleted' as const,
      allocs: nomadAllocs,
      runsMs: [],
      saveMs: [],
      reps: nomadReps,
    },
  ];
  // One untimed allocnet reap first (the smallest full case): the first reap of a process loads
  // the netlink bindings and compiles the parser, a cost that then lands on no contender's samples.
  const warm = cases[0];
  if (warm !== undefined) {
    const { ms } = await reapOnce(warm);
    log(
      `reap warm-up (untimed): ${warm.method} reaped ${warm.allocs} ${warm.shape} leaks in ${ms.toFixed(1)} ms`,
    );
  }
  for (let rep = 0; rep < reps; rep++)
    for (const c of roundOrder(
      cases.filter((x) => x.reps > rep),
      rep,
    )) {
      const { ms, saveMs } = await reapOnce(c);
      c.runsMs.push(ms);
      c.saveMs.push(saveMs);
      log(
        `reap rep ${rep + 1}: ${c.method} reaped ${c.allocs} ${c.shape} leaks in ${ms.toFixed(1)} ms (their save read ${saveMs.toFixed(1)} ms)`,
      );
    }
  return {
    cases: cases.map(({ method, shape, allocs, runsMs, saveMs }) => ({
      method,
      shape,
      allocs,
      runsMs,
      saveMs,
    })),
  };
}
