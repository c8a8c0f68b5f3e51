// Original file: ../../proto/allocnet/v1/types.proto

/**
 * DNS settings for an allocation, from the first DNS entry of the CNI result.
 */
export interface DnsConfig {
  /**
   * Name server addresses, in order.
   */
  servers?: string[];
  /**
   * Search domains, in order.
   */
  searches?: string[];
  /**
   * Resolver options (as in resolv.conf's `options` line).
   */
  options?: string[];
}

/**
 * DNS settings for an allocation, from the first DNS entry of the CNI result.
 */
export interface DnsConfig__Output {
  /**
   * Name server addresses, in order.
   */
  servers: string[];
  /**
   * Search domains, in order.
   */
  searches: string[];
  /**
   * Resolver options (as in resolv.conf's `options` line).
   */
  options: string[];
}
