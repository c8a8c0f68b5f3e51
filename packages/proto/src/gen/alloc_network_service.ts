import type * as grpc from '@grpc/grpc-js';
import type { EnumTypeDefinition, MessageTypeDefinition } from '@grpc/proto-loader';

import type {
  AllocNetworkServiceClient as _allocnet_v1_AllocNetworkServiceClient,
  AllocNetworkServiceDefinition as _allocnet_v1_AllocNetworkServiceDefinition,
} from './allocnet/v1/AllocNetworkService.js';
import type {
  AllocNetworkStatus as _allocnet_v1_AllocNetworkStatus,
  AllocNetworkStatus__Output as _allocnet_v1_AllocNetworkStatus__Output,
} from './allocnet/v1/AllocNetworkStatus.js';
import type {
  AttachNetworkRequest as _allocnet_v1_AttachNetworkRequest,
  AttachNetworkRequest__Output as _allocnet_v1_AttachNetworkRequest__Output,
} from './allocnet/v1/AttachNetworkRequest.js';
import type {
  AttachNetworkResponse as _allocnet_v1_AttachNetworkResponse,
  AttachNetworkResponse__Output as _allocnet_v1_AttachNetworkResponse__Output,
} from './allocnet/v1/AttachNetworkResponse.js';
import type {
  AttachmentStatus as _allocnet_v1_AttachmentStatus,
  AttachmentStatus__Output as _allocnet_v1_AttachmentStatus__Output,
} from './allocnet/v1/AttachmentStatus.js';
import type {
  CheckAllocNetworkRequest as _allocnet_v1_CheckAllocNetworkRequest,
  CheckAllocNetworkRequest__Output as _allocnet_v1_CheckAllocNetworkRequest__Output,
} from './allocnet/v1/CheckAllocNetworkRequest.js';
import type {
  CheckAllocNetworkResponse as _allocnet_v1_CheckAllocNetworkResponse,
  CheckAllocNetworkResponse__Output as _allocnet_v1_CheckAllocNetworkResponse__Output,
} from './allocnet/v1/CheckAllocNetworkResponse.js';
import type {
  CniOrigin as _allocnet_v1_CniOrigin,
  CniOrigin__Output as _allocnet_v1_CniOrigin__Output,
} from './allocnet/v1/CniOrigin.js';
import type {
  DetachNetworkRequest as _allocnet_v1_DetachNetworkRequest,
  DetachNetworkRequest__Output as _allocnet_v1_DetachNetworkRequest__Output,
} from './allocnet/v1/DetachNetworkRequest.js';
import type {
  DetachNetworkResponse as _allocnet_v1_DetachNetworkResponse,
  DetachNetworkResponse__Output as _allocnet_v1_DetachNetworkResponse__Output,
} from './allocnet/v1/DetachNetworkResponse.js';
import type {
  DnsConfig as _allocnet_v1_DnsConfig,
  DnsConfig__Output as _allocnet_v1_DnsConfig__Output,
} from './allocnet/v1/DnsConfig.js';
import type {
  GetAllocNetworkRequest as _allocnet_v1_GetAllocNetworkRequest,
  GetAllocNetworkRequest__Output as _allocnet_v1_GetAllocNetworkRequest__Output,
} from './allocnet/v1/GetAllocNetworkRequest.js';
import type {
  GetAllocNetworkResponse as _allocnet_v1_GetAllocNetworkResponse,
  GetAllocNetworkResponse__Output as _allocnet_v1_GetAllocNetworkResponse__Output,
} from './allocnet/v1/GetAllocNetworkResponse.js';
import type {
  HostState as _allocnet_v1_HostState,
  HostState__Output as _allocnet_v1_HostState__Output,
} from './allocnet/v1/HostState.js';
import type {
  IptablesChain as _allocnet_v1_IptablesChain,
  IptablesChain__Output as _allocnet_v1_IptablesChain__Output,
} from './allocnet/v1/IptablesChain.js';
import type {
  IptablesRule as _allocnet_v1_IptablesRule,
  IptablesRule__Output as _allocnet_v1_IptablesRule__Output,
} from './allocnet/v1/IptablesRule.js';
import type {
  LegacyNetwork as _allocnet_v1_LegacyNetwork,
  LegacyNetwork__Output as _allocnet_v1_LegacyNetwork__Output,
} from './allocnet/v1/LegacyNetwork.js';
import type {
  LegacyPort as _allocnet_v1_LegacyPort,
  LegacyPort__Output as _allocnet_v1_LegacyPort__Output,
} from './allocnet/v1/LegacyPort.js';
import type {
  ListAllocNetworksRequest as _allocnet_v1_ListAllocNetworksRequest,
  ListAllocNetworksRequest__Output as _allocnet_v1_ListAllocNetworksRequest__Output,
} from './allocnet/v1/ListAllocNetworksRequest.js';
import type {
  ListAllocNetworksResponse as _allocnet_v1_ListAllocNetworksResponse,
  ListAllocNetworksResponse__Output as _allocnet_v1_ListAllocNetworksResponse__Output,
} from './allocnet/v1/ListAllocNetworksResponse.js';
import type {
  NetworkAttachment as _allocnet_v1_NetworkAttachment,
  NetworkAttachment__Output as _allocnet_v1_NetworkAttachment__Output,
} from './allocnet/v1/NetworkAttachment.js';
import type {
  Port as _allocnet_v1_Port,
  Port__Output as _allocnet_v1_Port__Output,
} from './allocnet/v1/Port.js';
import type {
  PortMapping as _allocnet_v1_PortMapping,
  PortMapping__Output as _allocnet_v1_PortMapping__Output,
} from './allocnet/v1/PortMapping.js';
import type {
  Reservation as _allocnet_v1_Reservation,
  Reservation__Output as _allocnet_v1_Reservation__Output,
} from './allocnet/v1/Reservation.js';
import type {
  SetupAllocNetworkRequest as _allocnet_v1_SetupAllocNetworkRequest,
  SetupAllocNetworkRequest__Output as _allocnet_v1_SetupAllocNetworkRequest__Output,
} from './allocnet/v1/SetupAllocNetworkRequest.js';
import type {
  SetupAllocNetworkResponse as _allocnet_v1_SetupAllocNetworkResponse,
  SetupAllocNetworkResponse__Output as _allocnet_v1_SetupAllocNetworkResponse__Output,
} from './allocnet/v1/SetupAllocNetworkResponse.js';
import type {
  TeardownAllocNetworkRequest as _allocnet_v1_TeardownAllocNetworkRequest,
  TeardownAllocNetworkRequest__Output as _allocnet_v1_TeardownAllocNetworkRequest__Output,
} from './allocnet/v1/TeardownAllocNetworkRequest.js';
import type {
  TeardownAllocNetworkResponse as _allocnet_v1_TeardownAllocNetworkResponse,
  TeardownAllocNetworkResponse__Output as _allocnet_v1_TeardownAllocNetworkResponse__Output,
} from './allocnet/v1/TeardownAllocNetworkResponse.js';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new (...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  allocnet: {
    v1: {
      /**
       * What the scheduler calls on each client node's agent to give allocations their network.
       * Requests are validated before anything runs: a bad field fails the call with INVALID_ARGUMENT,
       * naming the field, and changes nothing.
       */
      AllocNetworkService: SubtypeConstructor<
        typeof grpc.Client,
        _allocnet_v1_AllocNetworkServiceClient
      > & { service: _allocnet_v1_AllocNetworkServiceDefinition };
      AllocNetworkStatus: MessageTypeDefinition<
        _allocnet_v1_AllocNetworkStatus,
        _allocnet_v1_AllocNetworkStatus__Output
      >;
      AttachNetworkRequest: MessageTypeDefinition<
        _allocnet_v1_AttachNetworkRequest,
        _allocnet_v1_AttachNetworkRequest__Output
      >;
      AttachNetworkResponse: MessageTypeDefinition<
        _allocnet_v1_AttachNetworkResponse,
        _allocnet_v1_AttachNetworkResponse__Output
      >;
      AttachmentStatus: MessageTypeDefinition<
        _allocnet_v1_AttachmentStatus,
        _allocnet_v1_AttachmentStatus__Output
      >;
      CheckAllocNetworkRequest: MessageTypeDefinition<
        _allocnet_v1_CheckAllocNetworkRequest,
        _allocnet_v1_CheckAllocNetworkRequest__Output
      >;
      CheckAllocNetworkResponse: MessageTypeDefinition<
        _allocnet_v1_CheckAllocNetworkResponse,
        _allocnet_v1_CheckAllocNetworkResponse__Output
      >;
      CniOrigin: MessageTypeDefinition<_allocnet_v1_CniOrigin, _allocnet_v1_CniOrigin__Output>;
      DetachNetworkRequest: MessageTypeDefinition<
        _allocnet_v1_DetachNetworkRequest,
        _allocnet_v1_DetachNetworkRequest__Output
      >;
      DetachNetworkResponse: MessageTypeDefinition<
        _allocnet_v1_DetachNetworkResponse,
        _allocnet_v1_DetachNetworkResponse__Output
      >;
      DnsConfig: MessageTypeDefinition<_allocnet_v1_DnsConfig, _allocnet_v1_DnsConfig__Output>;
      GetAllocNetworkRequest: MessageTypeDefinition<
        _allocnet_v1_GetAllocNetworkRequest,
        _allocnet_v1_GetAllocNetworkRequest__Output
      >;
      GetAllocNetworkResponse: MessageTypeDefinition<
        _allocnet_v1_GetAllocNetworkResponse,
        _allocnet_v1_GetAllocNetworkResponse__Output
      >;
      HostState: MessageTypeDefinition<_allocnet_v1_HostState, _allocnet_v1_HostState__Output>;
      IptablesChain: MessageTypeDefinition<
        _allocnet_v1_IptablesChain,
        _allocnet_v1_IptablesChain__Output
      >;
      IptablesRule: MessageTypeDefinition<
        _allocnet_v1_IptablesRule,
        _allocnet_v1_IptablesRule__Output
      >;
      LegacyNetwork: MessageTypeDefinition<
        _allocnet_v1_LegacyNetwork,
        _allocnet_v1_LegacyNetwork__Output
      >;
      LegacyPort: MessageTypeDefinition<_allocnet_v1_LegacyPort, _allocnet_v1_LegacyPort__Output>;
      ListAllocNetworksRequest: MessageTypeDefinition<
        _allocnet_v1_ListAllocNetworksRequest,
        _allocnet_v1_ListAllocNetworksRequest__Output
      >;
      ListAllocNetworksResponse: MessageTypeDefinition<
        _allocnet_v1_ListAllocNetworksResponse,
        _allocnet_v1_ListAllocNetworksResponse__Output
      >;
      NetworkAttachment: MessageTypeDefinition<
        _allocnet_v1_NetworkAttachment,
        _allocnet_v1_NetworkAttachment__Output
      >;
      Phase: EnumTypeDefinition;
      Port: MessageTypeDefinition<_allocnet_v1_Port, _allocnet_v1_Port__Output>;
      PortMapping: MessageTypeDefinition<
        _allocnet_v1_PortMapping,
        _allocnet_v1_PortMapping__Output
      >;
      Reservation: MessageTypeDefinition<
        _allocnet_v1_Reservation,
        _allocnet_v1_Reservation__Output
      >;
      SetupAllocNetworkRequest: MessageTypeDefinition<
        _allocnet_v1_SetupAllocNetworkRequest,
        _allocnet_v1_SetupAllocNetworkRequest__Output
      >;
      SetupAllocNetworkResponse: MessageTypeDefinition<
        _allocnet_v1_SetupAllocNetworkResponse,
        _allocnet_v1_SetupAllocNetworkResponse__Output
      >;
      TeardownAllocNetworkRequest: MessageTypeDefinition<
        _allocnet_v1_TeardownAllocNetworkRequest,
        _allocnet_v1_TeardownAllocNetworkRequest__Output
      >;
      TeardownAllocNetworkResponse: MessageTypeDefinition<
        _allocnet_v1_TeardownAllocNetworkResponse,
        _allocnet_v1_TeardownAllocNetworkResponse__Output
      >;
    };
  };
}
