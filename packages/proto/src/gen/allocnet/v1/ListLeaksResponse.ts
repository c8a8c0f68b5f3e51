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
  StrayNamespace as _allocnet_v1_StrayNamespace,
  StrayNamespace__Output as _allocnet_v1_StrayNamespace__Output,
} from '../../allocnet/v1/StrayNamespace.js';

/**
 * The leaks on the node.
 */
export interface ListLeaksResponse {
  /**
   * Allocations the agent does not know that still have host state, ordered by allocation id.
   */
  leaks?: _allocnet_v1_Leak[];
  /**
   * CNI state that no allocation id could be read from (e.g. a rule with a malformed comment).
   */
  orphans?: _allocnet_v1_HostState | null;
  /**
   * Network namespaces named like the agent's allocations' that no allocation has, by name.
   */
  namespaces?: _allocnet_v1_StrayNamespace[];
}

/**
 * The leaks on the node.
 */
export interface ListLeaksResponse__Output {
  /**
   * Allocations the agent does not know that still have host state, ordered by allocation id.
   */
  leaks: _allocnet_v1_Leak__Output[];
  /**
   * CNI state that no allocation id could be read from (e.g. a rule with a malformed comment).
   */
  orphans: _allocnet_v1_HostState__Output | null;
  /**
   * Network namespaces named like the agent's allocations' that no allocation has, by name.
   */
  namespaces: _allocnet_v1_StrayNamespace__Output[];
}
