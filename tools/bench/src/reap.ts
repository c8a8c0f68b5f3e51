// Leaked allocations on a fresh node namespace, and reaping them, for the suite's reap scenario
// and leak-reap.js. The two shapes (full, netns-deleted) are @allocnet/cni-configurator/testing's
// `addLeaks`, in exactly the form the Debian plugins (1.1.1) write their state.
// Two ways to reap:
//   allocnet : one CniConfigurator.reapLeaks call, discovery included (iptables-save of both
//              families, the IPAM and CNI cache scan, planning, then per batch one nf_tables
//              transaction by rule handle; iptables-restore when the ruleset changed meanwhile)
//   nomad    : Nomad's forceCleanup per allocation (list POSTROUTING, delete the jump, flush the
//              chain, delete it), one process each, for allocations it already knows; it removes
//              only bridge's state, so it is measured on the netns-deleted shape only
//   cli      : `allocnet leaks --reap --local` as a fresh process in the node namespace, what an
//              operator runs (its own start, a first reap in a cold process), its dirs the run's
// Building the leaks (one iptables-restore) is not timed. Before each reap, on the same node
// state, the read any reap must do is timed as its comparator: `iptables-save` and
// `ip6tables-save` at once, fresh processes (the reap's scan reads both families at once); for
// the CLI also `node -e 0`, the two in turn in an order that rotates with the round. Every reap must bring the node's whole
// ruleset (iptables-save and ip6tables-save, every table) back to what it was before the leaks,
// as the integration tests check it; anything else stops the run (`not-exact`).
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { createCniRuntime } from '@allocnet/cni';
import { tempDir } from '@allocnet/cni/testing';
import { allocChains, createCniConfigurator } from '@allocnet/cni-configurator';
import {
  LEAK_NETWORK,
  LEAK_SHAPES,
  LINES_PER_LEAK,
  addLeaks,
  leakId,
  leakIp,
  sharedChains,
} from '@allocnet/cni-configurator/testing';
import type { LeakShape } from '@allocnet/cni-configurator/testing';
import { createBatch, createIptables } from '@allocnet/iptables-node';
import type { Iptables } from '@allocnet/iptables-node';
import { withNetnsLab } from '@allocnet/testns';
import { BenchError } from './errors.js';
import { NODE_BARE, timedProcess, timedSaves } from './fresh-process.js';
import { roundOrder } from './interleave.js';
import { CLI_MAIN } from './paths.js';

export { LEAK_SHAPES, LINES_PER_LEAK, addLeaks, leakId, leakIp, sharedChains };
export type { LeakShape };
export type ReapMethod = 'allocnet' | 'nomad' | 'cli';

const NETWORK = LEAK_NETWORK;

async function reapAllocnet(
  ipt: Iptables,
  ipt6: Iptables,
  n: number,
  dir: string,
  batchSize: number | undefined,
): Promise<number> {
  const configurator = await createCniConfigurator({
    runtime: createCniRuntime({ cacheDir: join(dir, 'cache') }),
    iptables: { ipv4: ipt, ipv6: ipt6 },
    defaultNetwork: { ipamDataDir: join(dir, 'ipam') },
  });
  try {
    const started = performance.now();
    const report = await configurator.reapLeaks([], batchSize === undefined ? {} : { batchSize });
    const ms = performance.now() - started;
    if (report.reaped.length !== n || report.failed.length > 0)
      throw new BenchError(
        `allocnet reaped ${report.reaped.length} of ${n} leaked allocations (${report.failed.length} failed: ${report.failed[0]?.error ?? ''})`,
        { code: 'not-exact' },
      );
    return ms;
  } finally {
    await configurator.close();
  }
}

async function reapNomad(ipt: Iptables, n: number): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < n; i++) {
    // Nomad's forceCleanup: find the allocation's POSTROUTING jump, delete it, then its chain.
    const comment = `name: "${NETWORK}" id: "${leakId(i)}"`;
    const jump = (await ipt.listRules('nat', 'POSTROUTING')).find((r) => r.comment === comment);
    if (jump === undefined)
      throw new BenchError(`no POSTROUTING jump for ${JSON.stringify(leakId(i))}`, {
        code: 'not-exact',
      });
    await ipt.delete('nat', 'POSTROUTING', jump.spec);
    const chain = allocChains(NETWORK, leakId(i)).masq;
    await ipt.clearChain('nat', chain);
    await ipt.deleteChain('nat', chain);
  }
  return performance.now() - started;
}

/** `allocnet leaks --reap --local` in the node namespace, its dirs under `dir`, as a fresh process. */
async function reapCli(netns: string, n: number, dir: string): Promise<number> {
  await mkdir(join(dir, 'net.d'), { recursive: true });
  const { ms, stdout } = await timedProcess(
    netns,
    [
      process.execPath, CLI_MAIN, 'leaks', '--reap', '--local', '--conf-dir', join(dir, 'net.d'),
      '--cache-dir', join(dir, 'cache'), '--ipam-dir', join(dir, 'ipam'),
    ], // prettier-ignore
    600_000,
  );
  const said = /^reaped (\d+) leaked allocation\(s\); (\d+) failed/m.exec(stdout);
  if (said === null || Number(said[1]) !== n || Number(said[2]) !== 0)
    throw new BenchError(
      `allocnet leaks --reap --local of ${n} leaks said: ${stdout.slice(0, 300)}`,
      {
        code: 'not-exact',
      },
    );
  return ms;
}

export interface ReapOptions {
  readonly shape: LeakShape;
  readonly allocs: number;
  readonly method: ReapMethod;
  /** reapLeaks' batch size; default the configurator's. */
  readonly batchSize?: number;
  /** The round (the CLI's comparators take turns by it); default 0. */
  readonly round?: number;
}

/** One reap's time and its comparators', taken on the same node state just before it. */
export interface ReapTimes {
  readonly ms: number;
  /** `iptables-save` and `ip6tables-save` at once, fresh processes. */
  readonly saveMs: number;
  /** `node -e 0` (the CLI's reap only). */
  readonly nodeMs?: number;
}

/** The comparators on the node as it is: the save read, and for the CLI `node -e 0`, in turn. */
async function comparators(o: ReapOptions, netns: string) {
  if (o.method !== 'cli') return { saveMs: await timedSaves(netns) };
  const out = { saveMs: Number.NaN, nodeMs: Number.NaN };
  for (const c of roundOrder(['saveMs', 'nodeMs'] as const, o.round ?? 0))
    out[c] = c === 'saveMs' ? await timedSaves(netns) : (await timedProcess(netns, NODE_BARE)).ms;
  return out;
}

/**
 * One reap on a fresh node namespace (removed afterwards): the shared chains, the baseline, `allocs`
 * leaks of `shape`, the comparators, the timed reap, then the exactness check.
 */
export async function reapOnce(o: ReapOptions): Promise<ReapTimes> {
  if (o.method === 'nomad' && o.shape !== 'netns-deleted')
    throw new BenchError(
      `Nomad's forceCleanup removes bridge's state only: it is measured on the netns-deleted shape, not ${JSON.stringify(o.shape)}`,
      { code: 'invalid-flag', flag: '--shape' },
    );
  return withNetnsLab(async (lab) => {
    const node = await lab.node('reap');
    const tmp = await tempDir('allocnet-bench-reap-');
    try {
      const ipt = createIptables({ netns: node.path });
      const ipt6 = createIptables({ family: 'ipv6', netns: node.path });
      await ipt.restore(sharedChains());
      const before = await node.ruleset();
      await ipt.restore(addLeaks(createBatch(), o.shape, o.allocs));
      const compared = await comparators(o, node.path);
      const ms =
        o.method === 'allocnet'
          ? await reapAllocnet(ipt, ipt6, o.allocs, tmp.path, o.batchSize)
          : o.method === 'cli'
            ? await reapCli(node.path, o.allocs, tmp.path)
            : await reapNomad(ipt, o.allocs);
      if ((await node.ruleset()) !== before)
        throw new BenchError(
          `${o.method} did not bring the node's ruleset back to its baseline after reaping ${o.allocs} ${o.shape} leaks`,
          { code: 'not-exact' },
        );
      return { ms, ...compared };
    } finally {
      await tmp.remove();
    }
  });
}
