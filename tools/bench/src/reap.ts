// Leaked allocations on a fresh node namespace, and reaping them, for the suite's reap scenario
// and leak-reap.js. Two shapes, in exactly the form the Debian plugins (1.1.1) write their state
// (@allocnet/cni-configurator/testing's addPluginShapes):
//   full          : what the chain leaves when DEL ran without its cached result: bridge's
//                   POSTROUTING jump and its CNI-<h> chain (2 rules), portmap's CNI-HOSTPORT-DNAT
//                   jump and its CNI-DN-<h> chain (3 rules: one port, tcp), the firewall's two
//                   CNI-FORWARD accepts; with the two chains' declarations, 11 iptables-save lines
//   netns-deleted : what a plain out-of-band deletion of the allocation's netns leaves (bridge's
//                   DEL finds no interface and stops before its masquerade teardown; portmap and
//                   firewall clean up): the POSTROUTING jump and its chain, 4 lines
// Two ways to reap:
//   allocnet : one CniConfigurator.reapLeaks call, discovery included (iptables-save of both
//              families, the IPAM and CNI cache scan, planning, then per batch one nf_tables
//              transaction by rule handle; iptables-restore when the ruleset changed meanwhile)
//   nomad    : Nomad's forceCleanup per allocation (list POSTROUTING, delete the jump, flush the
//              chain, delete it), one process each, for allocations it already knows; it removes
//              only bridge's state, so it is measured on the netns-deleted shape only
// Building the leaks (one iptables-restore) is not timed. Every reap must bring the node's whole
// ruleset (iptables-save and ip6tables-save, every table) back to what it was before the leaks,
// as the integration tests check it; anything else stops the run (`not-exact`).
import { join } from 'node:path';
import { createCniRuntime } from '@allocnet/cni';
import { tempDir } from '@allocnet/cni/testing';
import { allocChains, createCniConfigurator } from '@allocnet/cni-configurator';
import { addPluginShapes } from '@allocnet/cni-configurator/testing';
import { createBatch, createIptables } from '@allocnet/iptables-node';
import type { Iptables, IptablesBatch } from '@allocnet/iptables-node';
import { withNetnsLab } from '@allocnet/testns';
import { BenchError } from './errors.js';

export const LEAK_SHAPES = ['full', 'netns-deleted'] as const;
export type LeakShape = (typeof LEAK_SHAPES)[number];
export type ReapMethod = 'allocnet' | 'nomad';

/** iptables-save lines one leaked allocation of each shape is. */
export const LINES_PER_LEAK: Readonly<Record<LeakShape, number>> = {
  full: 11,
  'netns-deleted': 4,
};

/** The leaks' network (allocnet's default network's name) and a /18 wide enough for 5,000 addresses. */
const NETWORK = 'nomad';
const SUBNET = '172.26.64.0/18';

export const leakId = (i: number): string =>
  `1eaced00-0000-4000-8000-${i.toString(16).padStart(12, '0')}`;
export const leakIp = (i: number): string => `172.26.${64 + Math.floor(i / 250)}.${(i % 250) + 2}`;

/**
 * Adds `n` leaked allocations of `shape` to `batch`. addPluginShapes maps a port as Nomad does,
 * tcp and udp; the full shape maps one protocol (3 rules in CNI-DN-<h>, one jump), so its udp
 * half is left out.
 */
export function addLeaks(batch: IptablesBatch, shape: LeakShape, n: number): IptablesBatch {
  for (let i = 0; i < n; i++) {
    const one = addPluginShapes(createBatch(), {
      network: NETWORK,
      allocId: leakId(i),
      ip: leakIp(i),
      subnet: SUBNET,
      ...(shape === 'full'
        ? { ports: [{ host: 20000 + i, container: 8080 }], firewall: true }
        : {}),
    });
    for (const op of one.ops) {
      if ('spec' in op && op.spec.includes('udp')) continue;
      if (op.kind === 'newChain') batch.newChain(op.table, op.chain);
      else if (op.kind === 'append') batch.append(op.table, op.chain, op.spec);
      else
        throw new Error(
          `addPluginShapes gave a ${op.kind} op; only newChain and append are copied`,
        );
    }
  }
  return batch;
}

/** The chains the plugins share, which every leak's rules are in or jump to; made before the baseline. */
export function sharedChains(): IptablesBatch {
  return createBatch()
    .newChain('filter', 'CNI-FORWARD')
    .newChain('nat', 'CNI-HOSTPORT-DNAT')
    .newChain('nat', 'CNI-HOSTPORT-SETMARK');
}

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

export interface ReapOptions {
  readonly shape: LeakShape;
  readonly allocs: number;
  readonly method: ReapMethod;
  /** reapLeaks' batch size; default the configurator's. */
  readonly batchSize?: number;
}

/**
 * One reap on a fresh node namespace (removed afterwards): the shared chains, the baseline, `allocs`
 * leaks of `shape`, the timed reap, then the exactness check. Resolves the reap's milliseconds.
 */
export async function reapOnce(o: ReapOptions): Promise<number> {
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
      const ms =
        o.method === 'allocnet'
          ? await reapAllocnet(ipt, ipt6, o.allocs, tmp.path, o.batchSize)
          : await reapNomad(ipt, o.allocs);
      if ((await node.ruleset()) !== before)
        throw new BenchError(
          `${o.method} did not bring the node's ruleset back to its baseline after reaping ${o.allocs} ${o.shape} leaks`,
          { code: 'not-exact' },
        );
      return ms;
    } finally {
      await tmp.remove();
    }
  });
}
