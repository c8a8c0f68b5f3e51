// The report's tables of the scale, reap and CLI scenarios, each figure computed from the raw
// samples by summary.ts (report.ts puts them under the goals).
import { f1, f2, fr } from './format.js';
import { LINES_PER_LEAK } from './reap.js';
import { bootstrapMedian, median } from './stats.js';
import {
  coldReapRatio,
  growth,
  p50p95,
  processRatio,
  reapMedian,
  scaleWindowList,
  setupWindow,
  teardownWindow,
  warmReapRatio,
} from './summary.js';
import type { CliRun, LiveWindow, ReapCliRun, ReapRun, ScaleRun } from './summary.js';

const span = (w: LiveWindow) => `${w.from}–${w.to}`;
const fits = (w: LiveWindow, live: number) => w.to <= live;

/** Setup and teardown p50 by window of live allocations, go-cni’s climb beside, and their growth. */
function windowTables(s: ScaleRun): string[] {
  const ws = scaleWindowList(s.live, s.window);
  const cells = (f: (w: LiveWindow) => string) => ws.map(f).join(' | ');
  const growths = [
    { high: { from: 231, to: 250 }, low: { from: 1, to: 20 } },
    { high: { from: s.live - s.window + 1, to: s.live }, low: { from: 1, to: s.window } },
  ].filter((g, i, all) => fits(g.high, s.live) && (i === 0 || g.high.from !== all[0]?.high.from || g.low.to !== all[0].low.to)); // prettier-ignore
  const peerGrowth = (g: { high: LiveWindow; low: LiveWindow }) =>
    fits(g.high, s.peer.live)
      ? fr(growth(setupWindow(s.peer.setupMs, g.high), setupWindow(s.peer.setupMs, g.low)))
      : '–';
  return [
    `| p50 ms | ${cells((w) => `${span(w)} live`)} |`,
    `| --- | ${cells(() => '---')} |`,
    `| allocnet setup (through the agent) | ${cells((w) => f1(median(setupWindow(s.setupMs, w))))} |`,
    `| allocnet teardown (through the agent) | ${cells((w) => f1(median(teardownWindow(s.teardownMs, s.live, w))))} |`,
    `| go-cni setup (its own node, up to ${s.peer.live}) | ${cells((w) => (fits(w, s.peer.live) ? f1(median(setupWindow(s.peer.setupMs, w))) : '–'))} |`,
    '',
    '| growth (p50 ÷ p50) [95% interval] | allocnet setup | allocnet teardown | go-cni setup |',
    '| --- | --- | --- | --- |',
    ...growths.map(
      (g) =>
        `| ${span(g.high)} ÷ ${span(g.low)} live | ${fr(growth(setupWindow(s.setupMs, g.high), setupWindow(s.setupMs, g.low)))} | ${fr(growth(teardownWindow(s.teardownMs, s.live, g.high), teardownWindow(s.teardownMs, s.live, g.low)))} | ${peerGrowth(g)} |`,
    ),
    '',
  ]; // prettier-ignore
}

export function scaleSection(s: ScaleRun, image: string | undefined): string[] {
  const p50 = (v: readonly number[]) => median(v);
  const row = (label: string, low: readonly number[], high: readonly number[]) =>
    `| ${label} | ${f1(p50(low))} | ${f1(p50(high))} | ${f2(p50(high) / p50(low))} |`;
  const r = s.restart;
  const checks = s.floor.full.checkMs.length;
  return [
    `### Scale: the agent up to ${s.live} live allocations, one operation at a time`,
    '',
    ...windowTables(s),
    `Setup *i* is the one that made *i* allocations live; teardown the one made with *i* live. go-cni’s setups ran on a node of its own, each beside the agent’s setup of the same rank (the two in turn, in an order that rotates), so that both climbs see the same machine at the same time. A growth’s interval resamples each window (independent samples).`,
    '',
    `| | empty node | ${s.live} live | ratio |`,
    '| --- | --- | --- | --- |',
    row('floor ADD p50 ms', s.floor.empty.setupMs, s.floor.full.setupMs),
    row('floor DEL p50 ms', s.floor.empty.teardownMs, s.floor.full.teardownMs),
    row('floor CHECK p50 ms (loopback, bridge, firewall)', s.floor.empty.checkMs, s.floor.full.checkMs),
    row('allocnet-lib CHECK p50 ms', s.lib.empty.checkMs, s.lib.full.checkMs),
    '',
    `The floor rows are the plugins alone (each exec’d directly, ${s.floor.full.setupMs.length} setups, ${checks} CHECKs and ${s.floor.full.teardownMs.length} teardowns on the same node before the first allocation and with all of them live): how much of the growth is the plugins’ own. The floor’s CHECK runs loopback, bridge (with host-local) and firewall, not portmap (its CHECK fails for an IPv4-only allocation in 1.1.1: docs/cni.md); allocnet’s runs loopback and bridge and checks the firewall’s and portmap’s rules itself. A restore is one CHECK per allocation; Nomad’s way, ${s.live} × the floor’s CHECK p50 with ${s.live} live, is ${f1((s.live * p50(s.floor.full.checkMs)) / 1000)} s.`,
    '',
    `Restart with ${s.live} allocations: first ListAllocNetworks answered ${f1(r.spawnToFirstAnswerMs)} ms after the spawn (listing ${r.listedAtFirstAnswer}; a fresh agent holding nothing: ${f1(p50(s.servingEmptyMs))} ms, median of ${s.servingEmptyMs.length}); \`restore finished\` logged after ${f1(r.spawnToRestoreFinishedMs / 1000)} s (the restore itself ${f1(r.restoreMs / 1000)} s: kept ${r.kept}, recreated ${r.recreated}, failed ${r.failed}); ready file after ${f1(r.spawnToReadyMs / 1000)} s. Agent RSS with ${s.live} live before the restart: ${f1(s.rssAtLastSetupMiB)} MiB at the last setup, ${f1(s.rssMiB)} MiB once idle (${s.handedBackIdle === false ? 'no hand-back within 30 s of the last setup: the climb grew the RSS less than one needs' : 'the climb’s memory handed back'}); ${f1(s.rssAfterRestoreMiB)} MiB after it once restored. Agent CPU per setup: ${(s.cpuSecondsPerSetup * 1000).toFixed(1)} ms (the agent process alone; plugins are separate processes).`,
    '',
    `\`allocnet alloc list\` against the agent holding ${s.live} (a fresh process, listing all ${s.live}): p50 ${f1(p50(s.allocList.list))} ms, \`node -e 0\` ${f1(p50(s.allocList.node))} ms beside it, ${fr(processRatio(s.allocList, 'list', 'node'))} over ${s.allocList.list.length} rounds.`,
    '',
    ...(image === undefined ? [] : [`![p50 against live allocations](${image})`, '']),
  ]; // prettier-ignore
}

export function reapSection(reap: ReapRun): string[] {
  return [
    '### Leak reap',
    '',
    '| reaped by | shape | leaked allocations | iptables-save lines each | reaps | median ms [95% interval] | ms per allocation | save read ms (median) | ÷ save read |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...reap.cases.map((c) => {
      const m = reapMedian(c);
      return `| ${c.method === 'nomad' ? 'Nomad’s forceCleanup' : 'allocnet reapLeaks'} | ${c.shape} | ${c.allocs} | ${LINES_PER_LEAK[c.shape]} | ${c.runsMs.length} | ${f1(m.median)} [${f1(m.lo)}, ${f1(m.hi)}] | ${(m.median / c.allocs).toFixed(3)} | ${f1(median(c.saveMs))} | ${c.method === 'nomad' ? '–' : fr(warmReapRatio(c))} |`;
    }),
    '',
    'Each reap on a fresh node namespace, discovery included for allocnet; every one brought the node’s whole ruleset back to its baseline (the run stops otherwise). The save read is `iptables-save` and `ip6tables-save` at once, fresh processes, on the same node state just before the reap: the read any reap must do; the ratio is paired by reap.',
    '',
  ]; // prettier-ignore
}

export function cliSection(c: CliRun): string[] {
  const line = (label: string, k: 'node' | 'version' | 'help') =>
    `| ${label} | ${f1(p50p95(c.ms[k]).p50)} | ${f1(p50p95(c.ms[k]).p95)} | ${k === 'node' ? '1' : fr(processRatio(c.ms, k, 'node'))} |`;
  return [
    `### The CLI’s start: fresh processes, ${c.rounds} rounds interleaved`,
    '',
    '| command | p50 ms | p95 ms | ÷ `node -e 0` |',
    '| --- | --- | --- | --- |',
    line('`node -e 0`', 'node'),
    line('`allocnet version`', 'version'),
    line('`allocnet --help`', 'help'),
    '',
    'Each command a new process (`node packages/cli/dist/main.cjs …`, what the `allocnet` bin runs), timed from its spawn to its end; `version` asks for an agent on a socket where none listens. The ratios are paired by round.',
    ...(c.firstMs === undefined
      ? []
      : [
          `Each command’s first run came before the rounds: its code was not in the CLI’s code cache yet, and it wrote it (the first run after an install): \`version\` ${f1(c.firstMs.version)} ms, \`--help\` ${f1(c.firstMs.help)} ms (the rounds’ \`node -e 0\`: p50 ${f1(p50p95(c.ms.node).p50)} ms).`,
        ]),
    '',
  ];
}

export function reapCliSection(r: ReapCliRun): string[] {
  const m = (v: readonly number[]) => {
    const b = bootstrapMedian(v, { seed: 53 });
    return `${f1(b.median)} [${f1(b.lo)}, ${f1(b.hi)}]`;
  };
  return [
    `### A cold reap: \`allocnet leaks --reap --local\` of ${r.leaks} full-shape leaks, a fresh process, ${r.cliMs.length} rounds`,
    '',
    '| | median ms [95% interval] |',
    '| --- | --- |',
    `| \`allocnet leaks --reap --local\` | ${m(r.cliMs)} |`,
    `| save read (\`iptables-save\` and \`ip6tables-save\` at once) | ${m(r.saveMs)} |`,
    `| \`node -e 0\` | ${m(r.nodeMs)} |`,
    `| the CLI ÷ (save read + \`node -e 0\`) | ${fr(coldReapRatio(r))} |`,
    '',
    'Each round on a fresh node namespace with the leaks made anew; the save read and `node -e 0` ran on the same node state just before the reap, in turn; the ratio is paired by round. Every reap brought the node’s whole ruleset back to its baseline.',
    ...(r.first === undefined
      ? []
      : [
          '',
          `The command’s first run came before the rounds, the same way: its code was not in the CLI’s code cache yet, and it wrote it (the first run after an install). It took ${f1(r.first.cliMs)} ms against ${f1(r.first.saveMs)} + ${f1(r.first.nodeMs)} ms: ${f2(r.first.cliMs / (r.first.saveMs + r.first.nodeMs))}×, one run.`,
        ]),
    '',
  ];
}
