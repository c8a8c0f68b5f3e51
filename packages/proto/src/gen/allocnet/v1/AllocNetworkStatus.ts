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
import type {
  CniOrigin as _allocnet_v1_CniOrigin,
  CniOrigin__Output as _allocnet_v1_CniOrigin__Output,
} from '../../allocnet/v1/CniOrigin.js';
import type {
  AttachmentStatus as _allocnet_v1_AttachmentStatus,
  AttachmentStatus__Output as _allocnet_v1_AttachmentStatus__Output,
} from '../../allocnet/v1/AttachmentStatus.js';
import type { Long } from '@grpc/proto-loader';

/**
 * The network of one allocation as the agent knows it.
 */
export interface AllocNetworkStatus {
  /**
   * The allocation's id.
   */
  allocId?: string;
  /**
   * The name of the CNI network the allocation joined (`nomad` for the embedded default bridge
   * network).
   */
  network?: string;
  /**
   * Where the network is in its lifecycle.
   */
  phase?: _allocnet_v1_Phase;
  /**
   * The interface inside the allocation's network namespace that holds the address.
   */
  interfaceName?: string;
  /**
   * The allocation's IPv4 address, without a prefix length; empty when it has none.
   */
  address?: string;
  /**
   * The allocation's IPv6 address, without a prefix length; empty when it has none.
   */
  addressIpv6?: string;
  /**
   * The DNS settings the plugins returned; empty lists when they returned none.
   */
  dns?: _allocnet_v1_DnsConfig | null;
  /**
   * The path of the allocation's network namespace.
   */
  netnsPath?: string;
  /**
   * The host ports forwarded into the allocation, each port once for tcp and once for udp.
   */
  portMappings?: _allocnet_v1_PortMapping[];
  /**
   * How many CNI ADD attempts the setup made: 1 when the first succeeded.
   */
  attempts?: number;
  /**
   * How many times the setup was retried: `attempts` - 1, or 0 before the first attempt.
   */
  retryCount?: number;
  /**
   * When this status last changed, in milliseconds since the Unix epoch.
   */
  updatedAtUnixMs?: number | string | Long;
  /**
   * Why the network is `PHASE_FAILED` (the first attempt's error); empty otherwise.
   */
  error?: string;
  /**
   * True when the agent created the network namespace (and so deletes it on teardown); false when
   * a task driver made it and passed its path.
   */
  netnsCreatedByAgent?: boolean;
  /**
   * Where the attachment came from when a container runtime asked for it through the agent's CNI
   * server (the `allocnet-cni` plugin); unset for an allocation set up over gRPC.
   */
  origin?: _allocnet_v1_CniOrigin | null;
  /**
   * Every network of the allocation, primary first (its fields repeat the top-level ones), then
   * the secondaries in order; one entry for an allocation with one network.
   */
  attachments?: _allocnet_v1_AttachmentStatus[];
}

/**
 * The network of one allocation as the agent knows it.
 */
export interface AllocNetworkStatus__Output {
  /**
   * The allocation's id.
   */
  allocId: string;
  /**
   * The name of the CNI network the allocation joined (`nomad` for the embedded default bridge
   * network).
   */
  network: string;
  /**
   * Where the network is in its lifecycle.
   */
  phase: _allocnet_v1_Phase__Output;
  /**
   * The interface inside the allocation's network namespace that holds the address.
   */
  interfaceName: string;
  /**
   * The allocation's IPv4 address, without a prefix length; empty when it has none.
   */
  address: string;
  /**
   * The allocation's IPv6 address, without a prefix length; empty when it has none.
   */
  addressIpv6: string;
  /**
   * The DNS settings the plugins returned; empty lists when they returned none.
   */
  dns: _allocnet_v1_DnsConfig__Output | null;
  /**
   * The path of the allocation's network namespace.
   */
  netnsPath: string;
  /**
   * The host ports forwarded into the allocation, each port once for tcp and once for udp.
   */
  portMappings: _allocnet_v1_PortMapping__Output[];
  /**
   * How many CNI ADD attempts the setup made: 1 when the first succeeded.
   */
  attempts: number;
  /**
   * How many times the setup was retried: `attempts` - 1, or 0 before the first attempt.
   */
  retryCount: number;
  /**
   * When this status last changed, in milliseconds since the Unix epoch.
   */
  updatedAtUnixMs: string;
  /**
   * Why the network is `PHASE_FAILED` (the first attempt's error); empty otherwise.
   */
  error: string;
  /**
   * True when the agent created the network namespace (and so deletes it on teardown); false when
   * a task driver made it and passed its path.
   */
  netnsCreatedByAgent: boolean;
  /**
   * Where the attachment came from when a container runtime asked for it through the agent's CNI
   * server (the `allocnet-cni` plugin); unset for an allocation set up over gRPC.
   */
  origin: _allocnet_v1_CniOrigin__Output | null;
  /**
   * Every network of the allocation, primary first (its fields repeat the top-level ones), then
   * the secondaries in order; one entry for an allocation with one network.
   */
  attachments: _allocnet_v1_AttachmentStatus__Output[];
}
