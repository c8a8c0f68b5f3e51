// The suite's scale scenario: the agent up to M live allocations one at a time (its first setups
// each beside one of go-cni's on a node of go-cni's own), `allocnet alloc list` against it with M,
// the floor and the library empty and full on the same node, fresh agents holding nothing timed
// to their first answer, then a restart (first answer, restore finished, RSS before and after),
// then every allocation torn down one at a time.
import { mkdir } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
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
import { agentOps, startInner, writeDefaultConflist } from './contenders.js';
import type { OpResult } from './contenders.js';
import { BenchError } from './errors.js';
import { NODE_BARE, interleavedProcesses, timedProcess } from './fresh-process.js';
import type { TimedRun } from './fresh-process.js';
import { startGoCni } from './gocni.js';
import { roundOrder } from './interleave.js';
import { CLI_MAIN } from './paths.js';
import { allocation, idOf, log, withNode } from './suite-node.js';
import type { SuiteContext } from './suite-node.js';
import type { SuitePlan } from './suite-plan.js';
import type { InnerSamples, ProcessSamples, ScaleRun } from './summary.js';

/**
 * The plugins' own cost (`floor`) or allocnet's CHECK's (`lib`: what a restore runs for each
 * allocation) on `node`, over the namespaces `ctrs[from…from+count]`: each set up, CHECKed
 * `checkRounds` times over, torn down.
 */
async function innerSamples(
  ctx: SuiteContext,
  at: {
    node: TestNetns;
    dir: string;
    ctrs: readonly TestNetns[];
    count: number;
    checkRounds: number;
  },
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
  const checks = Array.from({ length: at.checkRounds }, () => ['check', out.checkMs] as const);
  try {
    for (const [op, into] of [
      ['setup', out.setupMs] as const,
      ...checks,
      ['teardown', out.teardownMs] as const,
    ])
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

/** What the climb stands on: the agent's node and options, go-cni's node, the namespaces. */
interface ClimbAt {
  readonly ctx: SuiteContext;
  readonly agent: BenchAgent;
  readonly alloc: (i: number) => { id: string; netns: string; port: number };
  readonly peerNode: TestNetns;
  readonly peerCtrs: readonly TestNetns[];
  readonly dir: string;
}

/**
 * The agent up to M live allocations one at a time; its first `peerLive` setups each beside
 * go-cni's setup of the same rank on go-cni's own node (the two in an order that rotates), so
 * that go-cni's own growth is measured on the same machine at the same time. go-cni's
 * allocations go with its node (and the libcni cache with the run's end).
 */
async function climb(at: ClimbAt, M: number, peerLive: number) {
  const ops = agentOps(at.agent);
  const peerDir = join(at.dir, 'peer');
  await mkdir(peerDir, { recursive: true });
  const gocni = startGoCni({
    node: at.peerNode.path,
    conflist: await writeDefaultConflist(peerDir),
    pluginDirs: at.ctx.pluginDir,
  });
  const setupMs: number[] = [];
  const peerMs: number[] = [];
  try {
    for (let i = 0; i < M; i++) {
      for (const who of i < peerLive ? roundOrder(['agent', 'peer'] as const, i) : (['agent'] as const))
        if (who === 'agent') setupMs.push(await timed(ops.setup(at.alloc(i)), `setup ${i + 1} of ${M}`));
        else {
          const a = allocation(at.ctx, 'peer', 'c0c05ca1', i, at.peerCtrs[i] as TestNetns);
          peerMs.push(await gocni.call('setup', a.id, a.netns, [[a.port, 8080]]));
        } // prettier-ignore
      if ((i + 1) % 100 === 0 || i + 1 === peerLive) log(`scale: ${i + 1}/${M} live`);
    }
  } finally {
    await gocni.stop();
  }
  return { setupMs, peer: { live: Math.min(peerLive, M), setupMs: peerMs } };
}

/**
 * `allocnet alloc list` against the agent holding M, with `node -e 0`, in turn; each lists M.
 * One untimed run first: the command's first run writes its code into the CLI's code cache
 * (suite-cli.ts times such a run apart for `version`, `--help` and the cold reap).
 */
async function allocList(
  node: TestNetns,
  socket: string,
  M: number,
  rounds: number,
): Promise<ProcessSamples<'node' | 'list'>> {
  const list = [process.execPath, CLI_MAIN, 'alloc', 'list', '--address', socket];
  const check = (k: 'node' | 'list', run: TimedRun) => {
    const listed = run.stdout.split('\n').filter((l) => l.includes('5ca1e000-')).length;
    if (k === 'list' && listed !== M)
      throw new BenchError(`allocnet alloc list listed ${listed} of ${M} allocations`, {
        code: 'not-exact',
      });
  };
  check('list', await timedProcess(node.path, list));
  return interleavedProcesses(node.path, { node: NODE_BARE, list }, rounds, check);
}

/** Fresh agents holding nothing on an empty node: each one's spawn to its first answer. */
async function servingEmpty(options: BenchAgentOptions, count: number): Promise<number[]> {
  const out: number[] = [];
  for (let k = 0; k < count; k++) {
    const spawned = await spawnBenchAgent({ ...options, dir: join(options.dir, `empty${k}`) });
    try {
      const first = await firstAnswer(spawned, 120_000);
      out.push(first.at - spawned.spawnedAt);
      await spawned.ready(120_000);
    } finally {
      await spawned.stop();
    }
  }
  return out;
}

/**
 * The agent's usage once it handed back a burst's memory: at its next `handed memory back after
 * a burst of operations` line (the agent waits 8 s without an operation or a call, memory.ts),
 * or after 30 s without one (the burst grew it too little to be worth one).
 */
async function idleUsage(
  agent: BenchAgent,
): Promise<{ rssMiB: number; cpuSeconds: number; handedBack: boolean }> {
  const message = 'handed memory back after a burst of operations';
  const seen = agent.lines().filter((l) => l.fields.message === message).length;
  const deadline = performance.now() + 30_000;
  while (agent.lines().filter((l) => l.fields.message === message).length === seen) {
    if (performance.now() > deadline) {
      log(`scale: the agent handed back no memory within 30 s of the last setup`);
      return { ...processUsage(agent.pid), handedBack: false };
    }
    await sleep(200);
  }
  return { ...processUsage(agent.pid), handedBack: true };
}

/** The agent up to M live allocations one at a time, a restart, then all torn down one at a time. */
export async function scale(ctx: SuiteContext, plan: SuitePlan['scale']): Promise<ScaleRun> {
  const { live: M, window, floorAllocs: FLOOR, checkRounds, peerLive } = plan;
  const PEER = Math.min(peerLive, M);
  return withNode(M + 2 * FLOOR + PEER, async (lab, node, all, dir) => {
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
    const at = { node, dir, ctrs: all, count: FLOOR, checkRounds };
    const floorEmpty = await innerSamples(ctx, at, 'floor', M);
    const libEmpty = await innerSamples(ctx, at, 'lib', M);
    let agent: BenchAgent = await startBenchAgent(options);
    try {
      const alloc = (i: number) => ({
        id: idOf('5ca1e000', i),
        netns: (ctrs[i] as TestNetns).path,
        port: 20000 + i,
      });
      const before = processUsage(agent.pid);
      const peerNode = await lab.node('peer');
      const peerCtrs = all.slice(M + 2 * FLOOR);
      const climbed = await climb({ ctx, agent, alloc, peerNode, peerCtrs, dir }, M, PEER);
      const after = processUsage(agent.pid);
      const idle = await idleUsage(agent);
      log(`scale: allocnet alloc list with ${M} live allocations, ${plan.listRounds} rounds`);
      const socket = join(options.dir, 'run', 'agent.sock');
      const listed = await allocList(node, socket, M, plan.listRounds);
      log(`scale: the floor and the library with ${M} live allocations`);
      const floorFull = await innerSamples(ctx, at, 'floor', M + FLOOR);
      const libFull = await innerSamples(ctx, at, 'lib', M + FLOOR);
      log(`scale: ${plan.servingEmpty} fresh agents holding nothing, on an empty node`);
      const empty = await servingEmpty(
        { ...options, node: await lab.node('empty'), dir: join(dir, 'empty'), ipamDir: join(dir, 'empty', 'ipam'), netnsPrefix: `${lab.prefix}-E` },
        plan.servingEmpty,
      ); // prettier-ignore
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
        setupMs: climbed.setupMs,
        teardownMs,
        rssMiB: idle.rssMiB,
        handedBackIdle: idle.handedBack,
        rssAtLastSetupMiB: after.rssMiB,
        rssAfterRestoreMiB: afterRestore.rssMiB,
        cpuSecondsPerSetup: (after.cpuSeconds - before.cpuSeconds) / M,
        restart: restarted.restart,
        floor: { empty: floorEmpty, full: floorFull },
        lib: { empty: libEmpty, full: libFull },
        peer: climbed.peer,
        servingEmptyMs: empty,
        allocList: listed,
      };
    } finally {
      await agent.stop();
    }
  });
}
