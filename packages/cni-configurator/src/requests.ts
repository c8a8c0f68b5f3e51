// What an attachment asks of its network's plugins beyond Nomad's spec: addresses (`ips`) and a
// MAC (`mac`), checked against the network's plugins (`checkRequests`, for `checkSpec` and setup)
// and turned into what the ADD passes (`requestsOf`): the `ips`/`mac` capability args of the
// plugins that declare them, or, for addresses in a network whose host-local declares no `ips`
// capability, `args.cni.ips` in the conf of the plugin carrying it (holds.ts's
// `withRequestedIps`, the mechanism a reclaim uses). A reclaim's recorded addresses win: with
// them, the spec's addresses are not asked for at all (host-local would refuse two in one range).
import type { NetworkConfig } from '@allocnet/cni';
import { invalidField } from './errors.js';
import { inSubnets } from './facts.js';
import type { NetworkFacts } from './facts.js';
import { withRequestedIps } from './holds.js';
import type { AllocAttachment, AllocNetworkSpec } from './types.js';

/** Whether a plugin of the network declares the capability. */
function declares(network: NetworkConfig, capability: string): boolean {
  return network.plugins.some((p) => p.capabilities.includes(capability));
}

/**
 * Refuses `ips` or `mac` the network cannot take: no plugin declares the capability (and, for
 * addresses, the network does not use host-local), or an address outside every range of the
 * network's IPAM config (where it names ranges). `invalid-argument` naming the field.
 */
export function checkRequests(
  spec: AllocNetworkSpec,
  network: NetworkConfig,
  facts: NetworkFacts,
): void {
  const name = JSON.stringify(network.name);
  if (spec.ips !== undefined && spec.ips.length > 0) {
    if (!declares(network, 'ips') && facts.ipamDir === undefined)
      throw invalidField(
        'ips',
        `cannot be asked for in network ${name}: no plugin of it declares the "ips" capability and it does not use host-local`,
      );
    if (facts.subnets.length > 0)
      spec.ips.forEach((ip, i) => {
        const address = ip.split('/')[0] ?? ip;
        if (!inSubnets(facts, address))
          throw invalidField(
            ['ips', i],
            `${JSON.stringify(ip)} is outside every range of network ${name}`,
          );
      });
  }
  if (spec.mac !== undefined && !declares(network, 'mac'))
    throw invalidField(
      'mac',
      `cannot be asked for in network ${name}: no plugin of it declares the "mac" capability (tuning)`,
    );
}

/** What an ADD passes for a spec's `ips` and `mac`. */
export interface Requests {
  /** The network the ADD runs (with `args.cni.ips` where they go there); the record keeps its own. */
  readonly network: NetworkConfig;
  /** The capability args beside portMappings, recorded for CHECK and DEL; undefined when none. */
  readonly requested: AllocAttachment['requested'];
}

/** The ADD's network and capability args for `spec`'s requests (see the top); `reclaiming` drops `ips`. */
export function requestsOf(
  spec: AllocNetworkSpec,
  network: NetworkConfig,
  reclaiming: boolean,
): Requests {
  const ips = reclaiming || spec.ips === undefined || spec.ips.length === 0 ? undefined : spec.ips;
  const capIps = ips !== undefined && declares(network, 'ips') ? ips : undefined;
  const requested = {
    ...(capIps === undefined ? {} : { ips: [...capIps] }),
    ...(spec.mac === undefined ? {} : { mac: spec.mac }),
  };
  return {
    network: ips !== undefined && capIps === undefined ? withRequestedIps(network, ips) : network,
    requested: Object.keys(requested).length === 0 ? undefined : requested,
  };
}
