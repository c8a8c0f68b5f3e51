// Original file: ../../proto/allocnet/v1/operator_service.proto

import type {
  Leak as _allocnet_v1_Leak,
  Leak__Output as _allocnet_v1_Leak__Output,
} from '../../allocnet/v1/Leak.js';
import type {
  HostState as _allocnet_v1_HostState,
  HostState__Output as _allocnet_v1_HostState__Output,
} from '../../allocnet/v1/HostState.js';
import type {
  ReapFailure as _allocnet_v1_ReapFailure,
  ReapFailure__Output as _allocnet_v1_ReapFailure__Output,
} from '../../allocnet/v1/ReapFailure.js';
import type {
  StrayNamespace as _allocnet_v1_StrayNamespace,
  StrayNamespace__Output as _allocnet_v1_StrayNamespace__Output,
} from '../../allocnet/v1/StrayNamespace.js';

/**
 * The outcome of a reap.
 */
export interface ReapSummary {
  /**
   * The leaks removed (with `dry_run`, the leaks that would have been).
   */
  reaped?: _allocnet_v1_Leak[];
  /**
   * State that belongs to no allocation (as in ListLeaksResponse.orphans), removed along with the
   * leaks (with `dry_run`, what would be removed).
   */
  orphans?: _allocnet_v1_HostState | null;
  /**
   * The allocations whose cleanup failed, and the stray namespaces that could not be removed.
   */
  failed?: _allocnet_v1_ReapFailure[];
  /**
   * The stray namespaces removed (with `dry_run`, the ones that would be), each in its
   * allocation's turn: one that an allocation took meanwhile is left alone and not listed.
   */
  namespaces?: _allocnet_v1_StrayNamespace[];
}

/**
 * The outcome of a reap.
 */
export interface ReapSummary__Output {
  /**
   * The leaks removed (with `dry_run`, the leaks that would have been).
   */
  reaped: _allocnet_v1_Leak__Output[];
  /**
   * State that belongs to no allocation (as in ListLeaksResponse.orphans), removed along with the
   * leaks (with `dry_run`, what would be removed).
   */
  orphans: _allocnet_v1_HostState__Output | null;
  /**
   * The allocations whose cleanup failed, and the stray namespaces that could not be removed.
   */
  failed: _allocnet_v1_ReapFailure__Output[];
  /**
   * The stray namespaces removed (with `dry_run`, the ones that would be), each in its
   * allocation's turn: one that an allocation took meanwhile is left alone and not listed.
   */
  namespaces: _allocnet_v1_StrayNamespace__Output[];
}
