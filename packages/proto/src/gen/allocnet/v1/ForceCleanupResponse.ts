// Original file: ../../proto/allocnet/v1/operator_service.proto

import type {
  HostState as _allocnet_v1_HostState,
  HostState__Output as _allocnet_v1_HostState__Output,
} from '../../allocnet/v1/HostState.js';

/**
 * The outcome of a forced cleanup.
 */
export interface ForceCleanupResponse {
  /**
   * True when nothing was removed because the request asked for a dry run.
   */
  dryRun?: boolean;
  /**
   * What was removed, or with `dry_run` what would have been.
   */
  removed?: _allocnet_v1_HostState | null;
}

/**
 * The outcome of a forced cleanup.
 */
export interface ForceCleanupResponse__Output {
  /**
   * True when nothing was removed because the request asked for a dry run.
   */
  dryRun: boolean;
  /**
   * What was removed, or with `dry_run` what would have been.
   */
  removed: _allocnet_v1_HostState__Output | null;
}
