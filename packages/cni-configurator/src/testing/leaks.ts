// Leaked allocations in exactly the form the Debian plugins (1.1.1) leave them, by the thousand:
// what the benchmarks' reaps (tools/bench reap.ts) and the reap tests (integration) remove. Two
// shapes:
//   full          : what the chain leaves when DEL ran without its cached result: bridge's
//                   POSTROUTING jump and its CNI-<h> chain (2 rules), portmap's CNI-HOSTPORT-DNAT
//                   jump and its CNI-DN-<h> chain (3 rules: one port, tcp), the firewall's two
//                   CNI-FORWARD accepts; with the two chains' declarations, 11 iptables-save lines
//   netns-deleted : what a plain out-of-band deletion of the allocation's netns leaves (bridge's
//                   DEL finds no interface and stops before its masquerade teardown; portmap and
//                   firewall clean up): the POSTROUTING jump and its chain, 4 lines
import { createBatch } from '@allocnet/iptables-node';
import type { IptablesBatch } from '@allocnet/iptables-node';
import { addPluginShapes } from './shapes.js';

export const LEAK_SHAPES = ['full', 'netns-deleted'] as const;
export type LeakShape = (typeof LEAK_SHAPES)[number];

/** iptables-save lines one leaked allocation of each shape is. */
export const LINES_PER_LEAK: Readonly<Record<LeakShape, number>> = {
  full: 11,
  'netns-deleted': 4,
};

/** The leaks' network (allocnet's default network's name) and a /18 wide enough for 10,000 addresses. */
export const LEAK_NETWORK = 'nomad';
const SUBNET = '172.26.64.0/18';

/** A bijection of 32-bit numbers that scatters neighbours (murmur3's finalizer). */
function scatter(i: number): number {
  let x = i >>> 0;
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

/**
 * Leak `i`'s allocation id, address and host port (full shape). The ids are distinct and, like
 * real allocation ids (random UUIDs), not in the order the leaks are made: sorted by id, the leaks'
 * rules are scattered over the shared chains, as on a node (a reap that took them in id order
 * walked far more of each chain than one in the chains' order, leaks.ts `inChainOrder`).
 */
export const leakId = (i: number): string =>
  `1eaced00-0000-4000-8000-${scatter(i).toString(16).padStart(12, '0')}`;
export const leakIp = (i: number): string => `172.26.${64 + Math.floor(i / 250)}.${(i % 250) + 2}`;
export const leakPort = (i: number): number => 20000 + i;

/**
 * Adds `n` leaked allocations of `shape` to `batch`, leaks `from`…`from + n - 1` (default 0: a
 * node with live allocations in the same network starts them past its own addresses, 250 a /24).
 * addPluginShapes maps a port as Nomad does, tcp and udp; the full shape maps one protocol (3
 * rules in CNI-DN-<h>, one jump), so its udp half is left out. The shared chains
 * (`sharedChains`) must exist.
 */
export function addLeaks(
  batch: IptablesBatch,
  shape: LeakShape,
  n: number,
  from = 0,
): IptablesBatch {
  for (let i = from; i < from + n; i++) {
    const one = addPluginShapes(createBatch(), {
      network: LEAK_NETWORK,
      allocId: leakId(i),
      ip: leakIp(i),
      subnet: SUBNET,
      ...(shape === 'full'
        ? { ports: [{ host: leakPort(i), container: 8080 }], firewall: true }
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

/** The chains the plugins share, which every leak's rules are in or jump to. */
export function sharedChains(): IptablesBatch {
  return createBatch()
    .newChain('filter', 'CNI-FORWARD')
    .newChain('nat', 'CNI-HOSTPORT-DNAT')
    .newChain('nat', 'CNI-HOSTPORT-SETMARK');
}
