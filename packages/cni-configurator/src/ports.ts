import type { FieldPath } from '@allocnet/base';
import ipaddr from 'ipaddr.js';
import { invalidField } from './errors.js';
import type { AllocNetworkSpec, PortMapping, RequestedPortMapping } from './types.js';

const PROTOCOLS = ['tcp', 'udp'] as const;

/** What two port mappings are compared by: the host side. */
export type HostPortOf = Pick<PortMapping, 'hostPort' | 'protocol' | 'hostIP'>;

/**
 * A host address in one spelling (`::ffff:10.0.0.1` is `10.0.0.1`, as portmap reads it); '' is
 * every address.
 */
function hostAddressKey(hostIP: string | undefined): string {
  if (hostIP === undefined || hostIP === '') return '';
  return ipaddr.isValid(hostIP) ? ipaddr.process(hostIP).toString() : hostIP;
}

/**
 * The one overlap rule of host ports, within a spec and across allocations (the runner's
 * port-claims.ts): the same host port and protocol, on the same host address or where either one
 * has none (every address). An IPv4 and an IPv6 host address never overlap.
 */
export function portMappingsOverlap(a: HostPortOf, b: HostPortOf): boolean {
  if (a.hostPort !== b.hostPort || a.protocol !== b.protocol) return false;
  const x = hostAddressKey(a.hostIP);
  const y = hostAddressKey(b.hostIP);
  return x === '' || y === '' || x === y;
}

/**
 * portmap's `portMappings` for an allocation, each with the spec's field that asks for it and
 * its label, in Nomad's rule: each port gives a tcp and a udp entry (or only the one its
 * `protocol` names), hostPort = its value, containerPort = its `to` (or the value when `to` < 1);
 * the host IP is kept unless `ignoreHostIps`. When the spec has no `ports`, the legacy per-network
 * reserved and dynamic ports are used, never with a host IP. Two ports that claim the same host
 * port (`portMappingsOverlap`) are refused, naming both fields and labels.
 */
export function requestedPortMappings(
  spec: AllocNetworkSpec,
  ignoreHostIps: boolean,
): RequestedPortMapping[] {
  const mappings: RequestedPortMapping[] = [];
  const add = (
    field: FieldPath,
    label: string,
    hostPort: number,
    hostIP: string,
    protocols: readonly ('tcp' | 'udp')[],
    to: number | undefined,
  ) => {
    const containerPort = to === undefined || to < 1 ? hostPort : to;
    const own = protocols.map((protocol) => ({
      hostPort,
      containerPort,
      protocol,
      ...(hostIP === '' ? {} : { hostIP }),
      field,
      label,
    }));
    const clash = mappings.find((m) => own.some((o) => portMappingsOverlap(m, o)));
    if (clash !== undefined) {
      throw invalidField(field, [
        `(${JSON.stringify(label)}) claims host port ${hostPort}, which `,
        { field: clash.field },
        ` (${JSON.stringify(clash.label)}) already claims`,
      ]);
    }
    mappings.push(...own);
  };

  const ports = spec.ports ?? [];
  if (ports.length > 0) {
    ports.forEach((p, i) => {
      const hostIP = ignoreHostIps ? '' : (p.hostIp ?? '');
      const protocols = p.protocol === undefined ? PROTOCOLS : [p.protocol];
      add(['ports', i, 'value'], p.label, p.value, hostIP, protocols, p.to);
    });
    return mappings;
  }
  (spec.legacyNetworks ?? []).forEach((network, n) => {
    for (const kind of ['reservedPorts', 'dynamicPorts'] as const) {
      (network[kind] ?? []).forEach((p, i) => {
        add(['legacyNetworks', n, kind, i, 'value'], p.label, p.value, '', PROTOCOLS, p.to);
      });
    }
  });
  return mappings;
}

/** portmap's `portMappings` for an allocation: `requestedPortMappings` without fields, labels. */
export function portMappings(spec: AllocNetworkSpec, ignoreHostIps: boolean): PortMapping[] {
  return requestedPortMappings(spec, ignoreHostIps).map((m) => ({
    hostPort: m.hostPort,
    containerPort: m.containerPort,
    protocol: m.protocol,
    ...(m.hostIP === undefined ? {} : { hostIP: m.hostIP }),
  }));
}
