export { LOADER_OPTIONS, PROTO_DIR, PROTO_FILES } from './contract.mjs';
export { ALLOC_NETWORK_SERVICE, OPERATOR_SERVICE } from './contract.mjs';
export { loadAllocnetPackageDefinition, loadAllocnetProto } from './load.js';
export type { ProtoGrpcType } from './load.js';
export type { PackageDefinition } from '@grpc/proto-loader';
export { agentTarget } from './target.js';
export { createAllocNetworkClient, createOperatorClient, isServiceError, unary } from './client.js';
export type { UnaryMethod, UnaryOptions, UnaryRequest, UnaryResponse } from './client.js';
export { ProtoError, isProtoError } from './errors.js';
export { ABORT_STATUS, KIND_STATUS, kindOfStatus, statusOfKind } from './status.js';
export type { AbortCause } from './status.js';
export type { ProtoErrorCode } from './errors.js';

// The generated types. Each message has two: `Foo` is what you may send (every field optional,
// 64-bit integers as number, string or Long, enums as name or number) and `Foo__Output` is what you
// receive (every field present with its default, 64-bit integers as strings, enums as names).

export type {
  AllocNetworkServiceClient,
  AllocNetworkServiceDefinition,
  AllocNetworkServiceHandlers,
} from './gen/allocnet/v1/AllocNetworkService.js';
export type {
  OperatorServiceClient,
  OperatorServiceDefinition,
  OperatorServiceHandlers,
} from './gen/allocnet/v1/OperatorService.js';
// `Phase` is also a value: the object of its names (`Phase.PHASE_READY`).
export { Phase } from './gen/allocnet/v1/Phase.js';
export type { Phase__Output } from './gen/allocnet/v1/Phase.js';

// Messages of the scheduler's service (alloc_network_service.proto).
export type {
  SetupAllocNetworkRequest,
  SetupAllocNetworkRequest__Output,
} from './gen/allocnet/v1/SetupAllocNetworkRequest.js';
export type {
  SetupAllocNetworkResponse,
  SetupAllocNetworkResponse__Output,
} from './gen/allocnet/v1/SetupAllocNetworkResponse.js';
export type { Port, Port__Output } from './gen/allocnet/v1/Port.js';
export type { LegacyNetwork, LegacyNetwork__Output } from './gen/allocnet/v1/LegacyNetwork.js';
export type { LegacyPort, LegacyPort__Output } from './gen/allocnet/v1/LegacyPort.js';
export type {
  TeardownAllocNetworkRequest,
  TeardownAllocNetworkRequest__Output,
} from './gen/allocnet/v1/TeardownAllocNetworkRequest.js';
export type {
  TeardownAllocNetworkResponse,
  TeardownAllocNetworkResponse__Output,
} from './gen/allocnet/v1/TeardownAllocNetworkResponse.js';
export type {
  GetAllocNetworkRequest,
  GetAllocNetworkRequest__Output,
} from './gen/allocnet/v1/GetAllocNetworkRequest.js';
export type {
  GetAllocNetworkResponse,
  GetAllocNetworkResponse__Output,
} from './gen/allocnet/v1/GetAllocNetworkResponse.js';
export type {
  ListAllocNetworksRequest,
  ListAllocNetworksRequest__Output,
} from './gen/allocnet/v1/ListAllocNetworksRequest.js';
export type {
  ListAllocNetworksResponse,
  ListAllocNetworksResponse__Output,
} from './gen/allocnet/v1/ListAllocNetworksResponse.js';
export type {
  CheckAllocNetworkRequest,
  CheckAllocNetworkRequest__Output,
} from './gen/allocnet/v1/CheckAllocNetworkRequest.js';
export type {
  CheckAllocNetworkResponse,
  CheckAllocNetworkResponse__Output,
} from './gen/allocnet/v1/CheckAllocNetworkResponse.js';
export type {
  NetworkAttachment,
  NetworkAttachment__Output,
} from './gen/allocnet/v1/NetworkAttachment.js';
export type {
  AttachNetworkRequest,
  AttachNetworkRequest__Output,
} from './gen/allocnet/v1/AttachNetworkRequest.js';
export type {
  AttachNetworkResponse,
  AttachNetworkResponse__Output,
} from './gen/allocnet/v1/AttachNetworkResponse.js';
export type {
  DetachNetworkRequest,
  DetachNetworkRequest__Output,
} from './gen/allocnet/v1/DetachNetworkRequest.js';
export type {
  DetachNetworkResponse,
  DetachNetworkResponse__Output,
} from './gen/allocnet/v1/DetachNetworkResponse.js';

// Messages of the operators' service (operator_service.proto).
export type {
  ForceCleanupRequest,
  ForceCleanupRequest__Output,
} from './gen/allocnet/v1/ForceCleanupRequest.js';
export type {
  ForceCleanupResponse,
  ForceCleanupResponse__Output,
} from './gen/allocnet/v1/ForceCleanupResponse.js';
export type {
  ListLeaksRequest,
  ListLeaksRequest__Output,
} from './gen/allocnet/v1/ListLeaksRequest.js';
export type {
  ListLeaksResponse,
  ListLeaksResponse__Output,
} from './gen/allocnet/v1/ListLeaksResponse.js';
export type { Leak, Leak__Output } from './gen/allocnet/v1/Leak.js';
export type {
  ReapLeaksRequest,
  ReapLeaksRequest__Output,
} from './gen/allocnet/v1/ReapLeaksRequest.js';
export type {
  ReapLeaksProgress,
  ReapLeaksProgress__Output,
} from './gen/allocnet/v1/ReapLeaksProgress.js';
export type { ReapStep, ReapStep__Output } from './gen/allocnet/v1/ReapStep.js';
export type { ReapSummary, ReapSummary__Output } from './gen/allocnet/v1/ReapSummary.js';
export type { ReapFailure, ReapFailure__Output } from './gen/allocnet/v1/ReapFailure.js';
export type { StrayNamespace, StrayNamespace__Output } from './gen/allocnet/v1/StrayNamespace.js';
export type { StoreHealth, StoreHealth__Output } from './gen/allocnet/v1/StoreHealth.js';
export type {
  ReloadConfigRequest,
  ReloadConfigRequest__Output,
} from './gen/allocnet/v1/ReloadConfigRequest.js';
export type {
  ReloadConfigResponse,
  ReloadConfigResponse__Output,
} from './gen/allocnet/v1/ReloadConfigResponse.js';
export type { NetworkInfo, NetworkInfo__Output } from './gen/allocnet/v1/NetworkInfo.js';
export type {
  InvalidConfigFile,
  InvalidConfigFile__Output,
} from './gen/allocnet/v1/InvalidConfigFile.js';
export type {
  GetAgentInfoRequest,
  GetAgentInfoRequest__Output,
} from './gen/allocnet/v1/GetAgentInfoRequest.js';
export type {
  GetAgentInfoResponse,
  GetAgentInfoResponse__Output,
} from './gen/allocnet/v1/GetAgentInfoResponse.js';
export type { PluginInfo, PluginInfo__Output } from './gen/allocnet/v1/PluginInfo.js';
export type { AgentCounts, AgentCounts__Output } from './gen/allocnet/v1/AgentCounts.js';

// Messages of shared (types.proto).
export type {
  AllocNetworkStatus,
  AllocNetworkStatus__Output,
} from './gen/allocnet/v1/AllocNetworkStatus.js';
export type {
  AttachmentStatus,
  AttachmentStatus__Output,
} from './gen/allocnet/v1/AttachmentStatus.js';
export type { CniOrigin, CniOrigin__Output } from './gen/allocnet/v1/CniOrigin.js';
export type { DnsConfig, DnsConfig__Output } from './gen/allocnet/v1/DnsConfig.js';
export type { PortMapping, PortMapping__Output } from './gen/allocnet/v1/PortMapping.js';
export type { HostState, HostState__Output } from './gen/allocnet/v1/HostState.js';
export type { IptablesRule, IptablesRule__Output } from './gen/allocnet/v1/IptablesRule.js';
export type { IptablesChain, IptablesChain__Output } from './gen/allocnet/v1/IptablesChain.js';
export type { Reservation, Reservation__Output } from './gen/allocnet/v1/Reservation.js';
