#!/usr/bin/env node
// One measurement of the CNI chain benchmark, run INSIDE the node namespace (`ip netns exec`):
// ADD for every container namespace given, one at a time, then DEL for every one, timing each
// whole-chain operation. Prints JSON in the shape of the go-cni peer's `bench` output.
//   --method allocnet : @allocnet/cni's runtime
//   --method allocnet-fork : the same runtime, plugins started by node:child_process (fork)
//   --method plain    : a plain loop that spawns each plugin directly (child_process.spawn),
//                       stdin built by hand the way libcni builds it; no checks, no cache
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { createCniRuntime, createNodePluginExec, parseNetworkConfigText } from '@allocnet/cni';
import type { SpawnMethod } from '@allocnet/spawn';
import { plainDriver } from './plain-chain.js';
import { phaseStats } from './stats.js';

const { values } = parseArgs({
  options: {
    method: { type: 'string' },
    conflist: { type: 'string' },
    netns: { type: 'string' },
    'plugin-dir': { type: 'string', default: '/usr/lib/cni' },
    'cache-dir': { type: 'string' },
    'port-base': { type: 'string', default: '20000' },
  },
});
const method = values.method;
if (method !== 'allocnet' && method !== 'allocnet-fork' && method !== 'plain')
  throw new Error('--method is allocnet, allocnet-fork or plain');
if (
  values.conflist === undefined ||
  values.netns === undefined ||
  values['cache-dir'] === undefined
) {
  throw new Error('--conflist, --netns (comma-separated paths) and --cache-dir are required');
}
const pluginDir = values['plugin-dir'];
const cacheDir = values['cache-dir'];
const network = parseNetworkConfigText(readFileSync(values.conflist, 'utf8'), values.conflist);
const paths = values.netns.split(',');
const portBase = Number(values['port-base']);

interface Alloc {
  readonly id: string;
  readonly netns: string;
  readonly portMappings: readonly {
    hostPort: number;
    containerPort: number;
    protocol: string;
    hostIP: string;
  }[];
}

const allocs: Alloc[] = paths.map((netns, i) => ({
  id: `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`,
  netns,
  portMappings: ['tcp', 'udp'].map((protocol) => ({
    hostPort: portBase + i,
    containerPort: 8080,
    protocol,
    hostIP: '',
  })),
}));

interface Driver {
  add(a: Alloc): Promise<void>;
  del(a: Alloc): Promise<void>;
}

function allocnetDriver(spawnMethod: SpawnMethod): Driver {
  const runtime = createCniRuntime({
    pluginDirs: [pluginDir],
    cacheDir,
    exec: createNodePluginExec({ spawnMethod }),
  });
  const attach = (a: Alloc) => ({
    containerId: a.id,
    netns: a.netns,
    ifName: 'eth0',
    capabilityArgs: { portMappings: a.portMappings },
  });
  return {
    async add(a) {
      await runtime.add(network, attach(a));
    },
    async del(a) {
      await runtime.del(network, attach(a));
    },
  };
}

async function phase(op: (a: Alloc) => Promise<void>) {
  const latencies: number[] = [];
  const failures: string[] = [];
  const start = performance.now();
  for (const a of allocs) {
    const t0 = performance.now();
    try {
      await op(a);
      latencies.push(performance.now() - t0);
    } catch (error) {
      failures.push(error instanceof Error ? error.message.slice(0, 300) : String(error));
    }
  }
  return phaseStats(latencies, failures, performance.now() - start);
}

const driver =
  method === 'plain'
    ? plainDriver(network, pluginDir)
    : allocnetDriver(method === 'allocnet' ? 'posix_spawn' : 'child_process');
const setup = await phase((a) => driver.add(a));
const remove = await phase((a) => driver.del(a));
process.stdout.write(`${JSON.stringify({ method, n: allocs.length, setup, remove })}\n`);
