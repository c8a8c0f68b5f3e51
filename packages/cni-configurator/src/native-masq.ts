// What a setup writes itself instead of the main plugin: the allocation's masquerade (bridge or
// ptp with ipMasq), in one iptables-restore per family, begun as soon as the main plugin's result
// gives the addresses and run beside the rest of the chain (the firewall and portmap). The
// plugins' ADD runs with ipMasq false.
//
// Why: bridge 1.1.1 writes its masquerade with 9 iptables execs per address (`--version`, `-S`,
// `-N`, then `-C` and `-A` for each rule), each reading the ruleset under nf_tables: most of its
// ADD, on the setup's critical path (docs/cni.md). What is written is what the plugin writes, rule for rule (`masqueradeOf` in marks.ts;
// the integration test compares it with the plugin's own): the chain is declared (made, or
// emptied when it exists, so that its rules are written once, as the plugin's unique appends
// do), then its rules and the POSTROUTING jump.
//
// The CNI cache and the ADD intent keep the network as configured (ipMasq true): a DEL from them,
// by allocnet or any other CNI runtime, un-masquerades as the plugin would. A failed ADD's undo
// runs without the masquerade teardown, so the setup removes what it wrote (native-del.ts).
import type { CniResult, NetworkConfig } from '@allocnet/cni';
import { createBatch } from '@allocnet/iptables-node';
import type { CallOptions, Family } from '@allocnet/iptables-node';
import type { ConfiguratorContext } from './context.js';
import { masqueradeComment, masqueradeOf, specKey } from './marks.js';
import { masqHandled } from './native-del.js';

export interface NativeMasquerade {
  /** The chain the plugins' ADD runs: the main plugin with ipMasq false. */
  readonly network: NetworkConfig;
  /** The main plugin's type: its result carries the addresses. */
  readonly mainType: string;
  /** Writes the masquerade of the result's addresses; all or nothing per family. */
  write(result: CniResult, call: CallOptions): Promise<void>;
}

export function nativeMasquerade(
  ctx: ConfiguratorContext,
  network: NetworkConfig,
  allocId: string,
): NativeMasquerade | undefined {
  const mains = network.plugins.filter(masqHandled);
  const main = mains[0];
  if (main === undefined || mains.length > 1) return undefined;
  if (masqueradeComment(network.name, allocId) === undefined) return undefined;
  return {
    network: {
      ...network,
      plugins: network.plugins.map((p) =>
        p === main ? { ...p, raw: { ...p.raw, ipMasq: false } } : p,
      ),
    },
    mainType: main.type,
    async write(result, call) {
      const batches = new Map<Family, ReturnType<typeof createBatch>>();
      const written = new Set<string>();
      // In the plugin's order: per address, its ACCEPT, the MASQUERADE, its jump, each once.
      for (const ip of result.ips) {
        const masq = masqueradeOf(network.name, allocId, ip.address);
        if (masq === undefined) continue;
        const { family } = masq;
        let batch = batches.get(family);
        if (batch === undefined) {
          batch = createBatch().declareChain('nat', masq.chain);
          batches.set(family, batch);
        }
        for (const [chain, spec] of [
          ...masq.rules.map((r) => [masq.chain, r] as const),
          ['POSTROUTING', masq.jump] as const,
        ]) {
          const key = `${family} ${chain} ${specKey(spec)}`;
          if (written.has(key)) continue;
          written.add(key);
          batch.append('nat', chain, spec);
        }
      }
      await Promise.all(
        [...batches].map(([family, batch]) => ctx.iptables[family].restore(batch, call)),
      );
    },
  };
}
