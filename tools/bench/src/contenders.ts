// The suite's contenders, each a process of its own in the node namespace the caller made, each
// taking one operation at a time or many at once on allocations whose namespaces the caller made
// beforehand (the same way for all), each mapping one port as tcp and udp to 8080, all on
// allocnet's default network with one host-local store (`<dir>/ipam`), so that they can share a
// node:
//   floor          : suite-inner.js --method floor: a plain loop exec'ing each plugin
//   peer           : tools/gocni-driver serve: go-cni doing Nomad's calls, one attempt per setup
//   allocnet-lib   : suite-inner.js --method lib: @allocnet/cni-configurator in that process
//   allocnet-agent : the agent process, over gRPC on its unix socket from this process
// What an operation's time is: the peer's is go-cni's call in the driver (what Nomad's client
// pays); the floor's and the library's are the call in their process; the agent's is the gRPC
// call from this process, its client (what the agent's caller pays).
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { defaultNetworkConfig, defaultNetworkSettings } from '@allocnet/cni-configurator';
import { unary } from '@allocnet/proto';
import type { TestNetns } from '@allocnet/testns';
import { startBenchAgent } from './agent-process.js';
import type { BenchAgent } from './agent-process.js';
import { BenchError, messageOf } from './errors.js';
import { startGoCni } from './gocni.js';
import { startLineServer } from './line-server.js';
import { DIST } from './paths.js';
import type { Contender } from './summary.js';

/** One allocation of a contender: its id, its namespace (made beforehand), its host port. */
export interface Allocation {
  readonly id: string;
  readonly netns: string;
  readonly port: number;
}

/** One operation's outcome: its time, or why it failed; setups count ADD attempts beyond the first. */
export type OpResult =
  | { readonly ok: true; readonly ms: number; readonly retries: number }
  | { readonly ok: false; readonly error: string };

export interface ContenderDriver {
  readonly contender: Contender;
  setup(a: Allocation): Promise<OpResult>;
  teardown(a: Allocation): Promise<OpResult>;
  /** Stops its process (the agent: SIGTERM; the others: end of input, once what is under way is answered). */
  stop(): Promise<void>;
}

export interface ContenderOptions {
  readonly node: TestNetns;
  /** The run's temp dir: `ipam` in it is the shared host-local store. */
  readonly dir: string;
  readonly pluginDir: string;
  /** The agent's namespace prefix (it makes none here: every request names its netns). */
  readonly netnsPrefix: string;
}

/** allocnet's default network, as the config file the peer is given. */
export async function writeDefaultConflist(dir: string): Promise<string> {
  const file = join(dir, 'allocnet-default.conflist');
  const network = defaultNetworkConfig(defaultNetworkSettings({ ipamDataDir: join(dir, 'ipam') }));
  await writeFile(file, network.bytes);
  return file;
}

const failed = (error: unknown): OpResult => ({ ok: false, error: messageOf(error).slice(0, 500) });

/** One answer line of suite-inner.js. */
interface InnerAnswer {
  readonly ok: boolean;
  readonly ms?: number;
  readonly retries?: number;
  readonly error?: string;
}

/** suite-inner.js (floor or lib) in the node namespace, one request a line. */
export interface InnerServer {
  call(op: 'setup' | 'check' | 'teardown', a: Allocation): Promise<OpResult>;
  stop(): Promise<void>;
}

export function startInner(
  method: 'floor' | 'lib',
  o: {
    readonly node: TestNetns;
    readonly dir: string;
    readonly pluginDir: string;
    readonly cacheDir: string;
  },
): InnerServer {
  const server = startLineServer(`suite-inner ${method}`, [
    'nsenter', `--net=${o.node.path}`, '--', process.execPath, join(DIST, 'suite-inner.js'),
    '--method', method, '--ipam-dir', join(o.dir, 'ipam'), '--cache-dir', o.cacheDir,
    '--plugin-dir', o.pluginDir,
  ]); // prettier-ignore
  return {
    async call(op, a) {
      const answer = (await server.request({ op, ...a })) as Partial<InnerAnswer>;
      return answer.ok === true && answer.ms !== undefined
        ? { ok: true, ms: answer.ms, retries: answer.retries ?? 0 }
        : { ok: false, error: answer.error ?? 'no time in the answer' };
    },
    async stop() {
      const stderr = await server.stop();
      if (stderr.trim() !== '') process.stderr.write(`[suite-inner ${method}] ${stderr}`);
    },
  };
}

function innerDriver(contender: 'floor' | 'allocnet-lib', o: ContenderOptions): ContenderDriver {
  const inner = startInner(contender === 'floor' ? 'floor' : 'lib', {
    ...o,
    cacheDir: join(o.dir, `cache-${contender}`),
  });
  return {
    contender,
    setup: (a) => inner.call('setup', a),
    teardown: (a) => inner.call('teardown', a),
    stop: () => inner.stop(),
  };
}

async function peerDriver(o: ContenderOptions): Promise<ContenderDriver> {
  const gocni = startGoCni({
    node: o.node.path,
    conflist: await writeDefaultConflist(o.dir),
    pluginDirs: o.pluginDir,
  });
  const call = async (op: 'setup' | 'remove', a: Allocation): Promise<OpResult> => {
    try {
      return { ok: true, ms: await gocni.call(op, a.id, a.netns, [[a.port, 8080]]), retries: 0 };
    } catch (error) {
      // A call go-cni answered with an error is a failed sample; a driver that died is not.
      if (error instanceof BenchError) throw error;
      return failed(error);
    }
  };
  return {
    contender: 'peer',
    setup: (a) => call('setup', a),
    teardown: (a) => call('remove', a),
    stop: () => gocni.stop(),
  };
}

/** The agent's SetupAllocNetwork and TeardownAllocNetwork, timed from this process. */
export function agentOps(agent: BenchAgent): Pick<ContenderDriver, 'setup' | 'teardown'> {
  const timed = async (call: () => Promise<number>): Promise<OpResult> => {
    const t0 = performance.now();
    try {
      const retries = await call();
      return { ok: true, ms: performance.now() - t0, retries };
    } catch (error) {
      return failed(error);
    }
  };
  return {
    setup: (a) =>
      timed(async () => {
        const { status } = await unary(
          agent.alloc,
          'SetupAllocNetwork',
          {
            allocId: a.id,
            namespace: 'bench',
            jobId: 'bench',
            groupName: 'web',
            ports: [{ label: 'http', value: a.port, to: 8080 }],
            netnsPath: a.netns,
          },
          { deadlineMs: 120_000 },
        );
        return (status?.attempts ?? 1) - 1;
      }),
    teardown: (a) =>
      timed(async () => {
        await unary(
          agent.alloc,
          'TeardownAllocNetwork',
          { allocId: a.id },
          { deadlineMs: 120_000 },
        );
        return 0;
      }),
  };
}

async function agentDriver(o: ContenderOptions): Promise<ContenderDriver> {
  const agent = await startBenchAgent({
    node: o.node,
    dir: join(o.dir, 'agent'),
    ipamDir: join(o.dir, 'ipam'),
    netnsPrefix: o.netnsPrefix,
    pluginDir: o.pluginDir,
  });
  return {
    contender: 'allocnet-agent',
    ...agentOps(agent),
    async stop() {
      await agent.stop();
    },
  };
}

/** Starts one contender on the node; `stop` it when done. */
export async function startContender(
  contender: Contender,
  o: ContenderOptions,
): Promise<ContenderDriver> {
  switch (contender) {
    case 'floor':
    case 'allocnet-lib':
      return innerDriver(contender, o);
    case 'peer':
      return peerDriver(o);
    case 'allocnet-agent':
      return agentDriver(o);
  }
}
