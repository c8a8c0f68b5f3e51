// Original file: ../../proto/allocnet/v1/operator_service.proto

import type { Long } from '@grpc/proto-loader';

/**
 * The state store's health: a write that finds the data dir full fails (RESOURCE_EXHAUSTED) and
 * changes nothing; the agent probes for space and is writable again once a write succeeds.
 */
export interface StoreHealth {
  /**
   * False from a write that found the data dir full until a write succeeds again.
   */
  writable?: boolean;
  /**
   * When not writable: why (names the data dir).
   */
  problem?: string;
  /**
   * When not writable: since when, in milliseconds since the Unix epoch.
   */
  fullSinceUnixMs?: number | string | Long;
  /**
   * Writes refused for lack of space since the agent started.
   */
  writeFailures?: number | string | Long;
  /**
   * Allocations whose network is gone but whose record the full data dir kept, now.
   */
  unremovedRecords?: number;
}

/**
 * The state store's health: a write that finds the data dir full fails (RESOURCE_EXHAUSTED) and
 * changes nothing; the agent probes for space and is writable again once a write succeeds.
 */
export interface StoreHealth__Output {
  /**
   * False from a write that found the data dir full until a write succeeds again.
   */
  writable: boolean;
  /**
   * When not writable: why (names the data dir).
   */
  problem: string;
  /**
   * When not writable: since when, in milliseconds since the Unix epoch.
   */
  fullSinceUnixMs: string;
  /**
   * Writes refused for lack of space since the agent started.
   */
  writeFailures: string;
  /**
   * Allocations whose network is gone but whose record the full data dir kept, now.
   */
  unremovedRecords: number;
}
