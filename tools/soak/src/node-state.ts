// Reads the node and the agent into verdict.ts's shapes: iptables of both families in the node
// namespace (parsed by @allocnet/iptables-node, so counters never count), the namespaces with
// the agent's prefix, the default network's host-local reservations, the CNI cache's files, and
// the agent's own `ListAllocNetworks` and `ListLeaks` over its socket.
import type { Dirent } from 'node:fs';
import { readFile, readdir } from 'node:fs/promises';
import { isIP } from 'node:net';
import { join, relative } from 'node:path';
import { createIptables } from '@allocnet/iptables-node';
import type { IpNetnsManager } from '@allocnet/netns';
import { unary } from '@allocnet/proto';
import type {
  AllocNetworkServiceClient,
  HostState__Output,
  OperatorServiceClient,
} from '@allocnet/proto';
import type { TestNetns } from '@allocnet/testns';
import { rulesetLines } from './verdict.js';
import type { NodePlaces, NodeState, Rulesets, StateCounts } from './verdict.js';

/** How long one of the agent's read calls may take. */
const READ_DEADLINE_MS = 60_000;

export interface NodeReader {
  readonly places: NodePlaces;
  rules(): Promise<Rulesets>;
  state(): Promise<NodeState>;
}

export interface NodeReaderOptions {
  readonly node: TestNetns;
  readonly netns: IpNetnsManager;
  readonly places: NodePlaces;
  readonly alloc: AllocNetworkServiceClient;
  readonly operator: OperatorServiceClient;
}

/** Every file below `dir` (recursively); none when it does not exist. */
async function filesBelow(dir: string): Promise<Dirent[]> {
  try {
    const entries = await readdir(dir, { recursive: true, withFileTypes: true });
    return entries.filter((e) => !e.isDirectory());
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

/**
 * host-local's reservations: the files named by an address in the network's dir (`lock` and
 * `last_reserved_ip.*` are not), holding the container id on their first line.
 */
async function reservations(dir: string): Promise<NodeState['reservations']> {
  const files = (await filesBelow(dir)).filter((e) => e.parentPath === dir && isIP(e.name) !== 0);
  return Promise.all(
    files
      .map((e) => e.name)
      .sort()
      .map(async (address) => ({
        address,
        owner: (await readFile(join(dir, address), 'utf8')).split(/\r?\n/, 1)[0] ?? '',
      })),
  );
}

function counts(state: HostState__Output | null): StateCounts {
  return {
    rules: state?.rules.length ?? 0,
    chains: state?.chains.length ?? 0,
    reservations: state?.reservations.length ?? 0,
    cacheFiles: state?.cacheFiles.length ?? 0,
  };
}

export function createNodeReader(options: NodeReaderOptions): NodeReader {
  const { node, places } = options;
  const ipv4 = createIptables({ family: 'ipv4', netns: node.path });
  const ipv6 = createIptables({ family: 'ipv6', netns: node.path });
  const call = { deadlineMs: READ_DEADLINE_MS };

  const rules = async (): Promise<Rulesets> => {
    const [v4, v6] = await Promise.all([ipv4.save(), ipv6.save()]);
    return { ipv4: rulesetLines(v4), ipv6: rulesetLines(v6) };
  };

  return {
    places,
    rules,
    async state() {
      const [now, names, held, cacheFiles, list, leaks] = await Promise.all([
        rules(),
        options.netns.list(),
        reservations(places.ipamDir),
        filesBelow(places.cacheDir).then((files) =>
          files.map((e) => relative(places.cacheDir, join(e.parentPath, e.name))).sort(),
        ),
        unary(options.alloc, 'ListAllocNetworks', {}, call),
        unary(options.operator, 'ListLeaks', {}, call),
      ]);
      return {
        rules: now,
        namespaces: names.filter((n) => n.startsWith(places.netnsPrefix)).sort(),
        reservations: held,
        cacheFiles,
        allocations: list.allocations.map((a) => ({ allocId: a.allocId, phase: a.phase })),
        leaks: leaks.leaks.map((l) => ({ allocId: l.allocId, state: counts(l.state) })),
        orphans: counts(leaks.orphans),
        strayNamespaces: leaks.namespaces.map((n) => n.name),
      };
    },
  };
}
