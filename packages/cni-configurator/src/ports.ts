import type { FieldPath } from '@allocnet/base';
import { invalidField } from './errors.js';
import type { AllocNetworkSpec, PortMapping } from './types.js';

const PROTOCOLS = ['tcp', 'udp'] as const;

interface Claim {
  readonly field: FieldPath;
  readonly label: string;
  readonly hostPort: number;
  readonly hostIP: string;
  readonly protocols: readonly ('tcp' | 'udp')[];
}

/**
 * portmap's `portMappings` for an allocation, in Nomad's rule: each port gives a tcp and a udp
 * entry (or only the one its `protocol` names), hostPort = its value, containerPort = its `to` (or the value when `to` < 1); the host IP
 * is kept unless `ignoreHostIps`. When the spec has no `ports`, the legacy per-network reserved
 * and dynamic ports are used, never with a host IP. Two ports that claim the same host port (on
 * the same or every address) are refused, naming both labels.
 */
export function portMappings(spec: AllocNetworkSpec, ignoreHostIps: boolean): PortMapping[] {
  const claims: Claim[] = [];
  const mappings: PortMapping[] = [];
  const add = (claim: Claim, to: number | undefined) => {
    const clash = claims.find(
      (c) =>
        c.hostPort === claim.hostPort &&
        (c.hostIP === claim.hostIP || c.hostIP === '' || claim.hostIP === '') &&
        c.protocols.some((p) => claim.protocols.includes(p)),
    );
    if (clash !== undefined) {
      throw invalidField(claim.field, [
        `(${JSON.stringify(claim.label)}) claims host port ${claim.hostPort}, which `,
        { field: clash.field },
        ` (${JSON.stringify(clash.label)}) already claims`,
      ]);
    }
    claims.push(claim);
    const containerPort = to === undefined || to < 1 ? claim.hostPort : to;
    for (const protocol of claim.protocols) {
      mappings.push({
        hostPort: claim.hostPort,
        containerPort,
        protocol,
        ...(claim.hostIP === '' ? {} : { hostIP: claim.hostIP }),
      });
    }
  };

  const ports = spec.ports ?? [];
  if (ports.length > 0) {
    ports.forEach((p, i) => {
      const hostIP = ignoreHostIps ? '' : (p.hostIp ?? '');
      const protocols = p.protocol === undefined ? PROTOCOLS : [p.protocol];
      add(
        { field: ['ports', i, 'value'], label: p.label, hostPort: p.value, hostIP, protocols },
        p.to,
      );
    });
    return mappings;
  }
  (spec.legacyNetworks ?? []).forEach((network, n) => {
    for (const kind of ['reservedPorts', 'dynamicPorts'] as const) {
      (network[kind] ?? []).forEach((p, i) => {
        add(
          {
            field: ['legacyNetworks', n, kind, i, 'value'],
            label: p.label,
            hostPort: p.value,
            hostIP: '',
            protocols: PROTOCOLS,
          },
          p.to,
        );
      });
    }
  });
  return mappings;
}
