// Original file: ../../proto/allocnet/v1/types.proto

/**
 * One host port forwarded into the allocation by the portmap plugin.
 */
export interface PortMapping {
  /**
   * The port on the host.
   */
  hostPort?: number;
  /**
   * The port inside the allocation.
   */
  containerPort?: number;
  /**
   * `tcp` or `udp`.
   */
  protocol?: string;
  /**
   * The host address the mapping is bound to; empty for every address.
   */
  hostIp?: string;
}

/**
 * One host port forwarded into the allocation by the portmap plugin.
 */
export interface PortMapping__Output {
  /**
   * The port on the host.
   */
  hostPort: number;
  /**
   * The port inside the allocation.
   */
  containerPort: number;
  /**
   * `tcp` or `udp`.
   */
  protocol: string;
  /**
   * The host address the mapping is bound to; empty for every address.
   */
  hostIp: string;
}
