// Original file: ../../proto/allocnet/v1/operator_service.proto

/**
 * A configuration file the agent refused.
 */
export interface InvalidConfigFile {
  /**
   * The file's path.
   */
  file?: string;
  /**
   * Why it was refused.
   */
  reason?: string;
}

/**
 * A configuration file the agent refused.
 */
export interface InvalidConfigFile__Output {
  /**
   * The file's path.
   */
  file: string;
  /**
   * Why it was refused.
   */
  reason: string;
}
