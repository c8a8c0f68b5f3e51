// Original file: ../../proto/allocnet/v1/types.proto

/**
 * The CNI call that made an attachment: the runtime that asked and the container and interface it
 * asked for. The attachment's namespace is the runtime's (`netns_path`, with
 * `netns_created_by_agent` false) and its network the plugin's delegate.
 */
export interface CniOrigin {
  /**
   * The runtime, as its CNI_ARGS tell: `nomad`, `kubernetes`, `podman`, or `cni` when they tell
   * nothing.
   */
  runtime?: string;
  /**
   * The runtime's container id (CNI_CONTAINERID).
   */
  containerId?: string;
  /**
   * The interface the runtime asked for inside its namespace (CNI_IFNAME).
   */
  ifname?: string;
}

/**
 * The CNI call that made an attachment: the runtime that asked and the container and interface it
 * asked for. The attachment's namespace is the runtime's (`netns_path`, with
 * `netns_created_by_agent` false) and its network the plugin's delegate.
 */
export interface CniOrigin__Output {
  /**
   * The runtime, as its CNI_ARGS tell: `nomad`, `kubernetes`, `podman`, or `cni` when they tell
   * nothing.
   */
  runtime: string;
  /**
   * The runtime's container id (CNI_CONTAINERID).
   */
  containerId: string;
  /**
   * The interface the runtime asked for inside its namespace (CNI_IFNAME).
   */
  ifname: string;
}
