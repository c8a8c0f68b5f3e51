// Original file: ../../proto/allocnet/v1/alloc_network_service.proto

import type {
  Port as _allocnet_v1_Port,
  Port__Output as _allocnet_v1_Port__Output,
} from '../../allocnet/v1/Port.js';

/**
 * One network of an allocation, on its own interface inside the allocation's namespace.
 */
export interface NetworkAttachment {
  /**
   * The CNI network to join, by name; empty for the embedded default bridge network.
   */
  network?: string;
  /**
   * The interface inside the namespace; empty for `eth0` for the first attachment and `net<k>` for
   * the attachment at index k (`net1`, `net2`, …, as Multus names them); for AttachNetwork, a
   * `net<k>` the allocation does not use.
   */
  interfaceName?: string;
  /**
   * The ports forwarded from the host to this attachment by the network's portmap plugin.
   */
  ports?: _allocnet_v1_Port[];
  /**
   * Extra CNI args for this network's plugins, on top of the request's `cni_args`; the same rules.
   */
  cniArgs?: { [key: string]: string };
  /**
   * Addresses asked of the network's IPAM, with or without a prefix length: through the CNI `ips`
   * capability of the plugins that declare it, else host-local's `args.cni.ips`. A network that
   * can take neither is INVALID_ARGUMENT.
   */
  ips?: string[];
  /**
   * The interface's MAC address, through the CNI `mac` capability (the tuning plugin); a network
   * without a plugin that declares it is INVALID_ARGUMENT.
   */
  mac?: string;
  /**
   * True to keep the default routes this attachment's plugins add inside the namespace. At most one
   * attachment may say true; when none does, the first keeps its default route and the default
   * routes of the others are removed after their ADD.
   */
  defaultRoute?: boolean;
}

/**
 * One network of an allocation, on its own interface inside the allocation's namespace.
 */
export interface NetworkAttachment__Output {
  /**
   * The CNI network to join, by name; empty for the embedded default bridge network.
   */
  network: string;
  /**
   * The interface inside the namespace; empty for `eth0` for the first attachment and `net<k>` for
   * the attachment at index k (`net1`, `net2`, …, as Multus names them); for AttachNetwork, a
   * `net<k>` the allocation does not use.
   */
  interfaceName: string;
  /**
   * The ports forwarded from the host to this attachment by the network's portmap plugin.
   */
  ports: _allocnet_v1_Port__Output[];
  /**
   * Extra CNI args for this network's plugins, on top of the request's `cni_args`; the same rules.
   */
  cniArgs: { [key: string]: string };
  /**
   * Addresses asked of the network's IPAM, with or without a prefix length: through the CNI `ips`
   * capability of the plugins that declare it, else host-local's `args.cni.ips`. A network that
   * can take neither is INVALID_ARGUMENT.
   */
  ips: string[];
  /**
   * The interface's MAC address, through the CNI `mac` capability (the tuning plugin); a network
   * without a plugin that declares it is INVALID_ARGUMENT.
   */
  mac: string;
  /**
   * True to keep the default routes this attachment's plugins add inside the namespace. At most one
   * attachment may say true; when none does, the first keeps its default route and the default
   * routes of the others are removed after their ADD.
   */
  defaultRoute: boolean;
}
