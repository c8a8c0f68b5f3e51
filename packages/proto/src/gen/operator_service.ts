import type * as grpc from '@grpc/grpc-js';
import type { EnumTypeDefinition, MessageTypeDefinition } from '@grpc/proto-loader';

import type {
  AgentCounts as _allocnet_v1_AgentCounts,
  AgentCounts__Output as _allocnet_v1_AgentCounts__Output,
} from './allocnet/v1/AgentCounts.js';
import type {
  AllocNetworkStatus as _allocnet_v1_AllocNetworkStatus,
  AllocNetworkStatus__Output as _allocnet_v1_AllocNetworkStatus__Output,
} from './allocnet/v1/AllocNetworkStatus.js';
import type {
  AttachmentStatus as _allocnet_v1_AttachmentStatus,
  AttachmentStatus__Output as _allocnet_v1_AttachmentStatus__Output,
} from './allocnet/v1/AttachmentStatus.js';
import type {
  CniOrigin as _allocnet_v1_CniOrigin,
  CniOrigin__Output as _allocnet_v1_CniOrigin__Output,
} from './allocnet/v1/CniOrigin.js';
import type {
  DnsConfig as _allocnet_v1_DnsConfig,
  DnsConfig__Output as _allocnet_v1_DnsConfig__Output,
} from './allocnet/v1/DnsConfig.js';
import type {
  ForceCleanupRequest as _allocnet_v1_ForceCleanupRequest,
  ForceCleanupRequest__Output as _allocnet_v1_ForceCleanupRequest__Output,
} from './allocnet/v1/ForceCleanupRequest.js';
import type {
  ForceCleanupResponse as _allocnet_v1_ForceCleanupResponse,
  ForceCleanupResponse__Output as _allocnet_v1_ForceCleanupResponse__Output,
} from './allocnet/v1/ForceCleanupResponse.js';
import type {
  GetAgentInfoRequest as _allocnet_v1_GetAgentInfoRequest,
  GetAgentInfoRequest__Output as _allocnet_v1_GetAgentInfoRequest__Output,
} from './allocnet/v1/GetAgentInfoRequest.js';
import type {
  GetAgentInfoResponse as _allocnet_v1_GetAgentInfoResponse,
  GetAgentInfoResponse__Output as _allocnet_v1_GetAgentInfoResponse__Output,
} from './allocnet/v1/GetAgentInfoResponse.js';
import type {
  HostState as _allocnet_v1_HostState,
  HostState__Output as _allocnet_v1_HostState__Output,
} from './allocnet/v1/HostState.js';
import type {
  InvalidConfigFile as _allocnet_v1_InvalidConfigFile,
  InvalidConfigFile__Output as _allocnet_v1_InvalidConfigFile__Output,
} from './allocnet/v1/InvalidConfigFile.js';
import type {
  IptablesChain as _allocnet_v1_IptablesChain,
  IptablesChain__Output as _allocnet_v1_IptablesChain__Output,
} from './allocnet/v1/IptablesChain.js';
import type {
  IptablesRule as _allocnet_v1_IptablesRule,
  IptablesRule__Output as _allocnet_v1_IptablesRule__Output,
} from './allocnet/v1/IptablesRule.js';
import type {
  Leak as _allocnet_v1_Leak,
  Leak__Output as _allocnet_v1_Leak__Output,
} from './allocnet/v1/Leak.js';
import type {
  ListLeaksRequest as _allocnet_v1_ListLeaksRequest,
  ListLeaksRequest__Output as _allocnet_v1_ListLeaksRequest__Output,
} from './allocnet/v1/ListLeaksRequest.js';
import type {
  ListLeaksResponse as _allocnet_v1_ListLeaksResponse,
  ListLeaksResponse__Output as _allocnet_v1_ListLeaksResponse__Output,
} from './allocnet/v1/ListLeaksResponse.js';
import type {
  NetworkInfo as _allocnet_v1_NetworkInfo,
  NetworkInfo__Output as _allocnet_v1_NetworkInfo__Output,
} from './allocnet/v1/NetworkInfo.js';
import type {
  OperatorServiceClient as _allocnet_v1_OperatorServiceClient,
  OperatorServiceDefinition as _allocnet_v1_OperatorServiceDefinition,
} from './allocnet/v1/OperatorService.js';
import type {
  PluginInfo as _allocnet_v1_PluginInfo,
  PluginInfo__Output as _allocnet_v1_PluginInfo__Output,
} from './allocnet/v1/PluginInfo.js';
import type {
  PortMapping as _allocnet_v1_PortMapping,
  PortMapping__Output as _allocnet_v1_PortMapping__Output,
} from './allocnet/v1/PortMapping.js';
import type {
  ReapFailure as _allocnet_v1_ReapFailure,
  ReapFailure__Output as _allocnet_v1_ReapFailure__Output,
} from './allocnet/v1/ReapFailure.js';
import type {
  ReapLeaksProgress as _allocnet_v1_ReapLeaksProgress,
  ReapLeaksProgress__Output as _allocnet_v1_ReapLeaksProgress__Output,
} from './allocnet/v1/ReapLeaksProgress.js';
import type {
  ReapLeaksRequest as _allocnet_v1_ReapLeaksRequest,
  ReapLeaksRequest__Output as _allocnet_v1_ReapLeaksRequest__Output,
} from './allocnet/v1/ReapLeaksRequest.js';
import type {
  ReapStep as _allocnet_v1_ReapStep,
  ReapStep__Output as _allocnet_v1_ReapStep__Output,
} from './allocnet/v1/ReapStep.js';
import type {
  ReapSummary as _allocnet_v1_ReapSummary,
  ReapSummary__Output as _allocnet_v1_ReapSummary__Output,
} from './allocnet/v1/ReapSummary.js';
import type {
  ReloadConfigRequest as _allocnet_v1_ReloadConfigRequest,
  ReloadConfigRequest__Output as _allocnet_v1_ReloadConfigRequest__Output,
} from './allocnet/v1/ReloadConfigRequest.js';
import type {
  ReloadConfigResponse as _allocnet_v1_ReloadConfigResponse,
  ReloadConfigResponse__Output as _allocnet_v1_ReloadConfigResponse__Output,
} from './allocnet/v1/ReloadConfigResponse.js';
import type {
  Reservation as _allocnet_v1_Reservation,
  Reservation__Output as _allocnet_v1_Reservation__Output,
} from './allocnet/v1/Reservation.js';
import type {
  StoreHealth as _allocnet_v1_StoreHealth,
  StoreHealth__Output as _allocnet_v1_StoreHealth__Output,
} from './allocnet/v1/StoreHealth.js';
import type {
  StrayNamespace as _allocnet_v1_StrayNamespace,
  StrayNamespace__Output as _allocnet_v1_StrayNamespace__Output,
} from './allocnet/v1/StrayNamespace.js';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new (...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  allocnet: {
    v1: {
      AgentCounts: MessageTypeDefinition<
        _allocnet_v1_AgentCounts,
        _allocnet_v1_AgentCounts__Output
      >;
      AllocNetworkStatus: MessageTypeDefinition<
        _allocnet_v1_AllocNetworkStatus,
        _allocnet_v1_AllocNetworkStatus__Output
      >;
      AttachmentStatus: MessageTypeDefinition<
        _allocnet_v1_AttachmentStatus,
        _allocnet_v1_AttachmentStatus__Output
      >;
      CniOrigin: MessageTypeDefinition<_allocnet_v1_CniOrigin, _allocnet_v1_CniOrigin__Output>;
      DnsConfig: MessageTypeDefinition<_allocnet_v1_DnsConfig, _allocnet_v1_DnsConfig__Output>;
      ForceCleanupRequest: MessageTypeDefinition<
        _allocnet_v1_ForceCleanupRequest,
        _allocnet_v1_ForceCleanupRequest__Output
      >;
      ForceCleanupResponse: MessageTypeDefinition<
        _allocnet_v1_ForceCleanupResponse,
        _allocnet_v1_ForceCleanupResponse__Output
      >;
      GetAgentInfoRequest: MessageTypeDefinition<
        _allocnet_v1_GetAgentInfoRequest,
        _allocnet_v1_GetAgentInfoRequest__Output
      >;
      GetAgentInfoResponse: MessageTypeDefinition<
        _allocnet_v1_GetAgentInfoResponse,
        _allocnet_v1_GetAgentInfoResponse__Output
      >;
      HostState: MessageTypeDefinition<_allocnet_v1_HostState, _allocnet_v1_HostState__Output>;
      InvalidConfigFile: MessageTypeDefinition<
        _allocnet_v1_InvalidConfigFile,
        _allocnet_v1_InvalidConfigFile__Output
      >;
      IptablesChain: MessageTypeDefinition<
        _allocnet_v1_IptablesChain,
        _allocnet_v1_IptablesChain__Output
      >;
      IptablesRule: MessageTypeDefinition<
        _allocnet_v1_IptablesRule,
        _allocnet_v1_IptablesRule__Output
      >;
      Leak: MessageTypeDefinition<_allocnet_v1_Leak, _allocnet_v1_Leak__Output>;
      ListLeaksRequest: MessageTypeDefinition<
        _allocnet_v1_ListLeaksRequest,
        _allocnet_v1_ListLeaksRequest__Output
      >;
      ListLeaksResponse: MessageTypeDefinition<
        _allocnet_v1_ListLeaksResponse,
        _allocnet_v1_ListLeaksResponse__Output
      >;
      NetworkInfo: MessageTypeDefinition<
        _allocnet_v1_NetworkInfo,
        _allocnet_v1_NetworkInfo__Output
      >;
      /**
       * What operators (the `allocnet` CLI) call on a node's agent.
       */
      OperatorService: SubtypeConstructor<
        typeof grpc.Client,
        _allocnet_v1_OperatorServiceClient
      > & { service: _allocnet_v1_OperatorServiceDefinition };
      Phase: EnumTypeDefinition;
      PluginInfo: MessageTypeDefinition<_allocnet_v1_PluginInfo, _allocnet_v1_PluginInfo__Output>;
      PortMapping: MessageTypeDefinition<
        _allocnet_v1_PortMapping,
        _allocnet_v1_PortMapping__Output
      >;
      ReapFailure: MessageTypeDefinition<
        _allocnet_v1_ReapFailure,
        _allocnet_v1_ReapFailure__Output
      >;
      ReapLeaksProgress: MessageTypeDefinition<
        _allocnet_v1_ReapLeaksProgress,
        _allocnet_v1_ReapLeaksProgress__Output
      >;
      ReapLeaksRequest: MessageTypeDefinition<
        _allocnet_v1_ReapLeaksRequest,
        _allocnet_v1_ReapLeaksRequest__Output
      >;
      ReapStep: MessageTypeDefinition<_allocnet_v1_ReapStep, _allocnet_v1_ReapStep__Output>;
      ReapSummary: MessageTypeDefinition<
        _allocnet_v1_ReapSummary,
        _allocnet_v1_ReapSummary__Output
      >;
      ReloadConfigRequest: MessageTypeDefinition<
        _allocnet_v1_ReloadConfigRequest,
        _allocnet_v1_ReloadConfigRequest__Output
      >;
      ReloadConfigResponse: MessageTypeDefinition<
        _allocnet_v1_ReloadConfigResponse,
        _allocnet_v1_ReloadConfigResponse__Output
      >;
      Reservation: MessageTypeDefinition<
        _allocnet_v1_Reservation,
        _allocnet_v1_Reservation__Output
      >;
      StoreHealth: MessageTypeDefinition<
        _allocnet_v1_StoreHealth,
        _allocnet_v1_StoreHealth__Output
      >;
      StrayNamespace: MessageTypeDefinition<
        _allocnet_v1_StrayNamespace,
        _allocnet_v1_StrayNamespace__Output
      >;
    };
  };
}
