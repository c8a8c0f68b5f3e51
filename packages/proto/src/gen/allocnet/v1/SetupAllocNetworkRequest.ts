// Original file: ../../proto/allocnet/v1/alloc_network_service.proto

import type {
  Port as _allocnet_v1_Port,
  Port__Output as _allocnet_v1_Port__Output,
} from '../../allocnet/v1/Port.js';
import type {
  LegacyNetwork as _allocnet_v1_LegacyNetwork,
  LegacyNetwork__Output as _allocnet_v1_LegacyNetwork__Output,
} from '../../allocnet/v1/LegacyNetwork.js';
import type {
  NetworkAttachment as _allocnet_v1_NetworkAttachment,
  NetworkAttachment__Output as _allocnet_v1_NetworkAttachment__Output,
} from '../../allocnet/v1/NetworkAttachment.js';

/**
 * What the scheduler asks for when it places an allocation on the node.
 */
export interface SetupAllocNetworkRequest {
  /**
   * The allocation's id; names the CNI container id and tags every rule the plugins create.
   */
  allocId?: string;
  /**
   * The scheduler's region (informational).
   */
  region?: string;
  /**
   * The job's namespace; passed to the plugins as a CNI arg.
   */
  namespace?: string;
  /**
   * The job's id; passed to the plugins as a CNI arg.
   */
  jobId?: string;
  /**
   * The task group's name; passed to the plugins as a CNI arg.
   */
  groupName?: string;
  /**
   * The CNI network to join, by name; empty for the embedded default bridge network.
   */
  network?: string;
  /**
   * The allocation's ports, forwarded from the host by the portmap plugin. At most the agent's
   * `limits.maxPorts` (default 128); more is INVALID_ARGUMENT.
   */
  ports?: _allocnet_v1_Port[];
  /**
   * Per-network ports of the older job format; used only when `ports` is empty. All their ports
   * together count against `limits.maxPorts`.
   */
  networks?: _allocnet_v1_LegacyNetwork[];
  /**
   * Extra CNI args for the plugins, after `IgnoreUnknown=1` and before the workload args
   * (namespace, job, group, allocation), which they cannot override. Keys and values must not
   * contain `;` or `=`, and are at most 256 characters each; at most the agent's
   * `limits.maxCniArgs` (default 64) entries.
   */
  cniArgs?: { [key: string]: string };
  /**
   * A network namespace that a task driver made, by path; empty to have the agent create the
   * allocation's namespace.
   */
  netnsPath?: string;
  /**
   * The allocation's networks, in order, each on its own interface; the first is the primary (the
   * one the top-level status fields describe). Empty: the single form, one attachment made of
   * `network` and `ports`. When given, `network` must be empty; `ports` and `networks` ride on the
   * first attachment (which may then have no ports of its own) and `cni_args` go to every
   * attachment, an attachment's own on top. Every attachment must be on a different network and
   * interface, at most one may ask for the default route, a host port may be on one attachment
   * only, and there may be at most the agent's `limits.maxAttachments` (default 8).
   */
  attachments?: _allocnet_v1_NetworkAttachment[];
}

/**
 * What the scheduler asks for when it places an allocation on the node.
 */
export interface SetupAllocNetworkRequest__Output {
  /**
   * The allocation's id; names the CNI container id and tags every rule the plugins create.
   */
  allocId: string;
  /**
   * The scheduler's region (informational).
   */
  region: string;
  /**
   * The job's namespace; passed to the plugins as a CNI arg.
   */
  namespace: string;
  /**
   * The job's id; passed to the plugins as a CNI arg.
   */
  jobId: string;
  /**
   * The task group's name; passed to the plugins as a CNI arg.
   */
  groupName: string;
  /**
   * The CNI network to join, by name; empty for the embedded default bridge network.
   */
  network: string;
  /**
   * The allocation's ports, forwarded from the host by the portmap plugin. At most the agent's
   * `limits.maxPorts` (default 128); more is INVALID_ARGUMENT.
   */
  ports: _allocnet_v1_Port__Output[];
  /**
   * Per-network ports of the older job format; used only when `ports` is empty. All their ports
   * together count against `limits.maxPorts`.
   */
  networks: _allocnet_v1_LegacyNetwork__Output[];
  /**
   * Extra CNI args for the plugins, after `IgnoreUnknown=1` and before the workload args
   * (namespace, job, group, allocation), which they cannot override. Keys and values must not
   * contain `;` or `=`, and are at most 256 characters each; at most the agent's
   * `limits.maxCniArgs` (default 64) entries.
   */
  cniArgs: { [key: string]: string };
  /**
   * A network namespace that a task driver made, by path; empty to have the agent create the
   * allocation's namespace.
   */
  netnsPath: string;
  /**
   * The allocation's networks, in order, each on its own interface; the first is the primary (the
   * one the top-level status fields describe). Empty: the single form, one attachment made of
   * `network` and `ports`. When given, `network` must be empty; `ports` and `networks` ride on the
   * first attachment (which may then have no ports of its own) and `cni_args` go to every
   * attachment, an attachment's own on top. Every attachment must be on a different network and
   * interface, at most one may ask for the default route, a host port may be on one attachment
   * only, and there may be at most the agent's `limits.maxAttachments` (default 8).
   */
  attachments: _allocnet_v1_NetworkAttachment__Output[];
}
