#!/usr/bin/env node
// What a runtime pays for allocnet-cni: go-cni (tools/gocni-driver, Nomad's calls, one long-lived
// process as in Nomad's client) calling allocnet-cni → the agent's CNI server → the delegate
// chain, against go-cni calling the same chain's plugins directly. One node namespace, one agent;
// both contenders run allocnet's default network (the same conflist the agent embeds, the same
// host-local store), one port mapping each (tcp and udp, as Nomad maps a port), a namespace made
// beforehand for every allocation. Contenders interleave operation by operation (direct, agent,
// agent, direct, …) so that the machine's drift lands on both; setups first, then teardowns.
// Each ratio comes with a bootstrap 95% interval; a goal is met only when the whole interval is
// on its side. The plugin's own cost is, per call through the agent, go-cni's time minus the
// agent's handling of that call (its `CNI call` debug line).
//
//   node tools/bench/dist/cni-plugin.js [--n 30] [--reps 2] [--out DIR]
// Needs root, the built agent, plugin and driver (tools/setup.sh). Uses nothing outside the repo.
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { tempDir } from '@allocnet/cni/testing';
import { createNetnsLab, requireNetworkTestHost } from '@allocnet/testns';
import type { TestNetns } from '@allocnet/testns';
import { startBenchAgent } from './agent-process.js';
import { writeDefaultConflist } from './contenders.js';
import { environment } from './env.js';
import { GOCNI_DRIVER, removeLibcniCache, startGoCni } from './gocni.js';
import type { GoCni } from './gocni.js';
import { roundOrder } from './interleave.js';
import { REPO, RESULTS } from './paths.js';
import { bootstrapMedian, bootstrapRatio, median } from './stats.js';
import type { RatioInterval } from './stats.js';

const { values } = parseArgs({
  options: {
    n: { type: 'string', default: '30' },
    reps: { type: 'string', default: '2' },
    out: { type: 'string', default: RESULTS },
    'plugin-dir': { type: 'string', default: '/usr/lib/cni' },
  },
});
const N = Number(values.n);
const REPS = Number(values.reps);
const PLUGIN_DIR = values['plugin-dir'];
const PLUGIN = join(REPO, 'packages', 'cni-plugin', 'dist', 'allocnet-cni');
const GOALS = { ratio: 1.05, pluginMs: 3 };

const log = (line: string) => process.stderr.write(`[cni-plugin bench] ${line}\n`);

interface Samples {
  direct: number[];
  agent: number[];
  /** Per agent call: [containerId, command, go-cni ms]. */
  calls: [string, string, number][];
}

function fmt(r: RatioInterval): string {
  return `${r.ratio.toFixed(3)} [${r.lo.toFixed(3)}, ${r.hi.toFixed(3)}]`;
}

await requireNetworkTestHost([
  'ip',
  'iptables',
  'nsenter',
  `${PLUGIN_DIR}/bridge`,
  GOCNI_DRIVER,
  PLUGIN,
]);
const hadLibcniDirs = existsSync('/var/lib/cni');
const lab = createNetnsLab();
const tmp = await tempDir('allocnet-bench-cni-');
const prefix = `${lab.prefix}-cb${process.pid.toString(36)}`;
const drivers: GoCni[] = [];
const ids = new Set<string>();
let stopAgent: (() => Promise<unknown>) | undefined;
try {
  const node = await lab.node();
  const agent = await startBenchAgent({
    node,
    dir: tmp.path,
    netnsPrefix: `${prefix}-a-`,
    pluginDir: PLUGIN_DIR,
    debug: true,
  });
  stopAgent = () => agent.stop();
  // The direct conflist is the agent's embedded network, with the agent's host-local store.
  const direct = await writeDefaultConflist(tmp.path);
  const bin = join(tmp.path, 'bin');
  await mkdir(bin, { recursive: true });
  await copyFile(PLUGIN, join(bin, 'allocnet-cni'));
  const viaAgent = join(tmp.path, 'allocnet.conflist');
  await writeFile(
    viaAgent,
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'allocnet',
      plugins: [
        {
          type: 'allocnet-cni',
          socket: join(tmp.path, 'run', 'cni.sock'),
          queueDir: join(tmp.path, 'data', 'cni-queue'),
          capabilities: { portMappings: true },
        },
      ],
    }),
  );
  const directDriver = startGoCni({ node: node.path, conflist: direct, pluginDirs: PLUGIN_DIR });
  const agentDriver = startGoCni({ node: node.path, conflist: viaAgent, pluginDirs: bin });
  drivers.push(directDriver, agentDriver);
  const containers: TestNetns[] = [];
  for (let i = 0; i < 2 * N; i++) containers.push(await lab.container(`c${i}`));
  const netnsOf = (who: 'direct' | 'agent', i: number) =>
    (containers[who === 'direct' ? i : N + i] as TestNetns).path;
  const idOf = (who: 'direct' | 'agent', rep: number, i: number) => {
    const id = `${prefix}-${who[0] ?? 'x'}${rep}-${i}`;
    ids.add(id);
    return id;
  };
  const portOf = (who: 'direct' | 'agent', i: number) => (who === 'direct' ? 20000 : 30000) + i;
  const drive = { direct: directDriver, agent: agentDriver };

  // Warm both paths (bridge, shared chains, page cache), untimed.
  for (const who of ['direct', 'agent'] as const)
    for (let i = 0; i < 3; i++) {
      const id = idOf(who, 9, i);
      await drive[who].call('setup', id, netnsOf(who, i), [[portOf(who, i), 8080]]);
      await drive[who].call('remove', id, netnsOf(who, i), [[portOf(who, i), 8080]]);
    }

  const setup: Samples = { direct: [], agent: [], calls: [] };
  const teardown: Samples = { direct: [], agent: [], calls: [] };
  for (let rep = 0; rep < REPS; rep++) {
    log(`rep ${rep + 1}/${REPS}: ${N} setups each, interleaved, then ${N} teardowns each`);
    for (const [op, samples] of [
      ['setup', setup],
      ['remove', teardown],
    ] as const) {
      for (let i = 0; i < N; i++) {
        for (const who of roundOrder(['direct', 'agent'] as const, i + rep)) {
          const id = idOf(who, rep, i);
          const ms = await drive[who].call(op, id, netnsOf(who, i), [[portOf(who, i), 8080]]);
          samples[who].push(ms);
          if (who === 'agent') samples.calls.push([id, op === 'setup' ? 'ADD' : 'DEL', ms]);
        }
      }
    }
  }

  // The agent's handling of each call it answered, to 0.01 ms.
  const handled = new Map<string, number>();
  for (const { fields } of agent.lines())
    if (fields.message === 'CNI call')
      handled.set(`${String(fields.containerId)} ${String(fields.command)}`, Number(fields.ms));
  const pluginCost = (s: Samples) =>
    s.calls.map(([id, command, ms]) => {
      const inAgent = handled.get(`${id} ${command}`);
      if (inAgent === undefined) throw new Error(`no 'CNI call' log line for ${command} ${id}`);
      return ms - inAgent;
    });
  const costs = [...pluginCost(setup), ...pluginCost(teardown)];
  const costInterval = bootstrapMedian(costs, { seed: 7 });

  const result = {
    plan: { n: N, reps: REPS, interleaved: true, portMappings: 'one port, tcp and udp' },
    environment: await environment(),
    setup: {
      directP50Ms: median(setup.direct),
      agentP50Ms: median(setup.agent),
      ratio: bootstrapRatio(setup.agent, setup.direct, { paired: true }),
      samples: setup,
    },
    teardown: {
      directP50Ms: median(teardown.direct),
      agentP50Ms: median(teardown.agent),
      ratio: bootstrapRatio(teardown.agent, teardown.direct, { paired: true, seed: 2 }),
      samples: teardown,
    },
    pluginCost: { ...costInterval, samples: costs },
  };
  await mkdir(values.out, { recursive: true });
  const file = join(
    values.out,
    `cni-plugin-${new Date().toISOString().replace(/[:.]/g, '-')}.json`,
  );
  await writeFile(file, `${JSON.stringify(result, null, 2)}\n`);
  const met = (hi: number, goal: number) => (hi <= goal ? 'met' : 'not met');
  process.stdout.write(
    [
      `| figure (p50, ${N * REPS} each) | go-cni direct | go-cni → allocnet-cni → agent | ratio [95% interval] | goal |`,
      '| --- | --- | --- | --- | --- |',
      `| setup | ${result.setup.directP50Ms.toFixed(1)} ms | ${result.setup.agentP50Ms.toFixed(1)} ms | ${fmt(result.setup.ratio)} | ≤ ${GOALS.ratio}: ${met(result.setup.ratio.hi, GOALS.ratio)} |`,
      `| teardown | ${result.teardown.directP50Ms.toFixed(1)} ms | ${result.teardown.agentP50Ms.toFixed(1)} ms | ${fmt(result.teardown.ratio)} | ≤ ${GOALS.ratio}: ${met(result.teardown.ratio.hi, GOALS.ratio)} |`,
      `| allocnet-cni's own cost (exec to answer, minus the agent's handling) | | ${costInterval.median.toFixed(2)} ms [${costInterval.lo.toFixed(2)}, ${costInterval.hi.toFixed(2)}] | | ≤ ${GOALS.pluginMs} ms: ${met(costInterval.hi, GOALS.pluginMs)} |`,
      '',
      `raw samples: ${file}`,
      '',
    ].join('\n'),
  );
} finally {
  for (const d of drivers) await d.stop().catch(() => undefined);
  await stopAgent?.().catch(() => undefined);
  // go-cni cannot move libcni's cache: remove what these ids left in the host's.
  await removeLibcniCache(ids, hadLibcniDirs);
  await lab.dispose();
  await tmp.remove();
}
