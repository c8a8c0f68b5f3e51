// How each contender of the suite is run, each on a node namespace the caller made:
//   floor, allocnet-lib : suite-inner.js inside the node namespace (ip netns exec)
//   peer                : ../shared/peer's peercni bench (go-cni, what Nomad uses)
import { writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { defaultNetworkConfig, defaultNetworkSettings } from '@allocnet/cni-configurator';
import type { TestNetns } from '@allocnet/testns';
import type { InnerResult } from './samples.js';

const here = dirname(fileURLToPath(import.meta.url));
export const REPO = resolve(here, '..', '..', '..');
export const DEFAULT_PEER = resolve(REPO, '..', 'shared', 'peer', 'bin', 'peercni');

export interface InnerOptions {
  readonly node: TestNetns;
  readonly containers: readonly TestNetns[];
  readonly concurrency: number;
  readonly dir: string;
  readonly pluginDir: string;
  /** First host port (allocation i maps portBase + i). Default 20000. */
  readonly portBase?: number;
  /** Also CHECK every allocation between the setups and the teardowns. */
  readonly check?: boolean;
}

/** floor or allocnet-lib, inside the node namespace. */
export async function runInner(method: 'floor' | 'lib', o: InnerOptions): Promise<InnerResult> {
  const { stdout } = await execa('ip', [
    'netns', 'exec', o.node.name, process.execPath, join(here, 'suite-inner.js'),
    '--method', method,
    '--netns', o.containers.map((c) => c.path).join(','),
    '--concurrency', String(o.concurrency),
    '--ipam-dir', join(o.dir, 'ipam'),
    '--cache-dir', join(o.dir, 'cache'),
    '--plugin-dir', o.pluginDir,
    '--port-base', String(o.portBase ?? 20000),
    '--id-prefix', `${method === 'floor' ? 'f' : 'e'}${(o.portBase ?? 20000).toString(16).padStart(7, '0')}-0000-4000-8000-`,
    ...(o.check === true ? ['--check'] : []),
  ]); // prettier-ignore
  return JSON.parse(stdout) as InnerResult;
}

/** The aggregate the peer prints per phase (it keeps no raw samples). */
export interface PeerPhase {
  readonly totalMs: number;
  readonly ok: number;
  readonly failed: number;
  readonly p50Ms: number;
  readonly p95Ms: number;
  readonly minMs: number;
  readonly maxMs: number;
  readonly meanMs: number;
  readonly opsPerSec: number;
  readonly errors?: Readonly<Record<string, number>>;
  readonly retriedOps?: number;
}

export interface PeerResult {
  readonly n: number;
  readonly concurrency: number;
  readonly setup: PeerPhase;
  readonly remove: PeerPhase;
  readonly duplicateAddresses: number;
}

/** allocnet's default network, as the config file the peer and the floor are given. */
export async function writeDefaultConflist(dir: string): Promise<string> {
  const file = join(dir, 'allocnet-default.conflist');
  const network = defaultNetworkConfig(defaultNetworkSettings({ ipamDataDir: join(dir, 'ipam') }));
  await writeFile(file, network.bytes);
  return file;
}

/**
 * peercni bench in the node namespace: it makes its own container namespaces (untimed), sets all
 * up `concurrency` at a time, then removes all. One attempt per setup: its failures are the race.
 */
export async function runPeer(o: {
  readonly peer: string;
  readonly node: TestNetns;
  readonly n: number;
  readonly concurrency: number;
  readonly dir: string;
  readonly pluginDir: string;
  readonly prefix: string;
}): Promise<PeerResult> {
  const conflist = await writeDefaultConflist(o.dir);
  const { stdout } = await execa('ip', [
    'netns', 'exec', o.node.name, o.peer, 'bench',
    '--n', String(o.n), '--concurrency', String(o.concurrency), '--attempts', '1',
    '--conflist', conflist, '--cni-path', o.pluginDir, '--netns-prefix', o.prefix,
  ]); // prettier-ignore
  return JSON.parse(stdout) as PeerResult;
}
