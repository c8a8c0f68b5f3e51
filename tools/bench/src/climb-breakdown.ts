#!/usr/bin/env node
// Where a setup's and a teardown's time goes as the node fills up: the agent, logging at debug
// (each plugin's and each iptables command's time), taken to N live allocations one at a time
// on a node namespace of its own, then all torn down one at a time. Prints, for the first and the
// last window of setups and of teardowns, the median of each part: the call as the client saw
// it, each plugin's verb, each iptables command, and the configurator's whole setup. A size, not
// a comparison (nothing runs beside it): what docs/performance.md's breakdowns were read from.
//
//   node tools/bench/dist/climb-breakdown.js [--live 1000] [--window 50] [--plugin-dir /usr/lib/cni]
//     [--dump FILE]  (every sampled call's log lines, as JSON: to read one call's timeline)
//     [--restart]  (the agent started again over the N allocations before the teardowns, once it
//     logged its restore done, as the suite's scale scenario does)
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { requireNetworkTestHost } from '@allocnet/testns';
import type { TestNetns } from '@allocnet/testns';
import { startBenchAgent } from './agent-process.js';
import type { BenchAgent } from './agent-process.js';
import { agentOps } from './contenders.js';
import type { OpResult } from './contenders.js';
import { BenchError, intFlag } from './errors.js';
import { median } from './stats.js';
import { idOf, log, withNode } from './suite-node.js';

const { values } = parseArgs({
  options: {
    live: { type: 'string', default: '1000' },
    window: { type: 'string', default: '50' },
    'plugin-dir': { type: 'string', default: '/usr/lib/cni' },
    dump: { type: 'string' },
    restart: { type: 'boolean', default: false },
  },
});
const LIVE = intFlag('--live', values.live, 2, 5_000);
const WINDOW = intFlag('--window', values.window, 1, Math.floor(LIVE / 2));

/** One call: its time as the client saw it, and the agent's log fields written meanwhile. */
interface Sample {
  readonly ms: number;
  readonly lines: readonly Readonly<Record<string, unknown>>[];
}

/** The parts of one call's log: plugin verbs, iptables commands, the configurator's setup. */
function partsOf(sample: Sample): Map<string, number> {
  const parts = new Map<string, number>([['as the client saw it', sample.ms]]);
  const add = (key: string, ms: unknown) => {
    if (typeof ms === 'number') parts.set(key, (parts.get(key) ?? 0) + ms);
  };
  for (const f of sample.lines) {
    if (f.message === 'cni plugin') add(`plugin ${String(f.plugin)} ${String(f.verb)}`, f.ms);
    else if (f.message === 'iptables command') add(String(f.command), f.ms);
    else if (f.message === 'allocation network set up') add('the configurator’s setup', f.ms);
  }
  return parts;
}

/** Each part's median over `samples` (a part missing from some samples: over those it is in). */
function table(title: string, samples: readonly Sample[]): string {
  const all = new Map<string, number[]>();
  for (const s of samples)
    for (const [k, v] of partsOf(s)) all.set(k, [...(all.get(k) ?? []), v]);
  const rows = [...all].map(([k, v]) => `  ${median(v).toFixed(1).padStart(8)} ms  ${k} (n=${v.length})`);
  return [title, ...rows].join('\n');
} // prettier-ignore

/** Runs `op` and keeps what the agent logged during it, when `keep`. */
async function sampled(agent: BenchAgent, op: () => Promise<OpResult>, keep: boolean) {
  const from = agent.lines().length;
  const r = await op();
  if (!r.ok) throw new BenchError(`climb: a call failed: ${r.error}`, { code: 'driver-ended' });
  return keep
    ? {
        ms: r.ms,
        lines: agent
          .lines()
          .slice(from)
          .map((l) => l.fields),
      }
    : undefined;
}

await requireNetworkTestHost(['ip', 'iptables', 'nsenter']);
await withNode(LIVE, async (lab, node, ctrs, dir) => {
  const options = {
    node,
    dir: join(dir, 'agent'),
    ipamDir: join(dir, 'ipam'),
    netnsPrefix: `${lab.prefix}-C`,
    pluginDir: values['plugin-dir'],
    debug: true,
  };
  let agent = await startBenchAgent(options);
  try {
    let ops = agentOps(agent);
    const alloc = (i: number) => ({ id: idOf('c11b0000', i), netns: (ctrs[i] as TestNetns).path, port: 20000 + i }); // prettier-ignore
    const edge = (i: number) => i < WINDOW || i >= LIVE - WINDOW;
    const setups: (Sample | undefined)[] = [];
    for (let i = 0; i < LIVE; i++) {
      setups.push(await sampled(agent, () => ops.setup(alloc(i)), edge(i)));
      if ((i + 1) % 100 === 0) log(`climb: ${i + 1}/${LIVE} live`);
    }
    if (values.restart) {
      await agent.stop();
      agent = await startBenchAgent(options);
      await agent.line('restored allocations from the last run', 600_000);
      ops = agentOps(agent);
      log(`climb: the agent started again over ${LIVE} allocations`);
    }
    const teardowns: (Sample | undefined)[] = [];
    for (let i = 0; i < LIVE; i++)
      teardowns.push(await sampled(agent, () => ops.teardown(alloc(i)), edge(i)));
    const pick = (xs: (Sample | undefined)[], low: boolean) =>
      xs.filter((s, i): s is Sample => s !== undefined && (low ? i < WINDOW : i >= LIVE - WINDOW));
    const last = `${LIVE - WINDOW + 1}–${LIVE}`;
    if (values.dump !== undefined)
      await writeFile(values.dump, JSON.stringify({ setups, teardowns }, null, 1));
    process.stdout.write(
      [
        table(`setups 1–${WINDOW} live (p50)`, pick(setups, true)),
        table(`setups ${last} live (p50)`, pick(setups, false)),
        table(`teardowns with ${last} live (p50)`, pick(teardowns, true)),
        table(`teardowns with 1–${WINDOW} live (p50)`, pick(teardowns, false)),
      ].join('\n\n') + '\n',
    );
  } finally {
    await agent.stop();
  }
});
