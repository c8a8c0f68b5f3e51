// Original file: ../../proto/allocnet/v1/operator_service.proto

/**
 * One CNI plugin binary.
 */
export interface PluginInfo {
  /**
   * The plugin's type, e.g. `bridge`.
   */
  type?: string;
  /**
   * Where the plugin was found; empty when it was not.
   */
  path?: string;
  /**
   * The CNI spec versions the plugin's VERSION command reports.
   */
  supportedVersions?: string[];
  /**
   * Why VERSION failed or the plugin was not found; empty otherwise.
   */
  error?: string;
}

/**
 * One CNI plugin binary.
 */
export interface PluginInfo__Output {
  /**
   * The plugin's type, e.g. `bridge`.
   */
  type: string;
  /**
   * Where the plugin was found; empty when it was not.
   */
  path: string;
  /**
   * The CNI spec versions the plugin's VERSION command reports.
   */
  supportedVersions: string[];
  /**
   * Why VERSION failed or the plugin was not found; empty otherwise.
   */
  error: string;
}
