// CHECK: the plugins' CHECK with exactly what the ADD used, except for the plugins checked here
// instead: portmap's and the firewall's rules (portmap's CHECK is broken in 1.1.1; the firewall's
// reads the whole ruleset six times per allocation), and loopback's and bridge's (with
// host-local) state, read through rtnetlink and host-local's files (check-plugins.ts).
//
// Concurrency: CHECKs run in parallel with each other and with every other operation (a restore
// CHECKs hundreds of allocations at once). They only read: plugins' CHECK, single chains through
// the context's batched reader (concurrent CHECKs of allocations on the same shared chains share
// one `iptables -S` per chain) or, in a batch, one save per table (check-reads.ts), and netlink
// sockets of their own. The plans cache below is filled synchronously.
import { isCniError } from '@allocnet/cni';
import type { CniResult, NetworkConfig } from '@allocnet/cni';
import { displayArgs } from '@allocnet/iptables-node';
import type { Family } from '@allocnet/iptables-node';
import { familyOf } from './address.js';
import type { ReadChain } from './chain-reader.js';
import { CouldNotCheck, checkNative, splitNative, withPlugins } from './check-plugins.js';
import type { NativeSplit } from './check-plugins.js';
import { freshReads, sharedReads } from './check-reads.js';
import type { CheckReads } from './check-reads.js';
import { callOf, cniAttachment } from './context.js';
import type { ConfiguratorContext } from './context.js';
import { ConfiguratorError, messageOf } from './errors.js';
import { allocChains, dnatDestination, firewallSpecs, hasSpec, matchOption } from './marks.js';
import { argsNeedPlugin } from './native-check.js';
import type { RouteReader } from './route-reader.js';
import { nativePlugins, portmapAddresses, portmapWrite } from './native-rules.js';
import type { NativePortmap } from './native-rules.js';
import { checkAllocId } from './spec.js';
import type { AllocAttachment, AllocNetworking, CheckBatch } from './types.js';

const FAMILIES = ['ipv4', 'ipv6'] as const;

/** CNI error codes that say a CHECK could not run, rather than that it found the network broken. */
const CHECK_COULD_NOT_RUN = new Set([
  'spawn',
  'timeout',
  'aborted',
  'plugin-not-found',
  'invalid-config',
  'no-common-version',
  'incompatible-version',
  'check-not-supported',
  'cache',
  'not-added',
]);

function addressesOf(attachment: AllocAttachment, family: Family): string[] {
  return attachment.addresses.filter((a) => familyOf(a) === family);
}

/**
 * Checks portmap's rules for an allocation against iptables (portmap's own CHECK is broken in
 * 1.1.1): per address family the allocation has, the `CNI-DN-<h>` chain, a jump to it from
 * CNI-HOSTPORT-DNAT, and a DNAT rule per mapping to the allocation's address. Returns what is
 * wrong, or undefined.
 */
export async function checkPortMappings(
  attachment: AllocAttachment,
  read: ReadChain,
  call: { readonly signal?: AbortSignal },
  native?: NativePortmap,
): Promise<string | undefined> {
  if (attachment.portMappings.length === 0) return undefined;
  if (native !== undefined && attachment.result !== undefined)
    return checkNativePortmap(attachment, attachment.result, native, read, call);
  const { dnat } = allocChains(attachment.network.name, attachment.allocId);
  for (const family of FAMILIES) {
    const address = addressesOf(attachment, family)[0];
    if (address === undefined) continue;
    const mappings = attachment.portMappings.filter(
      (m) => m.hostIP === undefined || familyOf(m.hostIP) === family,
    );
    if (mappings.length === 0) continue;
    const [rules, jumps] = await Promise.all([
      read(family, 'nat', dnat, call),
      read(family, 'nat', 'CNI-HOSTPORT-DNAT', call),
    ]);
    if (rules === undefined) return `portmap's chain ${dnat} is missing (${family})`;
    if (!(jumps ?? []).some((r) => r.target?.name === dnat))
      return `nothing in CNI-HOSTPORT-DNAT jumps to ${dnat} (${family})`;
    for (const m of mappings) {
      const to =
        family === 'ipv4' ? `${address}:${m.containerPort}` : `[${address}]:${m.containerPort}`;
      const found = rules.some(
        (r) =>
          dnatDestination(r) === to &&
          matchOption(r, '--dport') === String(m.hostPort) &&
          matchOption(r, '-p') === m.protocol,
      );
      if (!found)
        return `no DNAT rule for host port ${m.hostPort}/${m.protocol} to ${to} in ${dnat} (${family})`;
    }
  }
  return undefined;
}

/**
 * Checks what the setup wrote for portmap itself (native-add.ts), rule for rule: per family
 * portmap forwards to, every rule of the `CNI-DN-<h>` chain and every jump to it in
 * CNI-HOSTPORT-DNAT (what portmap's own CHECK would look for, were it not broken).
 */
async function checkNativePortmap(
  attachment: AllocAttachment,
  result: CniResult,
  conf: NativePortmap,
  read: ReadChain,
  call: { readonly signal?: AbortSignal },
): Promise<string | undefined> {
  const { name } = attachment.network;
  for (const [family, address] of portmapAddresses(result, attachment.ifName)) {
    const w = portmapWrite(name, attachment.allocId, attachment.portMappings, address, conf);
    const [rules, jumps] = await Promise.all([
      read(family, 'nat', w.chain, call),
      read(family, 'nat', 'CNI-HOSTPORT-DNAT', call),
    ]);
    if (rules === undefined) return `portmap's chain ${w.chain} is missing (${family})`;
    for (const [chain, listed, specs] of [
      [w.chain, rules, w.rules],
      ['CNI-HOSTPORT-DNAT', jumps ?? [], w.entries],
    ] as const)
      for (const spec of specs)
        if (!hasSpec(listed, spec))
          return `a portmap rule is missing (${family}): -A ${chain} ${displayArgs(spec)}`;
  }
  return undefined;
}

/** The jump the firewall plugin (iptables backend) puts first in FORWARD. */
const FORWARD_JUMP = [
  '-m',
  'comment',
  '--comment',
  'CNI firewall plugin rules',
  '-j',
  'CNI-FORWARD',
];

function adminJump(adminChain: string): string[] {
  return ['-m', 'comment', '--comment', 'CNI firewall plugin admin overrides', '-j', adminChain];
}

/**
 * Checks the firewall plugin's iptables rules for an allocation, the facts its own CHECK
 * (1.1.1, iptables backend) verifies: per address family the allocation has, the CNI-FORWARD and
 * admin chains, FORWARD's jump to CNI-FORWARD, CNI-FORWARD's jump to the admin chain, and the two
 * accept rules per address. Unlike the plugin's CHECK, a missing chain is reported, not created.
 * Returns what is wrong, or undefined.
 */
export async function checkFirewall(
  attachment: AllocAttachment,
  adminChain: string,
  read: ReadChain,
  call: { readonly signal?: AbortSignal },
): Promise<string | undefined> {
  const forward = 'CNI-FORWARD';
  for (const family of FAMILIES) {
    const addresses = addressesOf(attachment, family);
    if (addresses.length === 0) continue;
    const chains = ['FORWARD', forward, adminChain];
    const listed = await Promise.all(chains.map((c) => read(family, 'filter', c, call)));
    const rules = new Map(chains.map((c, i) => [c, listed[i]]));
    for (const chain of chains)
      if (rules.get(chain) === undefined)
        return `the firewall's chain ${chain} is missing (${family})`;
    const rulesOf = (chain: string) => rules.get(chain) ?? [];
    const expect: [string, readonly string[]][] = [
      ['FORWARD', FORWARD_JUMP],
      [forward, adminJump(adminChain)],
      ...addresses.flatMap((a) =>
        firewallSpecs(a, family).map((spec): [string, string[]] => [forward, spec]),
      ),
    ];
    for (const [chain, spec] of expect)
      if (!hasSpec(rulesOf(chain), spec))
        return `a firewall rule is missing (${family}): -A ${chain} ${spec.map((w) => (/\s/.test(w) ? JSON.stringify(w) : w)).join(' ')}`;
  }
  return undefined;
}

/** A plugin of the chain whose CHECK the configurator does itself. */
export type CheckedHere =
  | { readonly type: 'portmap'; readonly native?: NativePortmap }
  | { readonly type: 'firewall'; readonly adminChain: string };

/**
 * The chain CHECK runs (the network without the plugins checked here) and those plugins: portmap
 * always; the firewall when it uses the iptables backend (named: with no backend it may pick
 * firewalld) and no ingress policy beyond the default `open` (whose isolation chains its CHECK
 * does not look at either, but which this code does not know).
 */
export function checkChainOf(network: NetworkConfig): {
  readonly chain: NetworkConfig;
  readonly checkedHere: readonly CheckedHere[];
} {
  const checkedHere: CheckedHere[] = [];
  // A portmap the setup writes itself is checked rule for rule; any other by its DNAT rules.
  const { portmap } = nativePlugins(network);
  const kept = network.plugins.filter((p) => {
    if (p.type === 'portmap') {
      checkedHere.push(
        portmap === undefined ? { type: 'portmap' } : { type: 'portmap', native: portmap },
      );
      return false;
    }
    const ingress = p.raw.ingressPolicy;
    if (
      p.type === 'firewall' &&
      p.raw.backend === 'iptables' &&
      (ingress === undefined || ingress === '' || ingress === 'open')
    ) {
      const admin = p.raw.iptablesAdminChainName;
      checkedHere.push({
        type: 'firewall',
        adminChain: typeof admin === 'string' && admin !== '' ? admin : 'CNI-ADMIN',
      });
      return false;
    }
    return true;
  });
  if (checkedHere.length === 0) return { chain: network, checkedHere };
  return { chain: withPlugins(network, kept), checkedHere };
}

/** The CHECK's error for what `error` says, with `where` first. */
function checkError(
  where: string,
  attachment: AllocAttachment,
  network: NetworkConfig,
  error: unknown,
  call: { readonly signal?: AbortSignal },
): ConfiguratorError {
  // A plugin that did not start, timed out, or cannot run this config did not find the network
  // broken: that is `unavailable` (or `aborted`), not `check-failed`; so is a read that failed.
  const couldNotRun =
    !isCniError(error) || CHECK_COULD_NOT_RUN.has(error.code) || call.signal?.aborted === true;
  const aborted = call.signal?.aborted === true || (isCniError(error) && error.code === 'aborted');
  return new ConfiguratorError(
    `${where} ${couldNotRun ? 'could not run' : 'failed'}: ${messageOf(error)}`,
    {
      code: aborted ? 'aborted' : couldNotRun ? 'unavailable' : 'check-failed',
      allocId: attachment.allocId,
      network: network.name,
      cause: error,
    },
  );
}

/** What CHECK runs of a network: the plugins' chain, and what is checked here instead. */
interface CheckPlan {
  readonly chain: NativeSplit['chain'];
  readonly native: NativeSplit['native'];
  readonly checkedHere: readonly CheckedHere[];
}

/**
 * The CHECK operation. The plugins checked here (portmap, the firewall: checkChainOf; loopback,
 * bridge with host-local: check-plugins.ts) are removed from the chain the plugins' CHECK runs;
 * their state is read and compared here. A plugin that did not start, timed out or cannot run
 * this config, and state that could not be read, are `unavailable` (it found nothing broken),
 * not `check-failed`. CHECKs given one `checkBatch()` share their iptables and host-local reads
 * (check-reads.ts).
 */
export function createCheck(
  ctx: ConfiguratorContext,
  routes: RouteReader,
): Pick<AllocNetworking, 'check' | 'checkBatch'> {
  /** The plan per config and whether CNI_ARGS ask for an address; once per config. */
  const plans = new Map<string, CheckPlan>();
  function planFor(network: NetworkConfig, attachment: AllocAttachment): CheckPlan {
    const key = `${argsNeedPlugin(attachment.args) ? 'args' : '-'}:${network.bytes}`;
    let found = plans.get(key);
    if (found === undefined) {
      const { chain, checkedHere } = checkChainOf(network);
      found = { ...splitNative(chain, attachment.args), checkedHere };
      if (plans.size > 64) plans.clear();
      plans.set(key, found);
    }
    return found;
  }
  const batches = new WeakMap<CheckBatch, CheckReads>();

  return {
    checkBatch() {
      const batch: CheckBatch = Object.freeze({ kind: 'check-batch' as const });
      batches.set(batch, sharedReads(ctx.iptables));
      return batch;
    },

    async check(attachment, opts) {
      const call = callOf(opts);
      checkAllocId(attachment.allocId, 'attachment.allocId');
      const network = ctx.snapshotNetwork(attachment);
      const where = `CHECK of ${JSON.stringify(attachment.allocId)} in network ${JSON.stringify(network.name)}`;
      const reads =
        (opts?.batch === undefined ? undefined : batches.get(opts.batch)) ??
        freshReads(ctx.readChain);
      // portmap 1.1.1's CHECK is broken (it checks IPv6 DNAT for IPv4-only containers and the
      // IPv4 rules in ip6tables: containernetworking/plugins#819), and the firewall's asks
      // iptables six times per allocation, each call reading the whole ruleset, which grows with
      // the allocations on the node: their rules are checked here against one batched read of
      // iptables (see checkPortMappings, checkFirewall). loopback's and bridge's CHECK are a
      // process each (and host-local's a third, reading every reservation file of the network):
      // what they verify is read here through rtnetlink (check-plugins.ts).
      const { chain, native, checkedHere } = planFor(network, attachment);
      let ran: boolean;
      try {
        ({ ran } =
          chain === undefined
            ? { ran: !network.disableCheck }
            : await ctx.runtime.check(chain, cniAttachment(attachment), call));
      } catch (error) {
        throw checkError(where, attachment, network, error, call);
      }
      if (!ran) return { ran };
      let problem: string | undefined;
      try {
        problem = await checkNative(ctx, network, attachment, native, reads, routes);
        if (problem === undefined && checkedHere.length > 0) {
          const found = await Promise.all(
            checkedHere.map((c) =>
              c.type === 'portmap'
                ? checkPortMappings(attachment, reads.readChain, call, c.native)
                : checkFirewall(attachment, c.adminChain, reads.readChain, call),
            ),
          );
          problem = found.find((p) => p !== undefined);
        }
      } catch (error) {
        const what = error instanceof CouldNotCheck ? '' : 'reading iptables: ';
        const aborted = call.signal?.aborted === true;
        throw new ConfiguratorError(`${where} could not run: ${what}${messageOf(error)}`, {
          code: aborted ? 'aborted' : 'unavailable',
          allocId: attachment.allocId,
          network: network.name,
          cause: error,
        });
      }
      if (problem !== undefined)
        throw new ConfiguratorError(`${where} failed: ${problem}`, {
          code: 'check-failed',
          allocId: attachment.allocId,
          network: network.name,
        });
      return { ran };
    },
  };
}
