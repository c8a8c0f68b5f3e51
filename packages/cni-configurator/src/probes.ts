// The teardown audit's cheap questions (teardown.ts asks them): after a DEL that succeeded, with
// every address known and only plugins whose marks are known, whether anything of the allocation
// is left, each question asked as soon as the plugin whose DEL it is about has exited.
import type { CallOptions, Family } from '@allocnet/iptables-node';
import { familyOf } from './address.js';
import type { ConfiguratorContext } from './context.js';
import { readReservation } from './ipam.js';
import { allocChains, firewallSpecs, hasSpec, needleOf } from './marks.js';
import type { AllocAttachment } from './types.js';

/**
 * Plugins whose marks on the node are all known (docs/cni.md, "What the plugins leave"): tagged
 * masquerade and DNAT chains, untagged firewall accept rules, host-local files; or nothing at all
 * (macvlan and ipvlan: a link inside the namespace, and their IPAM's files).
 */
const KNOWN_MARKS = new Set([
  'loopback',
  'bridge',
  'ptp',
  'macvlan',
  'ipvlan',
  'firewall',
  'portmap',
  'tuning',
  'bandwidth',
]);

/** The plugins that carry the IPAM (and, bridge and ptp, write the masquerade). */
const MAIN_TYPES = new Set(['bridge', 'ptp', 'macvlan', 'ipvlan']);

/** One of the audit's cheap questions: true when something may be left. */
interface Probe {
  /** The plugin whose DEL removes what it asks about: it may be asked once that one exited. */
  readonly after: string | undefined;
  readonly ask: () => Promise<boolean>;
}

/** What the teardown removed beside the DEL (native-del.ts). */
export interface NativeRemoved {
  /** The chains removed, as `family:chain`. */
  readonly chains: Promise<ReadonlySet<string>>;
  /** The families whose CNI-FORWARD holds nothing about the addresses any more. */
  readonly accepts: Promise<ReadonlySet<Family>>;
}

/**
 * After a DEL that succeeded, with every address known and only plugins whose marks are known
 * (docs/cni.md): whether anything of the allocation is left, asked with a few cheap questions
 * instead of reading all of iptables. A jump tagged with the allocation cannot outlive the
 * chain it jumps to (iptables refuses to delete a referenced chain), so the existence of
 * `CNI-<h>` and `CNI-DN-<h>` answers for every tagged rule; the firewall's untagged rules are
 * asked for by address; the reservations by file: far cheaper than an iptables-save on a node
 * with many allocations (docs/performance.md). Each question names the plugin whose
 * DEL it is about (`portmap` for `CNI-DN-<h>`, `firewall` for CNI-FORWARD, the bridge or ptp
 * plugin for `CNI-<h>` and the reservation), so that teardown asks it as soon as that plugin
 * exited, while the rest of the chain still runs; a question whose plugin never reported (portmap
 * and the firewall, left out of the DEL by native-del.ts) waits for the whole DEL. A chain `native`
 * says went, or the accepts of a family it saw gone, are not asked for. Undefined when a plugin's
 * marks are unknown: then only a sweep answers.
 */
export function auditProbes(
  ctx: ConfiguratorContext,
  attachment: AllocAttachment,
  call: CallOptions,
  native: NativeRemoved,
  keepHolds = false,
): Probe[] | undefined {
  const network = ctx.snapshotNetwork(attachment);
  if (!network.plugins.every((p) => KNOWN_MARKS.has(p.type))) return undefined;
  const facts = ctx.factsOf(network);
  const chains = allocChains(network.name, attachment.allocId);
  // The masquerade chain and the reservation are the main plugin's (bridge or ptp, with its
  // IPAM): asked once it exited, while the plugins before it in the chain (loopback) still run.
  const main = network.plugins.find((p) => MAIN_TYPES.has(p.type))?.type;
  const probes: Probe[] = [];
  const families = new Set(
    attachment.addresses.map(familyOf).filter((f): f is Family => f !== undefined),
  );
  for (const family of families) {
    const ipt = ctx.iptables[family];
    // A chain removed beside the DEL is gone: nothing makes it again while this teardown runs.
    const exists = async (chain: string) =>
      !(await native.chains).has(`${family}:${chain}`) && ipt.chainExists('nat', chain, call);
    // macvlan and ipvlan write no masquerade: only bridge's and ptp's chain is asked for.
    if (main === 'bridge' || main === 'ptp')
      probes.push({ after: main, ask: () => exists(chains.masq) });
    probes.push({ after: 'portmap', ask: () => exists(chains.dnat) });
    if (facts.firewallAdminChain !== undefined) {
      const specs = attachment.addresses
        .filter((a) => familyOf(a) === family)
        .flatMap((address) => firewallSpecs(address, family));
      probes.push({
        after: 'firewall',
        ask: async () => {
          // Removed beside the DEL, and the removal saw nothing about the addresses left.
          if ((await native.accepts).has(family)) return false;
          // First over netlink: when nf_tables holds CNI-FORWARD and none of its rules holds
          // the addresses' bytes, none of the specs is left (no exec, whatever the size of the
          // ruleset: issue 30). A chain nf_tables does not hold may be iptables-legacy's.
          const needles = specs.flatMap((spec) => needleOf(spec) ?? []);
          const [searched] =
            (await ipt.searchRules?.([{ table: 'filter', chain: 'CNI-FORWARD', needles }])) ?? [];
          if (searched?.exists === true && !searched.found.some(Boolean)) return false;
          // Else one read of CNI-FORWARD, shared by concurrent teardowns, begun after this DEL.
          const rules = await ctx.readChain(family, 'filter', 'CNI-FORWARD', call);
          return specs.some((spec) => hasSpec(rules ?? [], spec));
        },
      });
    }
  }
  if (facts.ipamDir !== undefined) {
    const dir = facts.ipamDir;
    for (const address of attachment.addresses)
      probes.push({
        after: main,
        ask: () =>
          readReservation(network.name, dir, address).then(
            (r) => r?.allocId === attachment.allocId && !(keepHolds && r.hold),
          ),
      });
  }
  return probes;
}

/**
 * Asks each probe once its plugin has exited (`pluginDone`) or at the end (`rest`); `answer`
 * is true when any says something may be left. A probe that fails counts as "may be left".
 */
export function probeRunner(probes: readonly Probe[] | undefined) {
  const asked = new Map<Probe, Promise<boolean>>();
  const ask = (p: Probe) => {
    if (!asked.has(p))
      asked.set(
        p,
        p.ask().catch(() => true),
      );
  };
  return {
    pluginDone: (type: string) => {
      for (const p of probes ?? []) if (p.after === type) ask(p);
    },
    async answer(): Promise<boolean | undefined> {
      if (probes === undefined) return undefined;
      for (const p of probes) ask(p);
      return (await Promise.all(asked.values())).some((found) => found);
    },
  };
}
