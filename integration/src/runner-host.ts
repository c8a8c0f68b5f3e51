// What the alloc-runner integration tests share: a node namespace standing for the host, temp
// dirs for the runner's store, host-local and the CNI cache, a runner in this process or in a
// child process (for crash tests), and readings of the node's state.
import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { createAllocRunner } from '@allocnet/alloc-runner';
import type { AllocRunner, AllocRunnerOptions, RunnerSpec } from '@allocnet/alloc-runner';
import { createCniRuntime, createNodePluginExec } from '@allocnet/cni';
import { tempDir } from '@allocnet/cni/testing';
import { createCniConfigurator, createRouteReader } from '@allocnet/cni-configurator';
import type { CniConfigurator, CniConfiguratorOptions } from '@allocnet/cni-configurator';
import { createIptables } from '@allocnet/iptables-node';
import { createNetnsLab } from '@allocnet/testns';
import type { NetnsLab, TestNetns } from '@allocnet/testns';

export const PLUGIN_DIR = '/usr/lib/cni';
const CHILD = fileURLToPath(new URL('./fixtures/runner-child.mjs', import.meta.url));

let hosts = 0;

export interface ChildRun {
  readonly exitCode: number | undefined;
  readonly signal: string | undefined;
  /** The JSON line of every step that finished. */
  readonly steps: readonly { readonly op: string; readonly result: unknown }[];
  readonly stderr: string;
}

export type ChildStep =
  | { readonly op: 'start' }
  | { readonly op: 'setup'; readonly specs: readonly RunnerSpec[] }
  | { readonly op: 'teardown'; readonly ids: readonly string[] }
  | { readonly op: 'check'; readonly ids: readonly string[] }
  | { readonly op: 'list' };

export interface RunnerHost {
  readonly lab: NetnsLab;
  readonly node: TestNetns;
  /**
   * The runner's namespace prefix: the lab's (so the test command's leak check sees what the
   * runner leaves), then `-A`, this process's pid and a count. No lab namespace starts with it
   * (theirs go on with a lowercase pid), nor another test's or worker's runner.
   */
  readonly netnsPrefix: string;
  readonly dataDir: string;
  readonly ipamDir: string;
  readonly cacheDir: string;
  /** The configurator's conf dir (empty unless a test adds a network): the named networks. */
  readonly confDir: string;
  /**
   * Writes a named network into the conf dir: a bridge of its own in the node namespace with
   * host-local in `ipamDir`, for an allocation's second attachment.
   */
  addBridgeNetwork(name: string, bridge: string, subnet: string): Promise<void>;
  /** A runner (and its configurator) in this process, on the node; closed by dispose(). */
  runner(
    options?: Partial<AllocRunnerOptions>,
    configuratorOptions?: Pick<CniConfiguratorOptions, 'ipv6OnIpv4Interfaces'>,
  ): Promise<{
    runner: AllocRunner;
    configurator: CniConfigurator;
  }>;
  /** The runner in a child process on the node: runs the steps, then exits (or crashes). */
  child(steps: readonly ChildStep[], options?: { readonly crashAt?: string }): Promise<ChildRun>;
  /** The node's iptables-save and ip6tables-save, without comments and counters. */
  ruleset(): Promise<string>;
  /** host-local's reservations: address → the allocation id the file names. */
  reservations(): Promise<Record<string, string>>;
  /** The names under /run/netns with the runner's prefix. */
  namespaces(): Promise<string[]>;
  /** Closes in-process runners, removes the runner's namespaces, the lab and the temp dirs. */
  dispose(): Promise<void>;
}

export async function createRunnerHost(): Promise<RunnerHost> {
  const lab = createNetnsLab();
  const tmp = await tempDir('allocnet-runner-it-');
  const opened: { runner: AllocRunner; configurator: CniConfigurator }[] = [];
  const netnsPrefix = `${lab.prefix}-A${process.pid.toString(36)}${(++hosts).toString(36)}-`;
  const dataDir = join(tmp.path, 'data');
  const ipamDir = join(tmp.path, 'ipam');
  const cacheDir = join(tmp.path, 'cache');
  const confDir = join(tmp.path, 'conf');
  let node: TestNetns;
  try {
    node = await lab.node();
  } catch (error) {
    await lab.dispose();
    await tmp.remove();
    throw error;
  }

  async function namespaces(): Promise<string[]> {
    try {
      return (await readdir('/run/netns')).filter((n) => n.startsWith(netnsPrefix)).sort();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
  }

  return {
    lab,
    node,
    netnsPrefix,
    dataDir,
    ipamDir,
    cacheDir,
    confDir,

    async addBridgeNetwork(name, bridge, subnet) {
      await mkdir(confDir, { recursive: true });
      const ipam = { type: 'host-local', dataDir: ipamDir, ranges: [[{ subnet }]] };
      const conflist = { cniVersion: '1.0.0', name, plugins: [{ type: 'bridge', bridge, ipam }] };
      await writeFile(join(confDir, `${name}.conflist`), JSON.stringify(conflist));
    },

    async runner(options = {}, configuratorOptions = {}) {
      const configurator = await createCniConfigurator({
        runtime: createCniRuntime({
          pluginDirs: [PLUGIN_DIR],
          cacheDir,
          exec: createNodePluginExec({ netns: node.name }),
        }),
        // The bridge and the host veths are in the node namespace: CHECK reads them there.
        routeReader: createRouteReader({ netns: node.path }),
        iptables: {
          ipv4: createIptables({ netns: node.path }),
          ipv6: createIptables({ family: 'ipv6', netns: node.path }),
        },
        defaultNetwork: { ipamDataDir: ipamDir },
        confDir,
        watchConfDir: false,
        ...configuratorOptions,
      });
      const runner = await createAllocRunner({
        configurator,
        dataDir,
        netnsPrefix,
        reconcile: { mode: 'reap', intervalMs: 0 },
        ...options,
      });
      opened.push({ runner, configurator });
      return { runner, configurator };
    },

    async child(steps, options = {}) {
      const config = { dataDir, ipamDir, cacheDir, confDir, netnsPrefix, steps };
      const r = await execa(
        'nsenter',
        [`--net=${node.path}`, '--', process.execPath, CHILD, JSON.stringify(config)],
        {
          reject: false,
          stdin: 'ignore',
          env: options.crashAt === undefined ? {} : { ALLOCNET_CRASH_AT: options.crashAt },
          timeout: 300_000,
        },
      );
      return {
        exitCode: r.exitCode,
        signal: r.signal,
        steps: r.stdout
          .split('\n')
          .filter((l) => l !== '')
          .map((l) => JSON.parse(l) as { op: string; result: unknown }),
        stderr: r.stderr,
      };
    },

    ruleset: () => node.ruleset(),

    async reservations() {
      const found: Record<string, string> = {};
      let networks: string[];
      try {
        networks = await readdir(ipamDir);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return found;
        throw error;
      }
      for (const net of networks) {
        for (const file of await readdir(join(ipamDir, net))) {
          if (file === 'lock' || file.startsWith('last_reserved_ip')) continue;
          // host-local writes `<container id>\n<ifname>` (1.1.1: `\r\n`).
          found[file] = (await readFile(join(ipamDir, net, file), 'utf8')).split(/\r?\n/)[0] ?? '';
        }
      }
      return found;
    },

    namespaces,

    async dispose() {
      const problems: unknown[] = [];
      for (const { runner, configurator } of opened) {
        try {
          await runner.close();
          await configurator.close();
        } catch (error) {
          problems.push(error);
        }
      }
      try {
        // The runner's namespaces go the way the lab's own do (processes, links, then the name).
        for (const name of await namespaces()) lab.adopt(name);
      } catch (error) {
        problems.push(error);
      }
      try {
        await lab.dispose();
      } catch (error) {
        problems.push(error);
      }
      await tmp.remove();
      if (problems.length > 0)
        throw new AggregateError(problems, 'cleaning up the runner host failed');
    },
  };
}

let seq = 0;

/** A spec with a fresh allocation id (UUID-shaped, this process's pid in it). */
export function allocSpec(extra: Partial<RunnerSpec> = {}): RunnerSpec {
  seq++;
  return {
    allocId: `00000000-${(process.pid % 0x10000).toString(16).padStart(4, '0')}-4000-8000-${seq.toString(16).padStart(12, '0')}`,
    namespace: 'default',
    jobId: 'web',
    groupName: 'frontend',
    ...extra,
  };
}

/** One ping from the node to `address`: whether traffic flows through the bridge. */
export async function pings(node: TestNetns, address: string): Promise<boolean> {
  const r = await node.exec(['ping', '-c', '1', '-W', '2', address], { reject: false });
  return r.exitCode === 0;
}
