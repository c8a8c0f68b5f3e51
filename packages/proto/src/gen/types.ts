import type * as grpc from '@grpc/grpc-js';
import type { EnumTypeDefinition, MessageTypeDefinition } from '@grpc/proto-loader';

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
  PortMapping as _allocnet_v1_PortMapping,
  PortMapping__Output as _allocnet_v1_PortMapping__Output,
} from './allocnet/v1/PortMapping.js';
import type {
  Reservation as _allocnet_v1_Reservation,
  Reservation__Output as _allocnet_v1_Reservation__Output,
} from './allocnet/v1/Reservation.js';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new (...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  allocnet: {
    v1: {
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
      HostState: MessageTypeDefinition<_allocnet_v1_HostState, _allocnet_v1_HostState__Output>;
      IptablesChain: MessageTypeDefinition<
        _allocnet_v1_IptablesChain,
        _allocnet_v1_IptablesChain__Output
      >;
      IptablesRule: MessageTypeDefinition<
        _allocnet_v1_IptablesRule,
        _allocnet_v1_IptablesRule__Output
      >;
      Phase: EnumTypeDefinition;
      PortMapping: MessageTypeDefinition<
        _allocnet_v1_PortMapping,
        _allocnet_v1_PortMapping__Output
      >;
      Reservation: MessageTypeDefinition<
        _allocnet_v1_Reservation,
        _allocnet_v1_Reservation__Output
      >;
    };
  };
}
