export { createCniConfigurator } from './configurator.js';
export { ConfiguratorError, invalidField, isConfiguratorError } from './errors.js';
export type { ConfiguratorErrorCode, ConfiguratorErrorDetails } from './errors.js';
export { NO_ADDRESS, dnsOf, pickAddress } from './address.js';
export type { PickedAddress } from './address.js';
export { createNodeKernel } from './node.js';
export type { NodeKernel } from './node.js';
export { cniArgs } from './args.js';
export { portMappings, portMappingsOverlap, requestedPortMappings } from './ports.js';
export type { HostPortOf } from './ports.js';
export {
  MAX_ALLOC_ID_LENGTH,
  RESERVED_ARG_KEYS,
  checkAllocId,
  decodeSpec,
  isValidSpec,
} from './spec.js';
export type { ValidAllocSpec } from './spec.js';
export {
  DEFAULT_ADMIN_CHAIN,
  DEFAULT_BRIDGE,
  DEFAULT_NETWORK_NAME,
  DEFAULT_SUBNET,
  defaultNetworkConfig,
  defaultNetworkSettings,
} from './networks.js';
export type { DefaultNetworkSettings } from './networks.js';
export { DEFAULT_IPAM_DATA_DIR } from './defaults.js';
export { allocChains } from './marks.js';
export type {
  AllocAttachment,
  AllocNetworking,
  AllocNetworkSpec,
  AllocNetworkStatus,
  AllocPort,
  CheckBatch,
  CheckOptions,
  CleanupReport,
  CniConfigurator,
  CniConfiguratorOptions,
  DefaultNetworkOptions,
  DnsConfig,
  FoundChain,
  FoundReservation,
  FoundRule,
  HoldReport,
  HostState,
  IptablesState,
  Leak,
  LeakReport,
  LeakSweeper,
  LegacyNetwork,
  LegacyPort,
  LostAddress,
  NetworkCatalog,
  NetworkInfo,
  NetworkSnapshot,
  OperationOptions,
  PortMapping,
  ReapFence,
  ReapProgress,
  ReapReport,
  RequestedPortMapping,
  RetryOptions,
  SetupOptions,
  SetupOutcome,
  TeardownOptions,
  TeardownReport,
} from './types.js';
export { createRouteReader } from './route-reader.js';
export type { NamespaceState, RouteReader, RouteReaderOptions } from './route-reader.js';
export type { NetAddress, NetLink, NetRoute } from './rtnetlink.js';
