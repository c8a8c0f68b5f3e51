// The suite's scale scenario: the agent up to M live allocations one at a time, the floor and the
// library empty and full on the same node, then a restart (first answer, restore finished, RSS
// before and after), then every allocation torn down one at a time.
import { join } from 'node:path';
import type { TestNetns } from '@allocnet/testns';
import {
  connect,
  firstAnswer,
  processUsage,
  spawnBenchAgent,
  startBenchAgent,
} from './agent-process.js';
import type { BenchAgent, BenchAgentOptions } from './agent-process.js';
import { agentOps, startInner } from './contenders.js';
import type { OpResult } from './contenders.js';
import { idOf, log, withNode } from './suite-node.js';
import type { SuiteContext } from './suite-node.js';
import type { SuitePlan } from './suite-plan.js';
import type { InnerSamples, ScaleRun } from './summary.js';

/**
 * The plugins' own cost (`floor`) or allocnet's CHECK's (`lib`: what a restore runs for each
 * allocation) on `node`, over the namespaces `ctrs[from…from+count]`.
 */
async function innerSamples(
  ctx: SuiteContext,
  at: { node: TestNetns; dir: string; ctrs: readonly TestNetns[]; count: number },
  method: 'floor' | 'lib',
  from: number,
): Promise<InnerSamples> {
  const inner = startInner(method, {
    node: at.node,
    dir: at.dir,
    pluginDir: ctx.pluginDir,
    cacheDir: join(at.dir, `cache-${method}`),
  });
  const out = { setupMs: [] as number[], checkMs: [] as number[], teardownMs: [] as number[] };
  const allocs = at.ctrs.slice(from, from + at.count).map((ns, j) => ({
    id: idOf(method === 'floor' ? 'f1005ca1' : 'e1005ca1', from + j),
    netns: ns.path,
    port: 50000 + from + j,
  }));
  try {
    for (const [op, into] of [
      ['setup', out.setupMs],
      ['check', out.checkMs],
      ['teardown', out.teardownMs],
    ] as const)
      for (const a of allocs) {
        const r = await inner.call(op, a);
        if (!r.ok)
          throw new Error(`scale: ${method} ${op} of ${JSON.stringify(a.id)} failed: ${r.error}`);
        into.push(r.ms);
      }
  } finally {
    await inner.stop();
  }
  return out;
}

/** The agent started again over its M allocations: when it answered, restored and was ready. */
async function restartAgent(
  options: BenchAgentOptions,
): Promise<{ agent: BenchAgent; restart: ScaleRun['restart'] }> {
  const spawned = await spawnBenchAgent(options);
  try {
    const first = await firstAnswer(spawned, 600_000);
    const finished = await spawned.line('restore finished', 600_000);
    // The agent's own line once the restore and the first reconcile are done (and the
    // memory they freed handed back): the RSS after the restore is read after it.
    await spawned.line('restored allocations from the last run', 600_000);
    const readyAt = await spawned.ready(600_000);
    const agent = connect(spawned, readyAt);
    const restart = {
      spawnToFirstAnswerMs: first.at - spawned.spawnedAt,
      listedAtFirstAnswer: first.listed,
      spawnToRestoreFinishedMs: finished.at - spawned.spawnedAt,
      spawnToReadyMs: readyAt - spawned.spawnedAt,
      restoreMs: Number(finished.fields.durationMs ?? Number.NaN),
      kept: Number(finished.fields.kept ?? Number.NaN),
      recreated: Number(finished.fields.recreated ?? Number.NaN),
      failed: Number(finished.fields.failed ?? Number.NaN),
    };
    return { agent, restart };
  } catch (error) {
    await spawned.stop();
    throw error;
  }
}

async function timed(r: Promise<OpResult>, what: string): Promise<number> {
  const done = await r;
  if (!done.ok) throw new Error(`scale: ${what} failed: ${done.error}`);
  return done.ms;
}

/** The agent up to M live allocations one at a time, a restart, then all torn down one at a time. */
export async function scale(ctx: SuiteContext, plan: SuitePlan['scale']): Promise<ScaleRun> {
  const { live: M, window, floorAllocs: FLOOR } = plan;
  return withNode(M + 2 * FLOOR, async (lab, node, all, dir) => {
    const ctrs = all.slice(0, M);
    const options: BenchAgentOptions = {
      node,
      dir: join(dir, 'agent'),
      ipamDir: join(dir, 'ipam'),
      netnsPrefix: `${lab.prefix}-S`,
      pluginDir: ctx.pluginDir,
    };
    // The plugins' own cost on this node, empty and then with M allocations: the floor. The same
    // for allocnet's CHECK (what a restore runs for each allocation), on the same node.
    const at = { node, dir, ctrs: all, count: FLOOR };
    const floorEmpty = await innerSamples(ctx, at, 'floor', M);
    const libEmpty = await innerSamples(ctx, at, 'lib', M);
    let agent: BenchAgent = await startBenchAgent(options);
    try {
      const ops = agentOps(agent);
      const alloc = (i: number) => ({
        id: idOf('5ca1e000', i),
        netns: (ctrs[i] as TestNetns).path,
        port: 20000 + i,
      });
      const setupMs: number[] = [];
      const before = processUsage(agent.pid);
      for (let i = 0; i < M; i++) {
        setupMs.push(await timed(ops.setup(alloc(i)), `setup ${i + 1} of ${M}`));
        if ((i + 1) % 100 === 0) log(`scale: ${i + 1}/${M} live`);
      }
      const after = processUsage(agent.pid);
      log(`scale: the floor and the library with ${M} live allocations`);
      const floorFull = await innerSamples(ctx, at, 'floor', M + FLOOR);
      const libFull = await innerSamples(ctx, at, 'lib', M + FLOOR);
      log(`scale: restarting the agent with ${M} live allocations`);
      await agent.stop();
      const restarted = await restartAgent(options);
      agent = restarted.agent;
      const afterRestore = processUsage(agent.pid);
      const again = agentOps(agent);
      const teardownMs: number[] = [];
      for (let i = 0; i < M; i++) {
        teardownMs.push(await timed(again.teardown(alloc(i)), `teardown ${i + 1} of ${M}`));
        if ((i + 1) % 100 === 0) log(`scale: ${M - i - 1} live`);
      }
      return {
        live: M,
        window,
        setupMs,
        teardownMs,
        rssMiB: after.rssMiB,
        rssAfterRestoreMiB: afterRestore.rssMiB,
        cpuSecondsPerSetup: (after.cpuSeconds - before.cpuSeconds) / M,
        restart: restarted.restart,
        floor: { empty: floorEmpty, full: floorFull },
        lib: { empty: libEmpty, full: libFull },
      };
    } finally {
      await agent.stop();
    }
  });
}
