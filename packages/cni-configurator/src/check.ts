import ipaddr from 'ipaddr.js';
import type { Family, Rule } from '@allocnet/iptables-node';
import { allocChains } from './sweep.js';
import type { AllocAttachment } from './types.js';

function option(rule: Rule, name: string): string | undefined {
  return rule.matches.flatMap((m) => m.options).find((o) => o.option === name)?.values[0];
}

/** The rules of one nat chain, or undefined when the chain does not exist. */
export type ReadNatChain = (family: Family, chain: string) => Promise<readonly Rule[] | undefined>;

/**
 * Checks portmap's rules for an allocation against iptables (portmap's own CHECK is broken in
 * 1.1.1): per address family the allocation has, the `CNI-DN-<h>` chain, a jump to it from
 * CNI-HOSTPORT-DNAT, and a DNAT rule per mapping to the allocation's address. Reads only those two
 * chains (`iptables -S <chain>`), not the whole table. Returns what is wrong, or undefined.
 */
export async function checkPortMappings(
  attachment: AllocAttachment,
  readChain: ReadNatChain,
): Promise<string | undefined> {
  const { dnat } = allocChains(attachment.network.name, attachment.allocId);
  for (const family of ['ipv4', 'ipv6'] as const) {
    const address = attachment.addresses.find(
      (a) => ipaddr.isValid(a) && (ipaddr.parse(a).kind() === 'ipv6') === (family === 'ipv6'),
    );
    if (address === undefined) continue;
    const mappings = attachment.portMappings.filter(
      (m) =>
        m.hostIP === undefined ||
        (ipaddr.parse(m.hostIP).kind() === 'ipv6') === (family === 'ipv6'),
    );
    if (mappings.length === 0) continue;
    const [rules, jumps] = await Promise.all([
      readChain(family, dnat),
      readChain(family, 'CNI-HOSTPORT-DNAT'),
    ]);
    if (rules === undefined) return `portmap's chain ${dnat} is missing (${family})`;
    if (!(jumps ?? []).some((r) => r.target?.name === dnat))
      return `nothing in CNI-HOSTPORT-DNAT jumps to ${dnat} (${family})`;
    for (const m of mappings) {
      const to =
        family === 'ipv4' ? `${address}:${m.containerPort}` : `[${address}]:${m.containerPort}`;
      const found = rules.some(
        (r) =>
          r.target?.name === 'DNAT' &&
          r.target.options.find((o) => o.option === '--to-destination')?.values[0] === to &&
          option(r, '--dport') === String(m.hostPort) &&
          option(r, '-p') === m.protocol,
      );
      if (!found)
        return `no DNAT rule for host port ${m.hostPort}/${m.protocol} to ${to} in ${dnat} (${family})`;
    }
  }
  return undefined;
}
