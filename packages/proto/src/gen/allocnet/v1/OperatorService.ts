// Original file: ../../proto/allocnet/v1/operator_service.proto

import type * as grpc from '@grpc/grpc-js';
import type { MethodDefinition } from '@grpc/proto-loader';
import type {
  ForceCleanupRequest as _allocnet_v1_ForceCleanupRequest,
  ForceCleanupRequest__Output as _allocnet_v1_ForceCleanupRequest__Output,
} from '../../allocnet/v1/ForceCleanupRequest.js';
import type {
  ForceCleanupResponse as _allocnet_v1_ForceCleanupResponse,
  ForceCleanupResponse__Output as _allocnet_v1_ForceCleanupResponse__Output,
} from '../../allocnet/v1/ForceCleanupResponse.js';
import type {
  GetAgentInfoRequest as _allocnet_v1_GetAgentInfoRequest,
  GetAgentInfoRequest__Output as _allocnet_v1_GetAgentInfoRequest__Output,
} from '../../allocnet/v1/GetAgentInfoRequest.js';
import type {
  GetAgentInfoResponse as _allocnet_v1_GetAgentInfoResponse,
  GetAgentInfoResponse__Output as _allocnet_v1_GetAgentInfoResponse__Output,
} from '../../allocnet/v1/GetAgentInfoResponse.js';
import type {
  ListLeaksRequest as _allocnet_v1_ListLeaksRequest,
  ListLeaksRequest__Output as _allocnet_v1_ListLeaksRequest__Output,
} from '../../allocnet/v1/ListLeaksRequest.js';
import type {
  ListLeaksResponse as _allocnet_v1_ListLeaksResponse,
  ListLeaksResponse__Output as _allocnet_v1_ListLeaksResponse__Output,
} from '../../allocnet/v1/ListLeaksResponse.js';
import type {
  ReapLeaksProgress as _allocnet_v1_ReapLeaksProgress,
  ReapLeaksProgress__Output as _allocnet_v1_ReapLeaksProgress__Output,
} from '../../allocnet/v1/ReapLeaksProgress.js';
import type {
  ReapLeaksRequest as _allocnet_v1_ReapLeaksRequest,
  ReapLeaksRequest__Output as _allocnet_v1_ReapLeaksRequest__Output,
} from '../../allocnet/v1/ReapLeaksRequest.js';
import type {
  ReloadConfigRequest as _allocnet_v1_ReloadConfigRequest,
  ReloadConfigRequest__Output as _allocnet_v1_ReloadConfigRequest__Output,
} from '../../allocnet/v1/ReloadConfigRequest.js';
import type {
  ReloadConfigResponse as _allocnet_v1_ReloadConfigResponse,
  ReloadConfigResponse__Output as _allocnet_v1_ReloadConfigResponse__Output,
} from '../../allocnet/v1/ReloadConfigResponse.js';

/**
 * What operators (the `allocnet` CLI) call on a node's agent.
 */
export interface OperatorServiceClient extends grpc.Client {
  /**
   * Removes everything tagged with an allocation (rules, chains, IPAM reservations, cache files)
   * whether or not the agent knows it, without running the plugins, in the allocation's turn:
   * after any setup, check or teardown of it under way. With `dry_run` it only reports what it
   * would remove.
   */
  ForceCleanup(
    argument: _allocnet_v1_ForceCleanupRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_ForceCleanupResponse__Output>,
  ): grpc.ClientUnaryCall;
  ForceCleanup(
    argument: _allocnet_v1_ForceCleanupRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_ForceCleanupResponse__Output>,
  ): grpc.ClientUnaryCall;
  ForceCleanup(
    argument: _allocnet_v1_ForceCleanupRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_ForceCleanupResponse__Output>,
  ): grpc.ClientUnaryCall;
  ForceCleanup(
    argument: _allocnet_v1_ForceCleanupRequest,
    callback: grpc.requestCallback<_allocnet_v1_ForceCleanupResponse__Output>,
  ): grpc.ClientUnaryCall;
  /**
   * Removes everything tagged with an allocation (rules, chains, IPAM reservations, cache files)
   * whether or not the agent knows it, without running the plugins, in the allocation's turn:
   * after any setup, check or teardown of it under way. With `dry_run` it only reports what it
   * would remove.
   */
  forceCleanup(
    argument: _allocnet_v1_ForceCleanupRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_ForceCleanupResponse__Output>,
  ): grpc.ClientUnaryCall;
  forceCleanup(
    argument: _allocnet_v1_ForceCleanupRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_ForceCleanupResponse__Output>,
  ): grpc.ClientUnaryCall;
  forceCleanup(
    argument: _allocnet_v1_ForceCleanupRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_ForceCleanupResponse__Output>,
  ): grpc.ClientUnaryCall;
  forceCleanup(
    argument: _allocnet_v1_ForceCleanupRequest,
    callback: grpc.requestCallback<_allocnet_v1_ForceCleanupResponse__Output>,
  ): grpc.ClientUnaryCall;

  /**
   * Returns the agent's version, plugins, networks, counters and settings.
   */
  GetAgentInfo(
    argument: _allocnet_v1_GetAgentInfoRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_GetAgentInfoResponse__Output>,
  ): grpc.ClientUnaryCall;
  GetAgentInfo(
    argument: _allocnet_v1_GetAgentInfoRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_GetAgentInfoResponse__Output>,
  ): grpc.ClientUnaryCall;
  GetAgentInfo(
    argument: _allocnet_v1_GetAgentInfoRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_GetAgentInfoResponse__Output>,
  ): grpc.ClientUnaryCall;
  GetAgentInfo(
    argument: _allocnet_v1_GetAgentInfoRequest,
    callback: grpc.requestCallback<_allocnet_v1_GetAgentInfoResponse__Output>,
  ): grpc.ClientUnaryCall;
  /**
   * Returns the agent's version, plugins, networks, counters and settings.
   */
  getAgentInfo(
    argument: _allocnet_v1_GetAgentInfoRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_GetAgentInfoResponse__Output>,
  ): grpc.ClientUnaryCall;
  getAgentInfo(
    argument: _allocnet_v1_GetAgentInfoRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_GetAgentInfoResponse__Output>,
  ): grpc.ClientUnaryCall;
  getAgentInfo(
    argument: _allocnet_v1_GetAgentInfoRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_GetAgentInfoResponse__Output>,
  ): grpc.ClientUnaryCall;
  getAgentInfo(
    argument: _allocnet_v1_GetAgentInfoRequest,
    callback: grpc.requestCallback<_allocnet_v1_GetAgentInfoResponse__Output>,
  ): grpc.ClientUnaryCall;

  /**
   * Finds leaks: host state tagged with allocations the agent does not know, CNI state that
   * belongs to no allocation at all, and network namespaces named like the agent's allocations'
   * that no allocation has. Changes nothing.
   */
  ListLeaks(
    argument: _allocnet_v1_ListLeaksRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_ListLeaksResponse__Output>,
  ): grpc.ClientUnaryCall;
  ListLeaks(
    argument: _allocnet_v1_ListLeaksRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_ListLeaksResponse__Output>,
  ): grpc.ClientUnaryCall;
  ListLeaks(
    argument: _allocnet_v1_ListLeaksRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_ListLeaksResponse__Output>,
  ): grpc.ClientUnaryCall;
  ListLeaks(
    argument: _allocnet_v1_ListLeaksRequest,
    callback: grpc.requestCallback<_allocnet_v1_ListLeaksResponse__Output>,
  ): grpc.ClientUnaryCall;
  /**
   * Finds leaks: host state tagged with allocations the agent does not know, CNI state that
   * belongs to no allocation at all, and network namespaces named like the agent's allocations'
   * that no allocation has. Changes nothing.
   */
  listLeaks(
    argument: _allocnet_v1_ListLeaksRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_ListLeaksResponse__Output>,
  ): grpc.ClientUnaryCall;
  listLeaks(
    argument: _allocnet_v1_ListLeaksRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_ListLeaksResponse__Output>,
  ): grpc.ClientUnaryCall;
  listLeaks(
    argument: _allocnet_v1_ListLeaksRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_ListLeaksResponse__Output>,
  ): grpc.ClientUnaryCall;
  listLeaks(
    argument: _allocnet_v1_ListLeaksRequest,
    callback: grpc.requestCallback<_allocnet_v1_ListLeaksResponse__Output>,
  ): grpc.ClientUnaryCall;

  /**
   * Removes the leaks that ListLeaks finds, in batches, streaming progress and then one summary
   * as the last message. With `dry_run` it only reports.
   */
  ReapLeaks(
    argument: _allocnet_v1_ReapLeaksRequest,
    metadata: grpc.Metadata,
    options?: grpc.CallOptions,
  ): grpc.ClientReadableStream<_allocnet_v1_ReapLeaksProgress__Output>;
  ReapLeaks(
    argument: _allocnet_v1_ReapLeaksRequest,
    options?: grpc.CallOptions,
  ): grpc.ClientReadableStream<_allocnet_v1_ReapLeaksProgress__Output>;
  /**
   * Removes the leaks that ListLeaks finds, in batches, streaming progress and then one summary
   * as the last message. With `dry_run` it only reports.
   */
  reapLeaks(
    argument: _allocnet_v1_ReapLeaksRequest,
    metadata: grpc.Metadata,
    options?: grpc.CallOptions,
  ): grpc.ClientReadableStream<_allocnet_v1_ReapLeaksProgress__Output>;
  reapLeaks(
    argument: _allocnet_v1_ReapLeaksRequest,
    options?: grpc.CallOptions,
  ): grpc.ClientReadableStream<_allocnet_v1_ReapLeaksProgress__Output>;

  /**
   * Reads the CNI network configuration files again and returns the networks the agent now
   * offers and the files it refused.
   */
  ReloadConfig(
    argument: _allocnet_v1_ReloadConfigRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_ReloadConfigResponse__Output>,
  ): grpc.ClientUnaryCall;
  ReloadConfig(
    argument: _allocnet_v1_ReloadConfigRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_ReloadConfigResponse__Output>,
  ): grpc.ClientUnaryCall;
  ReloadConfig(
    argument: _allocnet_v1_ReloadConfigRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_ReloadConfigResponse__Output>,
  ): grpc.ClientUnaryCall;
  ReloadConfig(
    argument: _allocnet_v1_ReloadConfigRequest,
    callback: grpc.requestCallback<_allocnet_v1_ReloadConfigResponse__Output>,
  ): grpc.ClientUnaryCall;
  /**
   * Reads the CNI network configuration files again and returns the networks the agent now
   * offers and the files it refused.
   */
  reloadConfig(
    argument: _allocnet_v1_ReloadConfigRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_ReloadConfigResponse__Output>,
  ): grpc.ClientUnaryCall;
  reloadConfig(
    argument: _allocnet_v1_ReloadConfigRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_ReloadConfigResponse__Output>,
  ): grpc.ClientUnaryCall;
  reloadConfig(
    argument: _allocnet_v1_ReloadConfigRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_ReloadConfigResponse__Output>,
  ): grpc.ClientUnaryCall;
  reloadConfig(
    argument: _allocnet_v1_ReloadConfigRequest,
    callback: grpc.requestCallback<_allocnet_v1_ReloadConfigResponse__Output>,
  ): grpc.ClientUnaryCall;
}

/**
 * What operators (the `allocnet` CLI) call on a node's agent.
 */
export interface OperatorServiceHandlers extends grpc.UntypedServiceImplementation {
  /**
   * Removes everything tagged with an allocation (rules, chains, IPAM reservations, cache files)
   * whether or not the agent knows it, without running the plugins, in the allocation's turn:
   * after any setup, check or teardown of it under way. With `dry_run` it only reports what it
   * would remove.
   */
  ForceCleanup: grpc.handleUnaryCall<
    _allocnet_v1_ForceCleanupRequest__Output,
    _allocnet_v1_ForceCleanupResponse
  >;

  /**
   * Returns the agent's version, plugins, networks, counters and settings.
   */
  GetAgentInfo: grpc.handleUnaryCall<
    _allocnet_v1_GetAgentInfoRequest__Output,
    _allocnet_v1_GetAgentInfoResponse
  >;

  /**
   * Finds leaks: host state tagged with allocations the agent does not know, CNI state that
   * belongs to no allocation at all, and network namespaces named like the agent's allocations'
   * that no allocation has. Changes nothing.
   */
  ListLeaks: grpc.handleUnaryCall<
    _allocnet_v1_ListLeaksRequest__Output,
    _allocnet_v1_ListLeaksResponse
  >;

  /**
   * Removes the leaks that ListLeaks finds, in batches, streaming progress and then one summary
   * as the last message. With `dry_run` it only reports.
   */
  ReapLeaks: grpc.handleServerStreamingCall<
    _allocnet_v1_ReapLeaksRequest__Output,
    _allocnet_v1_ReapLeaksProgress
  >;

  /**
   * Reads the CNI network configuration files again and returns the networks the agent now
   * offers and the files it refused.
   */
  ReloadConfig: grpc.handleUnaryCall<
    _allocnet_v1_ReloadConfigRequest__Output,
    _allocnet_v1_ReloadConfigResponse
  >;
}

export interface OperatorServiceDefinition extends grpc.ServiceDefinition {
  ForceCleanup: MethodDefinition<
    _allocnet_v1_ForceCleanupRequest,
    _allocnet_v1_ForceCleanupResponse,
    _allocnet_v1_ForceCleanupRequest__Output,
    _allocnet_v1_ForceCleanupResponse__Output
  >;
  GetAgentInfo: MethodDefinition<
    _allocnet_v1_GetAgentInfoRequest,
    _allocnet_v1_GetAgentInfoResponse,
    _allocnet_v1_GetAgentInfoRequest__Output,
    _allocnet_v1_GetAgentInfoResponse__Output
  >;
  ListLeaks: MethodDefinition<
    _allocnet_v1_ListLeaksRequest,
    _allocnet_v1_ListLeaksResponse,
    _allocnet_v1_ListLeaksRequest__Output,
    _allocnet_v1_ListLeaksResponse__Output
  >;
  ReapLeaks: MethodDefinition<
    _allocnet_v1_ReapLeaksRequest,
    _allocnet_v1_ReapLeaksProgress,
    _allocnet_v1_ReapLeaksRequest__Output,
    _allocnet_v1_ReapLeaksProgress__Output
  >;
  ReloadConfig: MethodDefinition<
    _allocnet_v1_ReloadConfigRequest,
    _allocnet_v1_ReloadConfigResponse,
    _allocnet_v1_ReloadConfigRequest__Output,
    _allocnet_v1_ReloadConfigResponse__Output
  >;
}
