// Original file: ../../proto/allocnet/v1/alloc_network_service.proto

/**
 * One port allocated to the allocation.
 */
export interface Port {
  /**
   * The port's label in the job.
   */
  label?: string;
  /**
   * The host port.
   */
  value?: number;
  /**
   * The port inside the allocation; below 1 means the same as `value`.
   */
  to?: number;
  /**
   * The host address to bind; empty for every address.
   */
  hostIp?: string;
}

/**
 * One port allocated to the allocation.
 */
export interface Port__Output {
  /**
   * The port's label in the job.
   */
  label: string;
  /**
   * The host port.
   */
  value: number;
  /**
   * The port inside the allocation; below 1 means the same as `value`.
   */
  to: number;
  /**
   * The host address to bind; empty for every address.
   */
  hostIp: string;
}
