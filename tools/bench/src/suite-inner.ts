#!/usr/bin/env node
// One measurement of the benchmark suite, run INSIDE a node namespace (`ip netns exec`): set up an
// allocation in every container namespace given, `--concurrency` at a time, then tear them all
// down the same way, timing each operation. Prints JSON samples (`InnerResult`).
//   --method floor : a plain loop exec'ing each plugin of the default bridge chain (plain-chain.ts)
//   --method lib   : @allocnet/cni-configurator in this process (setup, then teardown with audit)
//   --check        : a CHECK of every allocation between the setups and the teardowns
// Both run the same network configuration: allocnet's embedded default network.
import { parseArgs } from 'node:util';
import { createCniRuntime } from '@allocnet/cni';
import {
  createCniConfigurator,
  defaultNetworkConfig,
  defaultNetworkSettings,
} from '@allocnet/cni-configurator';
import type { AllocAttachment } from '@allocnet/cni-configurator';
import { createIptables } from '@allocnet/iptables-node';
import { plainDriver } from './plain-chain.js';
import { pool } from './pool.js';
import type { InnerResult, PhaseSamples } from './samples.js';

const { values } = parseArgs({
  options: {
    method: { type: 'string' },
    netns: { type: 'string' },
    concurrency: { type: 'string', default: '1' },
    'ipam-dir': { type: 'string' },
    'cache-dir': { type: 'string' },
    'plugin-dir': { type: 'string', default: '/usr/lib/cni' },
    'port-base': { type: 'string', default: '20000' },
    'id-prefix': { type: 'string', default: '00000000-0000-4000-8000-' },
    check: { type: 'boolean', default: false },
  },
});
const method = values.method;
if (method !== 'floor' && method !== 'lib') throw new Error('--method is floor or lib');
if (
  values.netns === undefined ||
  values['ipam-dir'] === undefined ||
  values['cache-dir'] === undefined
)
  throw new Error('--netns (comma-separated paths), --ipam-dir and --cache-dir are required');
const paths = values.netns.split(',');
const concurrency = Number(values.concurrency);
const portBase = Number(values['port-base']);
const pluginDir = values['plugin-dir'];
const idOf = (i: number) => `${values['id-prefix']}${i.toString(16).padStart(12, '0')}`;

interface Ops {
  setup(i: number): Promise<number>;
  check(i: number): Promise<void>;
  teardown(i: number): Promise<void>;
  close(): Promise<void>;
}

async function libOps(): Promise<Ops> {
  const configurator = await createCniConfigurator({
    runtime: createCniRuntime({ pluginDirs: [pluginDir], cacheDir: values['cache-dir'] as string }),
    iptables: { ipv4: createIptables(), ipv6: createIptables({ family: 'ipv6' }) },
    defaultNetwork: { ipamDataDir: values['ipam-dir'] as string },
  });
  const attachments = new Map<number, AllocAttachment>();
  return {
    async setup(i) {
      const { status, attachment } = await configurator.setup(
        {
          allocId: idOf(i),
          namespace: 'bench',
          jobId: 'bench',
          groupName: 'web',
          ports: [{ label: 'http', value: portBase + i, to: 8080 }],
        },
        paths[i] as string,
      );
      attachments.set(i, attachment);
      return status.attempts - 1;
    },
    async check(i) {
      await configurator.check(attachments.get(i) as AllocAttachment);
    },
    async teardown(i) {
      await configurator.teardown(idOf(i), attachments.get(i));
    },
    close: () => configurator.close(),
  };
}

function floorOps(): Ops {
  const network = defaultNetworkConfig(
    defaultNetworkSettings({ ipamDataDir: values['ipam-dir'] as string }),
  );
  const driver = plainDriver(network, pluginDir);
  const alloc = (i: number) => ({
    id: idOf(i),
    netns: paths[i] as string,
    portMappings: ['tcp', 'udp'].map((protocol) => ({
      hostPort: portBase + i,
      containerPort: 8080,
      protocol,
    })),
  });
  return {
    async setup(i) {
      await driver.add(alloc(i));
      return 0;
    },
    check: (i) => driver.check(alloc(i)),
    teardown: (i) => driver.del(alloc(i)),
    close: () => Promise.resolve(),
  };
}

async function phase(
  n: number,
  op: (i: number) => Promise<number | undefined>,
): Promise<PhaseSamples> {
  const samplesMs: number[] = new Array<number>(n).fill(Number.NaN);
  const failures: string[] = [];
  let retries = 0;
  const started = performance.now();
  await pool(n, concurrency, async (i) => {
    const t0 = performance.now();
    try {
      retries += (await op(i)) ?? 0;
      samplesMs[i] = performance.now() - t0;
    } catch (error) {
      failures.push(error instanceof Error ? error.message.slice(0, 300) : String(error));
    }
  });
  return {
    samplesMs: samplesMs.filter((s) => !Number.isNaN(s)),
    failures,
    retries,
    totalMs: performance.now() - started,
  };
}

const ops = method === 'lib' ? await libOps() : floorOps();
try {
  const setup = await phase(paths.length, (i) => ops.setup(i));
  const check = values.check
    ? await phase(paths.length, async (i) => {
        await ops.check(i);
        return 0;
      })
    : undefined;
  const teardown = await phase(paths.length, async (i) => {
    await ops.teardown(i);
    return 0;
  });
  const result: InnerResult = {
    method,
    n: paths.length,
    concurrency,
    setup,
    ...(check === undefined ? {} : { check }),
    teardown,
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
} finally {
  await ops.close();
}
