import { createCniCache } from '@allocnet/cni';
import type { Family } from '@allocnet/iptables-node';
import type { NodeKernel } from '../node.js';
import type {
  AddResult,
  Attachment,
  CniRuntime,
  NetworkConfig,
  NetworkVersions,
} from '@allocnet/cni';

/** One call the fake runtime saw. */
export interface RuntimeCall {
  readonly verb: 'ADD' | 'CHECK' | 'DEL';
  readonly network: string;
  /** The plugins the call ran, as their objects in the config (what each one's stdin holds). */
  readonly plugins: readonly Readonly<Record<string, unknown>>[];
  readonly attachment: Attachment;
}

export type RuntimeAnswer = AddResult | Error;

/** A recording `CniRuntime`: records ADD, CHECK and DEL, answers ADD from a queue. */
export interface FakeRuntime extends CniRuntime {
  readonly calls: readonly RuntimeCall[];
  /** Queues answers for ADD (an Error is thrown); an empty queue answers `addResult()`. */
  answerAdd(...answers: RuntimeAnswer[]): this;
  /** Queues answers for DEL (an Error is thrown, undefined succeeds). */
  answerDel(...answers: (Error | undefined)[]): this;
  /** Queues answers for CHECK. */
  answerCheck(...answers: (Error | undefined)[]): this;
}

/** A 1.0.0 result as the bridge chain gives it: the bridge, the host veth, eth0 in the sandbox. */
export function addResult(
  address = '172.26.64.2/20',
  options: { readonly sandbox?: string; readonly ipv6?: string } = {},
): AddResult {
  const ips = [{ address, gateway: '172.26.64.1', interface: 2 }];
  if (options.ipv6 !== undefined)
    ips.push({ address: options.ipv6, gateway: 'fd00::1', interface: 2 });
  const result = {
    cniVersion: '1.0.0',
    interfaces: [
      { name: 'nomad', mac: '02:00:00:00:00:01' },
      { name: 'veth0abc', mac: '02:00:00:00:00:02' },
      { name: 'eth0', mac: '02:00:00:00:00:03', sandbox: options.sandbox ?? '/run/netns/x' },
    ],
    ips,
    routes: [{ dst: '0.0.0.0/0' }],
    dns: {},
  };
  return { cniVersion: '1.0.0', result, json: result };
}

/**
 * A fake runtime for unit tests of policy; `cacheDir` backs its `cache` (the configurator's sweep
 * reads and removes cache files through it).
 */
export function createFakeRuntime(cacheDir: string): FakeRuntime {
  const calls: RuntimeCall[] = [];
  const adds: RuntimeAnswer[] = [];
  const dels: (Error | undefined)[] = [];
  const checks: (Error | undefined)[] = [];
  const record = (verb: RuntimeCall['verb'], network: NetworkConfig, attachment: Attachment) =>
    calls.push({
      verb,
      network: network.name,
      plugins: network.plugins.map((p) => p.raw),
      attachment,
    });
  const none = (): Promise<never> => Promise.reject(new Error('not used by the configurator'));
  return {
    calls,
    pluginDirs: ['/usr/lib/cni'],
    cache: createCniCache(cacheDir),
    answerAdd(...answers) {
      adds.push(...answers);
      return this;
    },
    answerDel(...answers) {
      dels.push(...answers);
      return this;
    },
    answerCheck(...answers) {
      checks.push(...answers);
      return this;
    },
    add(network, attachment, call) {
      record('ADD', network, attachment);
      const next = adds.shift() ?? addResult();
      if (next instanceof Error) return Promise.reject(next);
      // Every plugin "answers" the final result, in chain order.
      for (const plugin of network.plugins) call?.onPluginResult?.(plugin.type, next.result);
      return Promise.resolve(next);
    },
    del(network, attachment, call) {
      record('DEL', network, attachment);
      const next = dels.shift();
      if (next !== undefined) return Promise.reject(next);
      // As the real runtime does: each plugin, in reverse, once it has exited 0.
      for (const plugin of [...network.plugins].reverse()) call?.onPluginDone?.(plugin.type);
      return Promise.resolve();
    },
    check(network, attachment) {
      record('CHECK', network, attachment);
      const next = checks.shift();
      return next === undefined ? Promise.resolve({ ran: true }) : Promise.reject(next);
    },
    status: none,
    gc: none,
    versions: (): Promise<NetworkVersions> => none(),
    pendingAdds: async function () {
      return this.cache.listAdding();
    },
    async undoPendingAdd(entry) {
      const attachment: Attachment = {
        containerId: entry.containerId,
        netns: entry.netns ?? '',
        ifName: entry.ifName,
        args: entry.cniArgs,
        capabilityArgs: entry.capabilityArgs,
      };
      const plugins = (JSON.parse(entry.config) as { plugins?: Record<string, unknown>[] }).plugins;
      calls.push({ verb: 'DEL', network: entry.networkName, plugins: plugins ?? [], attachment });
      const next = dels.shift();
      if (next !== undefined) throw next;
      await this.cache.removeResult(entry.networkName, entry.containerId, entry.ifName);
      await this.cache.clearAdding(entry.networkName, entry.containerId, entry.ifName);
    },
  };
}

export { addPluginShapes } from './shapes.js';
export type { PluginShapes } from './shapes.js';

export {
  LEAK_NETWORK,
  LEAK_SHAPES,
  LINES_PER_LEAK,
  addLeaks,
  leakId,
  leakIp,
  leakPort,
  sharedChains,
} from './leaks.js';
export type { LeakShape } from './leaks.js';

export { healthyKernel } from './kernel.js';
export type { FakeKernel } from './kernel.js';
/** What `recordingNode` records: a sysctl set (in an allocation's `netns`, when given), a UDP forget. */
export type NodeCall =
  | { sysctl: string; value: string; netns?: string }
  | { forgetUdp: Family; ports: readonly number[] };

/**
 * A `NodeKernel` that records what a setup would change in the kernel, and changes nothing; the
 * sysctls of allocations' namespaces are kept (each starts at '0') so that a swap answers the
 * value before it.
 */
export function recordingNode(): { node: NodeKernel; calls: NodeCall[] } {
  const calls: NodeCall[] = [];
  const sysctlsIn = new Map<string, string>();
  return {
    calls,
    node: {
      setSysctl(name, value) {
        calls.push({ sysctl: name, value });
        return Promise.resolve();
      },
      forgetUdpFlows(family, ports) {
        calls.push({ forgetUdp: family, ports: [...ports] });
        return Promise.resolve();
      },
      swapSysctlIn(netns, name, value) {
        const key = `${netns}:${name}`;
        const before = sysctlsIn.get(key) ?? '0';
        sysctlsIn.set(key, value);
        calls.push({ sysctl: name, value, netns });
        return Promise.resolve(before);
      },
    },
  };
}
