// Original file: ../../proto/allocnet/v1/operator_service.proto

/**
 * One CNI network the agent can set up.
 */
export interface NetworkInfo {
  /**
   * The network's name.
   */
  name?: string;
  /**
   * `default` for the embedded default bridge network; otherwise the configuration file's path.
   */
  source?: string;
  /**
   * The plugin types of the network's chain, in order.
   */
  plugins?: string[];
}

/**
 * One CNI network the agent can set up.
 */
export interface NetworkInfo__Output {
  /**
   * The network's name.
   */
  name: string;
  /**
   * `default` for the embedded default bridge network; otherwise the configuration file's path.
   */
  source: string;
  /**
   * The plugin types of the network's chain, in order.
   */
  plugins: string[];
}
