// One allocation's iptables state in exactly the shapes the Debian plugins (1.1.1) write it.
import { addBridgeMasquerade } from '@allocnet/iptables-node/testing';
import type { IptablesBatch } from '@allocnet/iptables-node';
import { allocChains } from '../marks.js';

/** One allocation's state in exactly the shapes the Debian plugins (1.1.1) write it. */
export interface PluginShapes {
  readonly network: string;
  readonly allocId: string;
  /** IPv4 address, no prefix length. */
  readonly ip: string;
  readonly subnet?: string;
  /** Host port → container port, as tcp and udp (portmap). */
  readonly ports?: readonly { readonly host: number; readonly container: number }[];
  /** Also the firewall plugin's accept rules (they stay when DEL ran without the cached result). */
  readonly firewall?: boolean;
}

/**
 * Adds to `batch` the nat (and filter) state one allocation of the bridge chain leaves: bridge's
 * masquerade chain and jump, portmap's CNI-DN chain and its tagged jumps, the firewall's accept
 * rules. The shared chains (CNI-HOSTPORT-DNAT, CNI-HOSTPORT-SETMARK, CNI-FORWARD) must exist.
 */
export function addPluginShapes(batch: IptablesBatch, s: PluginShapes): IptablesBatch {
  const subnet = s.subnet ?? '172.26.64.0/20';
  addBridgeMasquerade(batch, { network: s.network, id: s.allocId, ip: s.ip, subnet });
  const ports = s.ports ?? [];
  if (ports.length > 0) {
    const { dnat } = allocChains(s.network, s.allocId);
    batch.newChain('nat', dnat);
    for (const protocol of ['tcp', 'udp'] as const) {
      for (const p of ports) {
        const match = ['-p', protocol, '-m', protocol, '--dport', String(p.host)];
        batch.append('nat', dnat, ['-s', subnet, ...match, '-j', 'CNI-HOSTPORT-SETMARK']);
        batch.append('nat', dnat, ['-s', '127.0.0.1/32', ...match, '-j', 'CNI-HOSTPORT-SETMARK']);
        batch.append('nat', dnat, [
          ...match,
          '-j',
          'DNAT',
          '--to-destination',
          `${s.ip}:${p.container}`,
        ]);
      }
      batch.append('nat', 'CNI-HOSTPORT-DNAT', [
        '-p', protocol, '-m', 'comment', '--comment', `dnat name: "${s.network}" id: "${s.allocId}"`,
        '-m', 'multiport', '--dports', ports.map((p) => p.host).join(','), '-j', dnat,
      ]); // prettier-ignore
    }
  }
  if (s.firewall === true) {
    batch.append('filter', 'CNI-FORWARD', [
      '-d', `${s.ip}/32`, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', 'ACCEPT',
    ]); // prettier-ignore
    batch.append('filter', 'CNI-FORWARD', ['-s', `${s.ip}/32`, '-j', 'ACCEPT']);
  }
  return batch;
}
