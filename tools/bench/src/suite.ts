#!/usr/bin/env node
// The benchmark suite: allocnet against go-cni (tools/gocni-driver: Nomad's calls over Debian's
// go-cni) and against the plugins' own floor, in one run, with nothing from outside the
// repository. The contenders are contenders.ts's; report.ts's METHOD says how each scenario is
// measured:
//   sequential : the four contenders on one node, interleaved operation by operation (the order
//                of each round from interleave.ts), N setups then N teardowns, R reps
//   concurrent : N setups W at a time, each contender on a fresh node, rounds interleaved
//   scale      : the agent up to M live allocations one at a time, the floor and the library
//                empty and full on the same node, then a restart: first answer, restore finished,
//                RSS before and after
//   reap       : leaked allocations in reap.ts's two shapes at 1,000 and 5,000, reaped by
//                allocnet; Nomad's per-allocation forceCleanup on the netns-deleted shape
//   reap-agent : 5,000 full-shape leaks reaped through a running agent with 20 live allocations,
//                its first ReapLeaks and a warm one, while a client asks it every 20 ms
//                (suite-reap-agent.ts); fresh agents, 16 rounds
//   cli        : `node -e 0`, `allocnet version`, `allocnet --help`, fresh processes interleaved
//   reap-cli   : `allocnet leaks --reap --local` of 1,000 full-shape leaks as a fresh process,
//                beside the save read and `node -e 0` on the same node state (suite-cli.ts)
// Writes every raw sample and the environment as JSON, a markdown summary with the goals, and
// PNG charts (report.ts); `--docs` also rewrites docs/performance.md. The flags and the plan are
// suite-plan.ts's, what the scenarios stand on suite-node.ts's, the scenarios suite-scenarios.ts's
// and suite-scale.ts's; this file runs them and writes the results.
//
//   node tools/bench/dist/suite.js [--quick] [--out DIR] [--docs] [--only a,b]
//        [--reap-allocs 1000,5000] [--plugin-dir DIR]
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { requireNetworkTestHost } from '@allocnet/testns';
import { environment } from './env.js';
import { GOCNI_DRIVER, removeLibcniCache } from './gocni.js';
import { AGENT_MAIN, CLI_MAIN, DIST, REPO } from './paths.js';
import { writeReport } from './report.js';
import { log } from './suite-node.js';
import type { SuiteContext } from './suite-node.js';
import { cli, reapCli } from './suite-cli.js';
import { parseSuiteArgs } from './suite-plan.js';
import type { Scenario } from './suite-plan.js';
import { reapAgent } from './suite-reap-agent.js';
import { concurrent, reap, sequential } from './suite-scenarios.js';
import { scale } from './suite-scale.js';
import type { SuiteResults } from './summary.js';

const flags = parseSuiteArgs(process.argv.slice(2));
const { plan, only } = flags;
const ctx: SuiteContext = { pluginDir: flags.pluginDir, peerIds: new Set<string>() };
const hadLibcniDirs = existsSync('/var/lib/cni');

await requireNetworkTestHost([
  'ip', 'iptables', 'iptables-restore', 'iptables-save', 'ip6tables-save', 'nsenter',
  `${ctx.pluginDir}/bridge`, GOCNI_DRIVER, AGENT_MAIN, CLI_MAIN, join(DIST, 'suite-inner.js'),
]); // prettier-ignore
const started = Date.now();
// The CLI's code cache (packages/cli's code-cache.ts) in a directory of the run's own, empty at
// its start as after an install: no run reads another's, nor the host's /var/cache/allocnet. Each
// command's first run writes it (the CLI scenarios time that run apart, suite-cli.ts).
const cliCache = mkdtempSync(join(tmpdir(), 'allocnet-bench-cli-cache-'));
process.env.ALLOCNET_CLI_CACHE_DIR = cliCache;
/** Each scenario's seconds, in the order run. */
const scenarioS: Record<string, number> = {};
async function run<T>(name: Scenario, fn: () => Promise<T>): Promise<T | undefined> {
  if (!only.has(name)) return undefined;
  const t0 = Date.now();
  try {
    return await fn();
  } finally {
    scenarioS[name] = (Date.now() - t0) / 1000;
    log(`${name}: ${scenarioS[name].toFixed(0)} s`);
  }
}
let results: SuiteResults;
try {
  results = {
    command: `node tools/bench/dist/suite.js${process.argv.slice(2).length > 0 ? ` ${process.argv.slice(2).join(' ')}` : ''}`,
    environment: await environment(),
    plan,
    sequential: await run('sequential', () => sequential(ctx, plan.sequential)),
    concurrent: await run('concurrent', () => concurrent(ctx, plan.concurrent)),
    scale: await run('scale', () => scale(ctx, plan.scale)),
    reap: await run('reap', () => reap(plan.reap)),
    reapAgent: await run('reap-agent', () => reapAgent(ctx, plan.reapAgent)),
    cli: await run('cli', () => cli(plan.cli)),
    reapCli: await run('reap-cli', () => reapCli(plan.reapCli)),
    scenarioS,
    durationS: 0,
  };
} finally {
  await removeLibcniCache(ctx.peerIds, hadLibcniDirs);
  rmSync(cliCache, { recursive: true, force: true });
}
const final: SuiteResults = { ...results, durationS: (Date.now() - started) / 1000 };
mkdirSync(flags.out, { recursive: true });
writeFileSync(join(flags.out, 'suite.json'), `${JSON.stringify(final, null, 2)}\n`);
const summary = await writeReport(final, {
  out: flags.out,
  docs: flags.docs ? join(REPO, 'docs') : undefined,
});
process.stdout.write(summary);
log(`done in ${final.durationS.toFixed(0)} s; results in ${flags.out}`);
