// Original file: ../../proto/allocnet/v1/alloc_network_service.proto

/**
 * A port in the older job format; it never has a host address.
 */
export interface LegacyPort {
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
}

/**
 * A port in the older job format; it never has a host address.
 */
export interface LegacyPort__Output {
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
}
