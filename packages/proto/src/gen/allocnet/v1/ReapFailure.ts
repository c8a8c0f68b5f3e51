// Original file: ../../proto/allocnet/v1/operator_service.proto

/**
 * One allocation whose leaked state could not be removed.
 */
export interface ReapFailure {
  /**
   * The allocation's id.
   */
  allocId?: string;
  /**
   * Why its cleanup failed.
   */
  error?: string;
}

/**
 * One allocation whose leaked state could not be removed.
 */
export interface ReapFailure__Output {
  /**
   * The allocation's id.
   */
  allocId: string;
  /**
   * Why its cleanup failed.
   */
  error: string;
}
