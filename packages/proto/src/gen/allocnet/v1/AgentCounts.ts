// Original file: ../../proto/allocnet/v1/operator_service.proto

import type { Long } from '@grpc/proto-loader';

/**
 * Counters since the agent started.
 */
export interface AgentCounts {
  /**
   * Allocation networks the agent holds now.
   */
  liveAllocations?: number;
  /**
   * Setups that ran CNI ADD successfully.
   */
  setups?: number | string | Long;
  /**
   * Teardowns that finished.
   */
  teardowns?: number | string | Long;
  /**
   * Setups and teardowns that failed.
   */
  failures?: number | string | Long;
  /**
   * Leaked allocations found by the reconciler, ListLeaks or ReapLeaks.
   */
  leaksFound?: number | string | Long;
  /**
   * Leaked allocations removed.
   */
  leaksReaped?: number | string | Long;
}

/**
 * Counters since the agent started.
 */
export interface AgentCounts__Output {
  /**
   * Allocation networks the agent holds now.
   */
  liveAllocations: number;
  /**
   * Setups that ran CNI ADD successfully.
   */
  setups: string;
  /**
   * Teardowns that finished.
   */
  teardowns: string;
  /**
   * Setups and teardowns that failed.
   */
  failures: string;
  /**
   * Leaked allocations found by the reconciler, ListLeaks or ReapLeaks.
   */
  leaksFound: string;
  /**
   * Leaked allocations removed.
   */
  leaksReaped: string;
}
