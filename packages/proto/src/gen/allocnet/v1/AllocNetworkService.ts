// Original file: ../../proto/allocnet/v1/alloc_network_service.proto

import type * as grpc from '@grpc/grpc-js';
import type { MethodDefinition } from '@grpc/proto-loader';
import type {
  AttachNetworkRequest as _allocnet_v1_AttachNetworkRequest,
  AttachNetworkRequest__Output as _allocnet_v1_AttachNetworkRequest__Output,
} from '../../allocnet/v1/AttachNetworkRequest.js';
import type {
  AttachNetworkResponse as _allocnet_v1_AttachNetworkResponse,
  AttachNetworkResponse__Output as _allocnet_v1_AttachNetworkResponse__Output,
} from '../../allocnet/v1/AttachNetworkResponse.js';
import type {
  CheckAllocNetworkRequest as _allocnet_v1_CheckAllocNetworkRequest,
  CheckAllocNetworkRequest__Output as _allocnet_v1_CheckAllocNetworkRequest__Output,
} from '../../allocnet/v1/CheckAllocNetworkRequest.js';
import type {
  CheckAllocNetworkResponse as _allocnet_v1_CheckAllocNetworkResponse,
  CheckAllocNetworkResponse__Output as _allocnet_v1_CheckAllocNetworkResponse__Output,
} from '../../allocnet/v1/CheckAllocNetworkResponse.js';
import type {
  DetachNetworkRequest as _allocnet_v1_DetachNetworkRequest,
  DetachNetworkRequest__Output as _allocnet_v1_DetachNetworkRequest__Output,
} from '../../allocnet/v1/DetachNetworkRequest.js';
import type {
  DetachNetworkResponse as _allocnet_v1_DetachNetworkResponse,
  DetachNetworkResponse__Output as _allocnet_v1_DetachNetworkResponse__Output,
} from '../../allocnet/v1/DetachNetworkResponse.js';
import type {
  GetAllocNetworkRequest as _allocnet_v1_GetAllocNetworkRequest,
  GetAllocNetworkRequest__Output as _allocnet_v1_GetAllocNetworkRequest__Output,
} from '../../allocnet/v1/GetAllocNetworkRequest.js';
import type {
  GetAllocNetworkResponse as _allocnet_v1_GetAllocNetworkResponse,
  GetAllocNetworkResponse__Output as _allocnet_v1_GetAllocNetworkResponse__Output,
} from '../../allocnet/v1/GetAllocNetworkResponse.js';
import type {
  ListAllocNetworksRequest as _allocnet_v1_ListAllocNetworksRequest,
  ListAllocNetworksRequest__Output as _allocnet_v1_ListAllocNetworksRequest__Output,
} from '../../allocnet/v1/ListAllocNetworksRequest.js';
import type {
  ListAllocNetworksResponse as _allocnet_v1_ListAllocNetworksResponse,
  ListAllocNetworksResponse__Output as _allocnet_v1_ListAllocNetworksResponse__Output,
} from '../../allocnet/v1/ListAllocNetworksResponse.js';
import type {
  SetupAllocNetworkRequest as _allocnet_v1_SetupAllocNetworkRequest,
  SetupAllocNetworkRequest__Output as _allocnet_v1_SetupAllocNetworkRequest__Output,
} from '../../allocnet/v1/SetupAllocNetworkRequest.js';
import type {
  SetupAllocNetworkResponse as _allocnet_v1_SetupAllocNetworkResponse,
  SetupAllocNetworkResponse__Output as _allocnet_v1_SetupAllocNetworkResponse__Output,
} from '../../allocnet/v1/SetupAllocNetworkResponse.js';
import type {
  TeardownAllocNetworkRequest as _allocnet_v1_TeardownAllocNetworkRequest,
  TeardownAllocNetworkRequest__Output as _allocnet_v1_TeardownAllocNetworkRequest__Output,
} from '../../allocnet/v1/TeardownAllocNetworkRequest.js';
import type {
  TeardownAllocNetworkResponse as _allocnet_v1_TeardownAllocNetworkResponse,
  TeardownAllocNetworkResponse__Output as _allocnet_v1_TeardownAllocNetworkResponse__Output,
} from '../../allocnet/v1/TeardownAllocNetworkResponse.js';

/**
 * What the scheduler calls on each client node's agent to give allocations their network.
 * Requests are validated before anything runs: a bad field fails the call with INVALID_ARGUMENT,
 * naming the field, and changes nothing.
 */
export interface AllocNetworkServiceClient extends grpc.Client {
  /**
   * Attaches one more network to a set-up allocation. It gets its own interface in the
   * allocation's namespace (Multus's dynamic networks): CNI ADD of that network, retried as a
   * setup's is. The same attachment again (same interface, same request) answers
   * `already_attached` without running ADD; another one on an interface the allocation has fails
   * with FAILED_PRECONDITION; NOT_FOUND when the agent does not know the allocation. A network the
   * allocation already has, a bad field, or more attachments than the agent's
   * `limits.maxAttachments` is INVALID_ARGUMENT.
   */
  AttachNetwork(
    argument: _allocnet_v1_AttachNetworkRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_AttachNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  AttachNetwork(
    argument: _allocnet_v1_AttachNetworkRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_AttachNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  AttachNetwork(
    argument: _allocnet_v1_AttachNetworkRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_AttachNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  AttachNetwork(
    argument: _allocnet_v1_AttachNetworkRequest,
    callback: grpc.requestCallback<_allocnet_v1_AttachNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  /**
   * Attaches one more network to a set-up allocation. It gets its own interface in the
   * allocation's namespace (Multus's dynamic networks): CNI ADD of that network, retried as a
   * setup's is. The same attachment again (same interface, same request) answers
   * `already_attached` without running ADD; another one on an interface the allocation has fails
   * with FAILED_PRECONDITION; NOT_FOUND when the agent does not know the allocation. A network the
   * allocation already has, a bad field, or more attachments than the agent's
   * `limits.maxAttachments` is INVALID_ARGUMENT.
   */
  attachNetwork(
    argument: _allocnet_v1_AttachNetworkRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_AttachNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  attachNetwork(
    argument: _allocnet_v1_AttachNetworkRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_AttachNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  attachNetwork(
    argument: _allocnet_v1_AttachNetworkRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_AttachNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  attachNetwork(
    argument: _allocnet_v1_AttachNetworkRequest,
    callback: grpc.requestCallback<_allocnet_v1_AttachNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;

  /**
   * Runs CNI CHECK on an allocation's network. An unhealthy network is a result (`healthy`
   * false), not an error; NOT_FOUND when the agent does not know the allocation.
   */
  CheckAllocNetwork(
    argument: _allocnet_v1_CheckAllocNetworkRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_CheckAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  CheckAllocNetwork(
    argument: _allocnet_v1_CheckAllocNetworkRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_CheckAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  CheckAllocNetwork(
    argument: _allocnet_v1_CheckAllocNetworkRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_CheckAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  CheckAllocNetwork(
    argument: _allocnet_v1_CheckAllocNetworkRequest,
    callback: grpc.requestCallback<_allocnet_v1_CheckAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  /**
   * Runs CNI CHECK on an allocation's network. An unhealthy network is a result (`healthy`
   * false), not an error; NOT_FOUND when the agent does not know the allocation.
   */
  checkAllocNetwork(
    argument: _allocnet_v1_CheckAllocNetworkRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_CheckAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  checkAllocNetwork(
    argument: _allocnet_v1_CheckAllocNetworkRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_CheckAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  checkAllocNetwork(
    argument: _allocnet_v1_CheckAllocNetworkRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_CheckAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  checkAllocNetwork(
    argument: _allocnet_v1_CheckAllocNetworkRequest,
    callback: grpc.requestCallback<_allocnet_v1_CheckAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;

  /**
   * Detaches one secondary attachment, by interface: CNI DEL of that network only, then the
   * cleanup and audit of what its plugins left. The primary (first) attachment cannot be detached
   * (FAILED_PRECONDITION: tear the allocation down instead); an interface the allocation does not
   * have, or an allocation the agent does not know, is NOT_FOUND.
   */
  DetachNetwork(
    argument: _allocnet_v1_DetachNetworkRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_DetachNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  DetachNetwork(
    argument: _allocnet_v1_DetachNetworkRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_DetachNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  DetachNetwork(
    argument: _allocnet_v1_DetachNetworkRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_DetachNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  DetachNetwork(
    argument: _allocnet_v1_DetachNetworkRequest,
    callback: grpc.requestCallback<_allocnet_v1_DetachNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  /**
   * Detaches one secondary attachment, by interface: CNI DEL of that network only, then the
   * cleanup and audit of what its plugins left. The primary (first) attachment cannot be detached
   * (FAILED_PRECONDITION: tear the allocation down instead); an interface the allocation does not
   * have, or an allocation the agent does not know, is NOT_FOUND.
   */
  detachNetwork(
    argument: _allocnet_v1_DetachNetworkRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_DetachNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  detachNetwork(
    argument: _allocnet_v1_DetachNetworkRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_DetachNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  detachNetwork(
    argument: _allocnet_v1_DetachNetworkRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_DetachNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  detachNetwork(
    argument: _allocnet_v1_DetachNetworkRequest,
    callback: grpc.requestCallback<_allocnet_v1_DetachNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;

  /**
   * Returns one allocation's network; NOT_FOUND when the agent does not know the allocation.
   */
  GetAllocNetwork(
    argument: _allocnet_v1_GetAllocNetworkRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_GetAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  GetAllocNetwork(
    argument: _allocnet_v1_GetAllocNetworkRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_GetAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  GetAllocNetwork(
    argument: _allocnet_v1_GetAllocNetworkRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_GetAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  GetAllocNetwork(
    argument: _allocnet_v1_GetAllocNetworkRequest,
    callback: grpc.requestCallback<_allocnet_v1_GetAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  /**
   * Returns one allocation's network; NOT_FOUND when the agent does not know the allocation.
   */
  getAllocNetwork(
    argument: _allocnet_v1_GetAllocNetworkRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_GetAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  getAllocNetwork(
    argument: _allocnet_v1_GetAllocNetworkRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_GetAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  getAllocNetwork(
    argument: _allocnet_v1_GetAllocNetworkRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_GetAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  getAllocNetwork(
    argument: _allocnet_v1_GetAllocNetworkRequest,
    callback: grpc.requestCallback<_allocnet_v1_GetAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;

  /**
   * Returns every allocation network the agent knows.
   */
  ListAllocNetworks(
    argument: _allocnet_v1_ListAllocNetworksRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_ListAllocNetworksResponse__Output>,
  ): grpc.ClientUnaryCall;
  ListAllocNetworks(
    argument: _allocnet_v1_ListAllocNetworksRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_ListAllocNetworksResponse__Output>,
  ): grpc.ClientUnaryCall;
  ListAllocNetworks(
    argument: _allocnet_v1_ListAllocNetworksRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_ListAllocNetworksResponse__Output>,
  ): grpc.ClientUnaryCall;
  ListAllocNetworks(
    argument: _allocnet_v1_ListAllocNetworksRequest,
    callback: grpc.requestCallback<_allocnet_v1_ListAllocNetworksResponse__Output>,
  ): grpc.ClientUnaryCall;
  /**
   * Returns every allocation network the agent knows.
   */
  listAllocNetworks(
    argument: _allocnet_v1_ListAllocNetworksRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_ListAllocNetworksResponse__Output>,
  ): grpc.ClientUnaryCall;
  listAllocNetworks(
    argument: _allocnet_v1_ListAllocNetworksRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_ListAllocNetworksResponse__Output>,
  ): grpc.ClientUnaryCall;
  listAllocNetworks(
    argument: _allocnet_v1_ListAllocNetworksRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_ListAllocNetworksResponse__Output>,
  ): grpc.ClientUnaryCall;
  listAllocNetworks(
    argument: _allocnet_v1_ListAllocNetworksRequest,
    callback: grpc.requestCallback<_allocnet_v1_ListAllocNetworksResponse__Output>,
  ): grpc.ClientUnaryCall;

  /**
   * Sets up an allocation's network: creates its network namespace (unless one is given), runs
   * CNI ADD (retried on failure, with a DEL between attempts) and returns the result. Calling it
   * again with the same request returns the existing network without running ADD; with another
   * request it fails with FAILED_PRECONDITION. A host port (protocol, host address) that another
   * allocation set up, being set up or being restored already maps fails it with
   * FAILED_PRECONDITION before anything runs, naming the port and that allocation (`setup of
   * allocation "B" refused: ports[0].value ("http"): host port 28080/tcp on every address is
   * already mapped by allocation "A"`; metadata allocnet-error `host-port-taken`).
   */
  SetupAllocNetwork(
    argument: _allocnet_v1_SetupAllocNetworkRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_SetupAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  SetupAllocNetwork(
    argument: _allocnet_v1_SetupAllocNetworkRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_SetupAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  SetupAllocNetwork(
    argument: _allocnet_v1_SetupAllocNetworkRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_SetupAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  SetupAllocNetwork(
    argument: _allocnet_v1_SetupAllocNetworkRequest,
    callback: grpc.requestCallback<_allocnet_v1_SetupAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  /**
   * Sets up an allocation's network: creates its network namespace (unless one is given), runs
   * CNI ADD (retried on failure, with a DEL between attempts) and returns the result. Calling it
   * again with the same request returns the existing network without running ADD; with another
   * request it fails with FAILED_PRECONDITION. A host port (protocol, host address) that another
   * allocation set up, being set up or being restored already maps fails it with
   * FAILED_PRECONDITION before anything runs, naming the port and that allocation (`setup of
   * allocation "B" refused: ports[0].value ("http"): host port 28080/tcp on every address is
   * already mapped by allocation "A"`; metadata allocnet-error `host-port-taken`).
   */
  setupAllocNetwork(
    argument: _allocnet_v1_SetupAllocNetworkRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_SetupAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  setupAllocNetwork(
    argument: _allocnet_v1_SetupAllocNetworkRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_SetupAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  setupAllocNetwork(
    argument: _allocnet_v1_SetupAllocNetworkRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_SetupAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  setupAllocNetwork(
    argument: _allocnet_v1_SetupAllocNetworkRequest,
    callback: grpc.requestCallback<_allocnet_v1_SetupAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;

  /**
   * Tears down an allocation's network: runs CNI DEL, removes whatever the plugins left tagged
   * with the allocation, and deletes the namespace if the agent created it. Tearing down an
   * unknown allocation still cleans up what is tagged with it.
   */
  TeardownAllocNetwork(
    argument: _allocnet_v1_TeardownAllocNetworkRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_TeardownAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  TeardownAllocNetwork(
    argument: _allocnet_v1_TeardownAllocNetworkRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_TeardownAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  TeardownAllocNetwork(
    argument: _allocnet_v1_TeardownAllocNetworkRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_TeardownAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  TeardownAllocNetwork(
    argument: _allocnet_v1_TeardownAllocNetworkRequest,
    callback: grpc.requestCallback<_allocnet_v1_TeardownAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  /**
   * Tears down an allocation's network: runs CNI DEL, removes whatever the plugins left tagged
   * with the allocation, and deletes the namespace if the agent created it. Tearing down an
   * unknown allocation still cleans up what is tagged with it.
   */
  teardownAllocNetwork(
    argument: _allocnet_v1_TeardownAllocNetworkRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_TeardownAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  teardownAllocNetwork(
    argument: _allocnet_v1_TeardownAllocNetworkRequest,
    metadata: grpc.Metadata,
    callback: grpc.requestCallback<_allocnet_v1_TeardownAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  teardownAllocNetwork(
    argument: _allocnet_v1_TeardownAllocNetworkRequest,
    options: grpc.CallOptions,
    callback: grpc.requestCallback<_allocnet_v1_TeardownAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
  teardownAllocNetwork(
    argument: _allocnet_v1_TeardownAllocNetworkRequest,
    callback: grpc.requestCallback<_allocnet_v1_TeardownAllocNetworkResponse__Output>,
  ): grpc.ClientUnaryCall;
}

/**
 * What the scheduler calls on each client node's agent to give allocations their network.
 * Requests are validated before anything runs: a bad field fails the call with INVALID_ARGUMENT,
 * naming the field, and changes nothing.
 */
export interface AllocNetworkServiceHandlers extends grpc.UntypedServiceImplementation {
  /**
   * Attaches one more network to a set-up allocation. It gets its own interface in the
   * allocation's namespace (Multus's dynamic networks): CNI ADD of that network, retried as a
   * setup's is. The same attachment again (same interface, same request) answers
   * `already_attached` without running ADD; another one on an interface the allocation has fails
   * with FAILED_PRECONDITION; NOT_FOUND when the agent does not know the allocation. A network the
   * allocation already has, a bad field, or more attachments than the agent's
   * `limits.maxAttachments` is INVALID_ARGUMENT.
   */
  AttachNetwork: grpc.handleUnaryCall<
    _allocnet_v1_AttachNetworkRequest__Output,
    _allocnet_v1_AttachNetworkResponse
  >;

  /**
   * Runs CNI CHECK on an allocation's network. An unhealthy network is a result (`healthy`
   * false), not an error; NOT_FOUND when the agent does not know the allocation.
   */
  CheckAllocNetwork: grpc.handleUnaryCall<
    _allocnet_v1_CheckAllocNetworkRequest__Output,
    _allocnet_v1_CheckAllocNetworkResponse
  >;

  /**
   * Detaches one secondary attachment, by interface: CNI DEL of that network only, then the
   * cleanup and audit of what its plugins left. The primary (first) attachment cannot be detached
   * (FAILED_PRECONDITION: tear the allocation down instead); an interface the allocation does not
   * have, or an allocation the agent does not know, is NOT_FOUND.
   */
  DetachNetwork: grpc.handleUnaryCall<
    _allocnet_v1_DetachNetworkRequest__Output,
    _allocnet_v1_DetachNetworkResponse
  >;

  /**
   * Returns one allocation's network; NOT_FOUND when the agent does not know the allocation.
   */
  GetAllocNetwork: grpc.handleUnaryCall<
    _allocnet_v1_GetAllocNetworkRequest__Output,
    _allocnet_v1_GetAllocNetworkResponse
  >;

  /**
   * Returns every allocation network the agent knows.
   */
  ListAllocNetworks: grpc.handleUnaryCall<
    _allocnet_v1_ListAllocNetworksRequest__Output,
    _allocnet_v1_ListAllocNetworksResponse
  >;

  /**
   * Sets up an allocation's network: creates its network namespace (unless one is given), runs
   * CNI ADD (retried on failure, with a DEL between attempts) and returns the result. Calling it
   * again with the same request returns the existing network without running ADD; with another
   * request it fails with FAILED_PRECONDITION. A host port (protocol, host address) that another
   * allocation set up, being set up or being restored already maps fails it with
   * FAILED_PRECONDITION before anything runs, naming the port and that allocation (`setup of
   * allocation "B" refused: ports[0].value ("http"): host port 28080/tcp on every address is
   * already mapped by allocation "A"`; metadata allocnet-error `host-port-taken`).
   */
  SetupAllocNetwork: grpc.handleUnaryCall<
    _allocnet_v1_SetupAllocNetworkRequest__Output,
    _allocnet_v1_SetupAllocNetworkResponse
  >;

  /**
   * Tears down an allocation's network: runs CNI DEL, removes whatever the plugins left tagged
   * with the allocation, and deletes the namespace if the agent created it. Tearing down an
   * unknown allocation still cleans up what is tagged with it.
   */
  TeardownAllocNetwork: grpc.handleUnaryCall<
    _allocnet_v1_TeardownAllocNetworkRequest__Output,
    _allocnet_v1_TeardownAllocNetworkResponse
  >;
}

export interface AllocNetworkServiceDefinition extends grpc.ServiceDefinition {
  AttachNetwork: MethodDefinition<
    _allocnet_v1_AttachNetworkRequest,
    _allocnet_v1_AttachNetworkResponse,
    _allocnet_v1_AttachNetworkRequest__Output,
    _allocnet_v1_AttachNetworkResponse__Output
  >;
  CheckAllocNetwork: MethodDefinition<
    _allocnet_v1_CheckAllocNetworkRequest,
    _allocnet_v1_CheckAllocNetworkResponse,
    _allocnet_v1_CheckAllocNetworkRequest__Output,
    _allocnet_v1_CheckAllocNetworkResponse__Output
  >;
  DetachNetwork: MethodDefinition<
    _allocnet_v1_DetachNetworkRequest,
    _allocnet_v1_DetachNetworkResponse,
    _allocnet_v1_DetachNetworkRequest__Output,
    _allocnet_v1_DetachNetworkResponse__Output
  >;
  GetAllocNetwork: MethodDefinition<
    _allocnet_v1_GetAllocNetworkRequest,
    _allocnet_v1_GetAllocNetworkResponse,
    _allocnet_v1_GetAllocNetworkRequest__Output,
    _allocnet_v1_GetAllocNetworkResponse__Output
  >;
  ListAllocNetworks: MethodDefinition<
    _allocnet_v1_ListAllocNetworksRequest,
    _allocnet_v1_ListAllocNetworksResponse,
    _allocnet_v1_ListAllocNetworksRequest__Output,
    _allocnet_v1_ListAllocNetworksResponse__Output
  >;
  SetupAllocNetwork: MethodDefinition<
    _allocnet_v1_SetupAllocNetworkRequest,
    _allocnet_v1_SetupAllocNetworkResponse,
    _allocnet_v1_SetupAllocNetworkRequest__Output,
    _allocnet_v1_SetupAllocNetworkResponse__Output
  >;
  TeardownAllocNetwork: MethodDefinition<
    _allocnet_v1_TeardownAllocNetworkRequest,
    _allocnet_v1_TeardownAllocNetworkResponse,
    _allocnet_v1_TeardownAllocNetworkRequest__Output,
    _allocnet_v1_TeardownAllocNetworkResponse__Output
  >;
}
