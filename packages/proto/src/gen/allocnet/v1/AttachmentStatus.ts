// Original file: ../../proto/allocnet/v1/types.proto

import type {
  Phase as _allocnet_v1_Phase,
  Phase__Output as _allocnet_v1_Phase__Output,
} from '../../allocnet/v1/Phase.js';
import type {
  DnsConfig as _allocnet_v1_DnsConfig,
  DnsConfig__Output as _allocnet_v1_DnsConfig__Output,
} from '../../allocnet/v1/DnsConfig.js';
import type {
  PortMapping as _allocnet_v1_PortMapping,
  PortMapping__Output as _allocnet_v1_PortMapping__Output,
} from '../../allocnet/v1/PortMapping.js';

/**
 * One network of an allocation: its interface and what the plugins gave it.
 */
export interface AttachmentStatus {
  /**
   * The CNI network's name (`nomad` for the embedded default bridge network).
   */
  network?: string;
  /**
   * The interface inside the allocation's network namespace.
   */
  interfaceName?: string;
  /**
   * Where this attachment is in its lifecycle (the primary's is the allocation's).
   */
  phase?: _allocnet_v1_Phase;
  /**
   * Every address of the interface with its prefix length (`172.26.64.5/20`), IPv4 and IPv6, as
   * the plugins' result lists them; empty until it is set up.
   */
  addresses?: string[];
  /**
   * The interface's MAC address, as the plugins' result gives it; empty when it gives none.
   */
  mac?: string;
  /**
   * The gateways of those addresses, in the same order, each once; empty when the result names none.
   */
  gateways?: string[];
  /**
   * The DNS settings this network's plugins returned.
   */
  dns?: _allocnet_v1_DnsConfig | null;
  /**
   * The host ports forwarded to this interface, each port once for tcp and once for udp.
   */
  portMappings?: _allocnet_v1_PortMapping[];
  /**
   * True when AttachNetwork added it to a running allocation (DetachNetwork may remove it, as any
   * secondary); false for those of the setup.
   */
  attached?: boolean;
}

/**
 * One network of an allocation: its interface and what the plugins gave it.
 */
export interface AttachmentStatus__Output {
  /**
   * The CNI network's name (`nomad` for the embedded default bridge network).
   */
  network: string;
  /**
   * The interface inside the allocation's network namespace.
   */
  interfaceName: string;
  /**
   * Where this attachment is in its lifecycle (the primary's is the allocation's).
   */
  phase: _allocnet_v1_Phase__Output;
  /**
   * Every address of the interface with its prefix length (`172.26.64.5/20`), IPv4 and IPv6, as
   * the plugins' result lists them; empty until it is set up.
   */
  addresses: string[];
  /**
   * The interface's MAC address, as the plugins' result gives it; empty when it gives none.
   */
  mac: string;
  /**
   * The gateways of those addresses, in the same order, each once; empty when the result names none.
   */
  gateways: string[];
  /**
   * The DNS settings this network's plugins returned.
   */
  dns: _allocnet_v1_DnsConfig__Output | null;
  /**
   * The host ports forwarded to this interface, each port once for tcp and once for udp.
   */
  portMappings: _allocnet_v1_PortMapping__Output[];
  /**
   * True when AttachNetwork added it to a running allocation (DetachNetwork may remove it, as any
   * secondary); false for those of the setup.
   */
  attached: boolean;
}
