// Original file: ../../proto/allocnet/v1/operator_service.proto

/**
 * How to reap.
 */
export interface ReapLeaksRequest {
  /**
   * How many leaked allocations to remove in one batch; 0 for the agent's default.
   */
  batchSize?: number;
  /**
   * Report what would be removed, and remove nothing.
   */
  dryRun?: boolean;
}

/**
 * How to reap.
 */
export interface ReapLeaksRequest__Output {
  /**
   * How many leaked allocations to remove in one batch; 0 for the agent's default.
   */
  batchSize: number;
  /**
   * Report what would be removed, and remove nothing.
   */
  dryRun: boolean;
}
