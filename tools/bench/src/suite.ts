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
//                (suite-reap-agent.ts); fresh agents, 5 rounds
// Writes every raw sample and the environment as JSON, a markdown summary with the goals, and
// PNG charts (report.ts); `--docs` also rewrites docs/performance.md. The flags and the plan are
// suite-plan.ts's, what the scenarios stand on suite-node.ts's, the scenarios suite-scenarios.ts's
// and suite-scale.ts's; this file runs them and writes the results.
//
//   node tools/bench/dist/suite.js [--quick] [--out DIR] [--docs] [--only a,b]
//        [--reap-allocs 1000,5000] [--plugin-dir DIR]
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { requireNetworkTestHost } from '@allocnet/testns';
import { environment } from './env.js';
import { GOCNI_DRIVER, removeLibcniCache } from './gocni.js';
import { AGENT_MAIN, DIST, REPO } from './paths.js';
import { writeReport } from './report.js';
import { log } from './suite-node.js';
import type { SuiteContext } from './suite-node.js';
import { parseSuiteArgs } from './suite-plan.js';
import { reapAgent } from './suite-reap-agent.js';
import { concurrent, reap, sequential } from './suite-scenarios.js';
import { scale } from './suite-scale.js';
import type { SuiteResults } from './summary.js';

const flags = parseSuiteArgs(process.argv.slice(2));
const { plan, only } = flags;
const ctx: SuiteContext = { pluginDir: flags.pluginDir, peerIds: new Set<string>() };
const hadLibcniDirs = existsSync('/var/lib/cni');

await requireNetworkTestHost([
  'ip', 'iptables', 'iptables-restore', 'nsenter', `${ctx.pluginDir}/bridge`, GOCNI_DRIVER, AGENT_MAIN,
  join(DIST, 'suite-inner.js'),
]); // prettier-ignore
const started = Date.now();
let results: SuiteResults;
try {
  results = {
    command: `node tools/bench/dist/suite.js${process.argv.slice(2).length > 0 ? ` ${process.argv.slice(2).join(' ')}` : ''}`,
    environment: await environment(),
    plan,
    sequential: only.has('sequential') ? await sequential(ctx, plan.sequential) : undefined,
    concurrent: only.has('concurrent') ? await concurrent(ctx, plan.concurrent) : undefined,
    scale: only.has('scale') ? await scale(ctx, plan.scale) : undefined,
    reap: only.has('reap') ? await reap(plan.reap) : undefined,
    reapAgent: only.has('reap-agent') ? await reapAgent(ctx, plan.reapAgent) : undefined,
    durationS: 0,
  };
} finally {
  await removeLibcniCache(ctx.peerIds, hadLibcniDirs);
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
