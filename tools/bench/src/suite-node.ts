// What every scenario of the suite stands on: a fresh node namespace with container namespaces,
// the contenders started on it and stopped, and the allocations' ids and host ports.
import { tempDir } from '@allocnet/cni/testing';
import { createNetnsLab } from '@allocnet/testns';
import type { NetnsLab, TestNetns } from '@allocnet/testns';
import { startContender } from './contenders.js';
import type { Allocation, ContenderDriver } from './contenders.js';
import type { Contender } from './summary.js';

/** What the scenarios of one run share: the plugins, and every id given to go-cni. */
export interface SuiteContext {
  readonly pluginDir: string;
  /** Every id given to go-cni, for removing what it left in the host's libcni cache. */
  readonly peerIds: Set<string>;
}

export function log(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

/** This run's part of every id: go-cni's cache files are the host's, shared with other runs. */
const RUN = (process.pid % 0x10000).toString(16).padStart(4, '0');
/** Allocation ids as the agent takes them (UUIDs): a tag per contender and scenario, then `k`. */
export const idOf = (tag: string, k: number): string =>
  `${tag}-${RUN}-4000-8000-${k.toString(16).padStart(12, '0')}`;
export const TAG: Readonly<Record<Contender, string>> = {
  floor: 'f1000000',
  peer: 'c0c00000',
  'allocnet-lib': 'e1000000',
  'allocnet-agent': 'a9e00000',
};
/** Host ports: each contender its own range, so that allocations live at once never share one. */
const PORT_BASE: Readonly<Record<Contender, number>> = {
  floor: 21000,
  peer: 22000,
  'allocnet-lib': 23000,
  'allocnet-agent': 24000,
};

/** A fresh node namespace and N container namespaces; everything removed afterwards. */
export async function withNode<T>(
  containers: number,
  fn: (lab: NetnsLab, node: TestNetns, ctrs: TestNetns[], dir: string) => Promise<T>,
): Promise<T> {
  const lab = createNetnsLab();
  const tmp = await tempDir('allocnet-bench-');
  try {
    const node = await lab.node('bench');
    const ctrs: TestNetns[] = [];
    for (let i = 0; i < containers; i++) ctrs.push(await lab.container());
    return await fn(lab, node, ctrs, tmp.path);
  } finally {
    try {
      await lab.dispose();
    } finally {
      await tmp.remove();
    }
  }
}

/** Starts every contender on one node (the order does not matter: none is timed yet). */
export async function startAll(
  ctx: SuiteContext,
  contenders: readonly Contender[],
  lab: NetnsLab,
  node: TestNetns,
  dir: string,
): Promise<Map<Contender, ContenderDriver>> {
  const drivers = new Map<Contender, ContenderDriver>();
  try {
    for (const c of contenders)
      drivers.set(
        c,
        await startContender(c, {
          node,
          dir,
          pluginDir: ctx.pluginDir,
          netnsPrefix: `${lab.prefix}-A`,
        }),
      );
  } catch (error) {
    await stopAll(drivers);
    throw error;
  }
  return drivers;
}

export async function stopAll(drivers: ReadonlyMap<Contender, ContenderDriver>): Promise<void> {
  const stopped = await Promise.allSettled([...drivers.values()].map((d) => d.stop()));
  for (const s of stopped)
    if (s.status === 'rejected') log(`a contender did not stop cleanly: ${String(s.reason)}`);
}

/** An allocation of contender `c`: id `k` under `tag`, namespace `netns`, port base + `k`. */
export function allocation(
  ctx: SuiteContext,
  c: Contender,
  tag: string,
  k: number,
  netns: TestNetns,
): Allocation {
  const id = idOf(tag, k);
  if (c === 'peer') ctx.peerIds.add(id);
  return { id, netns: netns.path, port: PORT_BASE[c] + k };
}
