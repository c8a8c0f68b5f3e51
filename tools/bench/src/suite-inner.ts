#!/usr/bin/env node
// Two of the suite's contenders as a process of their own in the node namespace (started with
// `nsenter --net=<node>` by contenders.ts), taking one operation at a time or many at once as
// gocni-driver's `serve` does: one JSON request a line on stdin,
//   {"seq":1,"op":"setup","id":"…","netns":"/run/netns/…","port":20000}
// (op setup, check or teardown), each line's operation run at once, each answered with one line
//   {"seq":1,"ok":true,"ms":12.3,"retries":0}   or   {"seq":1,"ok":false,"error":"…"}
// in the order they finish; `ms` times the operation alone, in this process. At the end of its
// input it answers what is under way, then exits.
//   --method floor : a plain loop exec'ing each plugin of the default bridge chain (plain-chain.ts)
//   --method lib   : @allocnet/cni-configurator in this process (setup, CHECK, teardown with the
//                    audit)
// Both run allocnet's embedded default network (the agent's, the peer's conflist), one port
// mapped as tcp and udp to 8080, the host-local store in --ipam-dir.
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { createCniRuntime } from '@allocnet/cni';
import {
  createCniConfigurator,
  defaultNetworkConfig,
  defaultNetworkSettings,
} from '@allocnet/cni-configurator';
import type { AllocAttachment } from '@allocnet/cni-configurator';
import { createIptables } from '@allocnet/iptables-node';
import { BenchError, messageOf } from './errors.js';
import { plainDriver } from './plain-chain.js';

const { values } = parseArgs({
  options: {
    method: { type: 'string' },
    'ipam-dir': { type: 'string' },
    'cache-dir': { type: 'string' },
    'plugin-dir': { type: 'string', default: '/usr/lib/cni' },
  },
});
const method = values.method;
if (method !== 'floor' && method !== 'lib')
  throw new BenchError(`--method ${JSON.stringify(method ?? '')} is not floor or lib`, {
    code: 'invalid-flag',
    flag: '--method',
  });
const ipamDir = values['ipam-dir'];
const cacheDir = values['cache-dir'];
if (ipamDir === undefined || cacheDir === undefined)
  throw new BenchError('--ipam-dir and --cache-dir are required', {
    code: 'invalid-flag',
    flag: ipamDir === undefined ? '--ipam-dir' : '--cache-dir',
  });
const pluginDir = values['plugin-dir'];

/** One operation's request line. */
interface Request {
  readonly seq: number;
  readonly op: 'setup' | 'check' | 'teardown';
  readonly id: string;
  readonly netns: string;
  readonly port: number;
}

interface Ops {
  /** Resolves to the ADD attempts beyond the first. */
  setup(r: Request): Promise<number>;
  check(r: Request): Promise<void>;
  teardown(r: Request): Promise<void>;
  close(): Promise<void>;
}

async function libOps(): Promise<Ops> {
  const configurator = await createCniConfigurator({
    runtime: createCniRuntime({ pluginDirs: [pluginDir], cacheDir: cacheDir as string }),
    iptables: { ipv4: createIptables(), ipv6: createIptables({ family: 'ipv6' }) },
    defaultNetwork: { ipamDataDir: ipamDir as string },
  });
  // Each allocation's attachment from its setup, for its CHECK and teardown.
  const attachments = new Map<string, AllocAttachment>();
  return {
    async setup(r) {
      const { status, attachment } = await configurator.setup(
        {
          allocId: r.id,
          namespace: 'bench',
          jobId: 'bench',
          groupName: 'web',
          ports: [{ label: 'http', value: r.port, to: 8080 }],
        },
        r.netns,
      );
      attachments.set(r.id, attachment);
      return status.attempts - 1;
    },
    async check(r) {
      const attachment = attachments.get(r.id);
      if (attachment === undefined) throw new Error(`no setup of ${JSON.stringify(r.id)} to CHECK`);
      await configurator.check(attachment);
    },
    async teardown(r) {
      await configurator.teardown(r.id, attachments.get(r.id));
      attachments.delete(r.id);
    },
    close: () => configurator.close(),
  };
}

function floorOps(): Ops {
  const network = defaultNetworkConfig(defaultNetworkSettings({ ipamDataDir: ipamDir as string }));
  const driver = plainDriver(network, pluginDir);
  const alloc = (r: Request) => ({
    id: r.id,
    netns: r.netns,
    portMappings: ['tcp', 'udp'].map((protocol) => ({
      hostPort: r.port,
      containerPort: 8080,
      protocol,
    })),
  });
  return {
    async setup(r) {
      await driver.add(alloc(r));
      return 0;
    },
    check: (r) => driver.check(alloc(r)),
    teardown: (r) => driver.del(alloc(r)),
    close: () => Promise.resolve(),
  };
}

const ops = method === 'lib' ? await libOps() : floorOps();
const reply = (answer: Record<string, unknown>) =>
  process.stdout.write(`${JSON.stringify(answer)}\n`);
const running = new Set<Promise<void>>();
try {
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim() === '') continue;
    const r = JSON.parse(line) as Request;
    const task = (async () => {
      const t0 = performance.now();
      try {
        const retries = r.op === 'setup' ? await ops.setup(r) : (await ops[r.op](r), 0);
        reply({ seq: r.seq, ok: true, ms: performance.now() - t0, retries });
      } catch (error) {
        reply({ seq: r.seq, ok: false, error: messageOf(error).slice(0, 500) });
      }
    })();
    running.add(task);
    void task.finally(() => running.delete(task));
  }
  await Promise.all(running);
} finally {
  await ops.close();
}
