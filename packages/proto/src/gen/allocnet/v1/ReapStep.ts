// Original file: ../../proto/allocnet/v1/operator_service.proto

/**
 * Progress of a reap.
 */
export interface ReapStep {
  /**
   * How many leaked allocations are handled so far, this one included.
   */
  done?: number;
  /**
   * How many leaked allocations the reap found.
   */
  total?: number;
  /**
   * The allocation just handled.
   */
  allocId?: string;
}

/**
 * Progress of a reap.
 */
export interface ReapStep__Output {
  /**
   * How many leaked allocations are handled so far, this one included.
   */
  done: number;
  /**
   * How many leaked allocations the reap found.
   */
  total: number;
  /**
   * The allocation just handled.
   */
  allocId: string;
}
