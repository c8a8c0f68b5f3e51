// Original file: ../../proto/allocnet/v1/operator_service.proto

/**
 * One allocation whose leaked state, or one stray namespace, could not be removed.
 */
export interface ReapFailure {
  /**
   * The allocation's id (for a namespace, the id its name encodes).
   */
  allocId?: string;
  /**
   * Why its cleanup failed.
   */
  error?: string;
  /**
   * The stray namespace that could not be removed; empty for an allocation's state.
   */
  netnsName?: string;
}

/**
 * One allocation whose leaked state, or one stray namespace, could not be removed.
 */
export interface ReapFailure__Output {
  /**
   * The allocation's id (for a namespace, the id its name encodes).
   */
  allocId: string;
  /**
   * Why its cleanup failed.
   */
  error: string;
  /**
   * The stray namespace that could not be removed; empty for an allocation's state.
   */
  netnsName: string;
}
