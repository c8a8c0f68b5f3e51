// Original file: ../../proto/allocnet/v1/operator_service.proto

/**
 * What to clean up.
 */
export interface ForceCleanupRequest {
  /**
   * The allocation whose state to remove.
   */
  allocId?: string;
  /**
   * Only remove state of this CNI network; empty for any network.
   */
  network?: string;
  /**
   * Report what would be removed, and remove nothing.
   */
  dryRun?: boolean;
}

/**
 * What to clean up.
 */
export interface ForceCleanupRequest__Output {
  /**
   * The allocation whose state to remove.
   */
  allocId: string;
  /**
   * Only remove state of this CNI network; empty for any network.
   */
  network: string;
  /**
   * Report what would be removed, and remove nothing.
   */
  dryRun: boolean;
}
