// What a teardown removes itself instead of exec'ing plugins for it: the allocation's masquerade
// chain (bridge or ptp with ipMasq) and portmap's DNAT chain, each with the jumps to it, beside the
// plugins' DEL (portmap left out, the main plugin told ipMasq false); and the firewall's two accept
// rules per address in CNI-FORWARD (firewall left out), before it.
//
// Why: those plugins remove that state one iptables exec at a time, and nf_tables makes each exec
// read the ruleset. portmap 1.1.1's DEL runs 18 of them (both families, whatever the allocation
// had), the bridge's masquerade teardown 6, the firewall's DEL 4 (two `--version`, two `-D`): most
// of a DEL on an empty node, and more the fuller the node (docs/cni.md). Here, under nf_tables: a
// netlink dump of each chain and one transaction by rule handle (`removeJumped`,
// `removeAccepts`); otherwise chain reads (shared with concurrent teardowns) and one restore. What
// they remove is what the plugins' DEL removes, nothing else (docs/cni.md, "What the plugins
// leave"): portmap's DEL deletes the `CNI-DN-<h>` chain and its jumps in CNI-HOSTPORT-DNAT (its
// shared chains stay); the masquerade teardown deletes the POSTROUTING jump and the `CNI-<h>`
// chain; the firewall's DEL deletes, per address of the result, the first of each of its two
// accepts (`iptables -D`). The chains do not depend on prevResult or on the container's
// namespace; the accepts are the recorded addresses' (the ADD's result, which the cache gives the
// plugin as prevResult).
//
// The accepts go before the address is released, which a setup may then give to another
// allocation and write accepts for: before the DEL when its main plugin releases it, as the
// plugins' reverse order has it; beside the DEL when the teardown releases it after that plugin
// exited (native-release.ts), the release then waiting for them (teardown.ts).
//
// Only for plugins whose state is known to be that: portmap without a `backend` other than
// iptables, bridge and ptp with `ipMasq` and no `ipMasqBackend` other than iptables, a firewall
// the setup writes itself (`nativePlugins`: iptables backend, options it knows). A chain no jump
// leads to (an ADD that crashed between making it and jumping to it) is left to the audit, as is
// everything when a removal fails: the audit's questions then find it and sweep.
import ipaddr from 'ipaddr.js';
import type { NetworkConfig, PluginConfig } from '@allocnet/cni';
import { createBatch, isIptablesError } from '@allocnet/iptables-node';
import type { CallOptions, Family } from '@allocnet/iptables-node';
import { familyOf } from './address.js';
import type { ConfiguratorContext } from './context.js';
import { messageOf } from './errors.js';
import { allocChains, firewallSpecs, specKey } from './marks.js';
import { nativePlugins } from './native-rules.js';
import type { AllocAttachment } from './types.js';

export interface NativeDel {
  /**
   * The chain the plugins' DEL runs: without portmap and the firewall when they are removed here,
   * the main plugin with ipMasq false.
   */
  readonly network: NetworkConfig;
  /** Removes the chains; resolves the ones it removed. Never throws: what stays is the audit's. */
  remove(call: CallOptions): Promise<ReadonlySet<string>>;
  /**
   * Removes the firewall's accepts of the addresses (when the firewall is left out of `network`),
   * to be ended before the addresses are released; resolves the families with nothing about the
   * addresses left (`removeFirewallAccepts`). Never throws: what stays is the audit's.
   */
  unaccept(call: CallOptions): Promise<ReadonlySet<Family>>;
}

const iptablesBackend = (value: unknown) => value === undefined || value === 'iptables';

const portmapHandled = (p: PluginConfig) => p.type === 'portmap' && iptablesBackend(p.raw.backend);

/** bridge or ptp with a masquerade on iptables: its rules are `masqueradeOf`'s. */
export const masqHandled = (p: PluginConfig) =>
  (p.type === 'bridge' || p.type === 'ptp') &&
  p.raw.ipMasq === true &&
  iptablesBackend(p.raw.ipMasqBackend);

/** The chains to remove, where their jumps are; undefined when the network has none of them. */
function targets(network: NetworkConfig, allocId: string) {
  const chains = allocChains(network.name, allocId);
  const out: { chain: string; from: string }[] = [];
  if (network.plugins.some(masqHandled)) out.push({ chain: chains.masq, from: 'POSTROUTING' });
  if (network.plugins.some(portmapHandled))
    out.push({ chain: chains.dnat, from: 'CNI-HOSTPORT-DNAT' });
  return out;
}

/**
 * Removes the firewall plugin's accepts of `addresses` from CNI-FORWARD, as its DEL does: per
 * family over netlink (`removeAccepts`), else by spec (a read of the chain and one restore).
 * Resolves the families whose CNI-FORWARD the netlink removal saw left with no rule about the
 * addresses (the audit need not read it again). Throws when a removal fails.
 */
export async function removeFirewallAccepts(
  ctx: ConfiguratorContext,
  addresses: readonly string[],
  call: CallOptions,
): Promise<ReadonlySet<Family>> {
  const families = new Set(addresses.map(familyOf).filter((f): f is Family => f !== undefined));
  const gone = new Set<Family>();
  await Promise.all(
    [...families].map(async (family) => {
      const own = addresses.filter((a) => familyOf(a) === family);
      const ipt = ctx.iptables[family];
      const bytes = own.map((a) => Buffer.from(ipaddr.parse(a).toByteArray()));
      const removal = { table: 'filter' as const, chain: 'CNI-FORWARD', addresses: bytes };
      const removed = await ipt.removeAccepts?.(removal, call);
      if (removed?.left === 0) gone.add(family);
      if (removed !== undefined) return;
      const wanted = new Set(own.flatMap((a) => firewallSpecs(a, family).map(specKey)));
      let rules;
      try {
        rules = await ipt.listRules('filter', 'CNI-FORWARD', call);
      } catch (error) {
        if (isIptablesError(error) && error.code === 'not-found') return;
        throw error;
      }
      const batch = createBatch();
      for (const rule of rules) if (wanted.delete(specKey(rule.spec))) batch.deleteRule(rule);
      if (batch.size > 0) await ipt.restore(batch, call);
    }),
  );
  return gone;
}

export function nativeDel(
  ctx: ConfiguratorContext,
  network: NetworkConfig,
  attachment: Pick<AllocAttachment, 'allocId' | 'addresses'>,
): NativeDel | undefined {
  const wanted = targets(network, attachment.allocId);
  const firewall = nativePlugins(network).firewall !== undefined;
  if (wanted.length === 0 && !firewall) return undefined;
  const families = new Set(
    attachment.addresses.map(familyOf).filter((f): f is Family => f !== undefined),
  );
  const plugins = network.plugins
    .filter((p) => !portmapHandled(p) && !(firewall && p.type === 'firewall'))
    .map((p) => (masqHandled(p) ? { ...p, raw: { ...p.raw, ipMasq: false } } : p));

  async function removeIn(family: Family, call: CallOptions): Promise<readonly string[]> {
    if (wanted.length === 0) return [];
    // Over nf_tables netlink: the jumps found in a dump of each shared chain and removed by
    // handle, with the chains, in one transaction; no iptables process (`-S` of a shared chain
    // reads all of it: 121 ms for CNI-HOSTPORT-DNAT at 1,000 live).
    const jumped = await ctx.iptables[family].removeJumped?.(
      wanted.map(({ chain, from }) => ({ table: 'nat', from, chain })),
      call,
    );
    if (jumped !== undefined) return jumped;
    const listed = await Promise.all(
      wanted.map(({ from }) => ctx.readChain(family, 'nat', from, call)),
    );
    const batch = createBatch();
    const removed: string[] = [];
    wanted.forEach(({ chain }, i) => {
      const jumps = (listed[i] ?? []).filter((r) => r.target?.name === chain);
      if (jumps.length === 0) return;
      for (const rule of jumps) batch.deleteRule(rule);
      removed.push(chain);
    });
    for (const chain of removed) batch.clearChain('nat', chain);
    for (const chain of removed) batch.deleteChain('nat', chain);
    if (batch.size > 0) await ctx.iptables[family].restore(batch, call);
    return removed;
  }

  return {
    network: { ...network, plugins },
    async remove(call) {
      const removed = new Set<string>();
      await Promise.all(
        [...families].map(async (family) => {
          try {
            for (const chain of await removeIn(family, call)) removed.add(`${family}:${chain}`);
          } catch (error) {
            ctx.logger.warn(
              'removing the allocation’s masquerade and DNAT chains failed; the audit removes them',
              {
                allocId: attachment.allocId,
                family,
                error: messageOf(error),
              },
            );
          }
        }),
      );
      return removed;
    },
    async unaccept(call) {
      if (!firewall) return new Set();
      try {
        return await removeFirewallAccepts(ctx, attachment.addresses, call);
      } catch (error) {
        ctx.logger.warn(
          'removing the allocation’s firewall accepts failed; the audit removes them',
          {
            allocId: attachment.allocId,
            error: messageOf(error),
          },
        );
        return new Set();
      }
    },
  };
}
