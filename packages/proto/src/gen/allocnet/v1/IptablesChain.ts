// Original file: ../../proto/allocnet/v1/types.proto

/**
 * One user-defined iptables chain.
 */
export interface IptablesChain {
  /**
   * `ipv4` (iptables) or `ipv6` (ip6tables).
   */
  family?: string;
  /**
   * The table that holds the chain.
   */
  table?: string;
  /**
   * The chain's name, e.g. `CNI-DN-…`.
   */
  chain?: string;
}

/**
 * One user-defined iptables chain.
 */
export interface IptablesChain__Output {
  /**
   * `ipv4` (iptables) or `ipv6` (ip6tables).
   */
  family: string;
  /**
   * The table that holds the chain.
   */
  table: string;
  /**
   * The chain's name, e.g. `CNI-DN-…`.
   */
  chain: string;
}
