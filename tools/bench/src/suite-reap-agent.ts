// The suite's reap-agent scenario: ReapLeaks through a real agent process, as an operator meets
// it. Each round on a fresh node namespace with a fresh agent and `live` live allocations: the
// probe on the quiet agent, then `leaks` full-shape leaked allocations (reap.ts's shape, made by
// one untimed iptables-restore) reaped by the agent's FIRST ReapLeaks, then as many again reaped
// by a second (the warm one); during each reap the probe asks, one call at a time, every
// PROBE_EVERY_MS, ListAllocNetworks, GetAllocNetwork and grpc.health.v1 Health/Check in turn,
// recording each call's latency. Every reap must bring the node's ruleset back to what it was
// with the live allocations alone (`not-exact` otherwise).
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { addLeaks } from '@allocnet/cni-configurator/testing';
import { createBatch, createIptables } from '@allocnet/iptables-node';
import type { TestNetns } from '@allocnet/testns';
import { startBenchAgent } from './agent-process.js';
import type { BenchAgent } from './agent-process.js';
import { agentOps } from './contenders.js';
import { BenchError } from './errors.js';
import { idOf, log, withNode } from './suite-node.js';
import type { SuiteContext } from './suite-node.js';
import type { SuitePlan } from './suite-plan.js';
import type { ReapAgentRound, ReapAgentRun } from './summary.js';

/** How often the probe asks (the figure), and how long it asks the quiet agent. */
export const PROBE_EVERY_MS = 20;
const QUIET_MS = 3_000;
/** The leaks' first index: past the live allocations' addresses (leakIp: 250 a /24). */
const LEAKS_FROM = 250;

/** The probe (probe-worker.ts) on its own thread until stopped; resolves each call's ms. */
function startProbe(socket: string, allocId: string) {
  const worker = new Worker(new URL('./probe-worker.js', import.meta.url), {
    workerData: { socket, allocId, everyMs: PROBE_EVERY_MS },
  });
  const samples = new Promise<number[]>((resolve, reject) => {
    worker.once('message', (m: number[]) => {
      resolve(m);
    });
    worker.once('error', reject);
  });
  return {
    async stop(): Promise<number[]> {
      worker.postMessage('stop');
      try {
        return await samples;
      } finally {
        await worker.terminate();
      }
    },
  };
}

/** ReapLeaks through the agent's stream; resolves how many it reaped and failed. */
function reapThroughAgent(agent: BenchAgent): Promise<{ reaped: number; failed: number }> {
  return new Promise((resolve, reject) => {
    const stream = agent.operator.ReapLeaks({}, { deadline: Date.now() + 600_000 });
    let summary: { reaped: number; failed: number } | undefined;
    stream.on('data', (m: { summary?: { reaped: unknown[]; failed: unknown[] } | null }) => {
      if (m.summary !== null && m.summary !== undefined)
        summary = { reaped: m.summary.reaped.length, failed: m.summary.failed.length };
    });
    stream.on('error', reject);
    stream.on('end', () => {
      if (summary === undefined) reject(new Error('ReapLeaks ended without a summary'));
      else resolve(summary);
    });
  });
}

/** `leaks` leaks made, then reaped through the agent with the probe on; the node back at `baseline`. */
async function probedReap(
  o: { agent: BenchAgent; node: TestNetns; socket: string; allocId: string; leaks: number },
  baseline: string,
): Promise<{ ms: number; probeMs: number[] }> {
  const ipt = createIptables({ netns: o.node.path, timeoutMs: 600_000 });
  await ipt.restore(addLeaks(createBatch(), 'full', o.leaks, LEAKS_FROM));
  const probe = startProbe(o.socket, o.allocId);
  const t0 = performance.now();
  let done: { reaped: number; failed: number };
  try {
    done = await reapThroughAgent(o.agent);
  } catch (error) {
    await probe.stop();
    throw error;
  }
  const ms = performance.now() - t0;
  const probeMs = await probe.stop();
  if (done.reaped !== o.leaks || done.failed > 0)
    throw new BenchError(
      `the agent reaped ${done.reaped} of ${o.leaks} leaked allocations (${done.failed} failed)`,
      { code: 'not-exact' },
    );
  if ((await o.node.ruleset()) !== baseline)
    throw new BenchError(
      `the agent's reap of ${o.leaks} leaks did not bring the node's ruleset back to its baseline`,
      { code: 'not-exact' },
    );
  return { ms, probeMs };
}

async function round(
  ctx: SuiteContext,
  plan: SuitePlan['reapAgent'],
  k: number,
): Promise<ReapAgentRound> {
  return withNode(plan.live, async (lab, node, ctrs, dir) => {
    const agentDir = join(dir, 'agent');
    const agent = await startBenchAgent({
      node,
      dir: agentDir,
      netnsPrefix: `${lab.prefix}-R`,
      pluginDir: ctx.pluginDir,
    });
    try {
      const ops = agentOps(agent);
      const allocs = ctrs.map((ns, i) => ({
        id: idOf('4ea90000', k * 256 + i),
        netns: ns.path,
        port: 30000 + i,
      }));
      for (const a of allocs) {
        const r = await ops.setup(a);
        if (!r.ok) throw new Error(`reap-agent: setup of ${JSON.stringify(a.id)} failed: ${r.error}`);
      } // prettier-ignore
      const baseline = await node.ruleset();
      // The agent's one warm-up of the reap path after its start (its compose.ts): done before
      // the quiet probe, and its cost kept for the report.
      const warmed = await agent.line('warmed the reap path', 120_000);
      const warmUpMs = Number(warmed.fields.durationMs);
      const socket = join(agentDir, 'run', 'agent.sock');
      const allocId = allocs[0]?.id ?? idOf('4ea90000', 0);
      const quiet = startProbe(socket, allocId);
      await sleep(QUIET_MS);
      const quietMs = await quiet.stop();
      const at = { agent, node, socket, allocId, leaks: plan.leaks };
      const first = await probedReap(at, baseline);
      const warm = await probedReap(at, baseline);
      log(
        `reap-agent round ${k + 1}/${plan.rounds}: warm-up at start ${warmUpMs} ms; first reap ${first.ms.toFixed(0)} ms, warm ${warm.ms.toFixed(0)} ms; worst probe ${Math.max(...quietMs).toFixed(0)} ms quiet, ${Math.max(...first.probeMs, ...warm.probeMs).toFixed(0)} ms during`,
      );
      for (const a of allocs) {
        const r = await ops.teardown(a);
        if (!r.ok) log(`reap-agent: teardown failed: ${r.error}`);
      }
      return {
        warmUpMs,
        firstMs: first.ms,
        warmMs: warm.ms,
        quietMs,
        firstProbeMs: first.probeMs,
        warmProbeMs: warm.probeMs,
      };
    } finally {
      await agent.stop();
    }
  });
}

/** `rounds` rounds, each a fresh node and agent: its first reap, its warm one, the probe's latencies. */
export async function reapAgent(
  ctx: SuiteContext,
  plan: SuitePlan['reapAgent'],
): Promise<ReapAgentRun> {
  const rounds: ReapAgentRound[] = [];
  for (let k = 0; k < plan.rounds; k++) rounds.push(await round(ctx, plan, k));
  return { leaks: plan.leaks, live: plan.live, probeEveryMs: PROBE_EVERY_MS, rounds };
}
