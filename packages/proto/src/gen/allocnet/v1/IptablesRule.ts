// Original file: ../../proto/allocnet/v1/types.proto

/**
 * One iptables rule.
 */
export interface IptablesRule {
  /**
   * `ipv4` (iptables) or `ipv6` (ip6tables).
   */
  family?: string;
  /**
   * The table: `filter`, `nat`, `mangle`, `raw` or `security`.
   */
  table?: string;
  /**
   * The chain that holds the rule.
   */
  chain?: string;
  /**
   * The rule as iptables-save prints it, e.g. `-A POSTROUTING -s 172.26.64.5/32 -j CNI-…`.
   */
  line?: string;
}

/**
 * One iptables rule.
 */
export interface IptablesRule__Output {
  /**
   * `ipv4` (iptables) or `ipv6` (ip6tables).
   */
  family: string;
  /**
   * The table: `filter`, `nat`, `mangle`, `raw` or `security`.
   */
  table: string;
  /**
   * The chain that holds the rule.
   */
  chain: string;
  /**
   * The rule as iptables-save prints it, e.g. `-A POSTROUTING -s 172.26.64.5/32 -j CNI-…`.
   */
  line: string;
}
