export { DEFAULT_CONCURRENT_TYPES, createCniRuntime } from './runtime.js';
export type { CniRuntime, CniRuntimeOptions } from './runtime.js';
export type { AddResult, GcReport } from './verbs.js';
export type { Attachment } from './attachment.js';
export type { CallOptions } from './invoke.js';
export type { NetworkVersions } from './negotiation.js';
export {
  CONFIG_EXTENSIONS,
  findNetwork,
  listConfigFiles,
  listNetworks,
  loadNetworkConfigFile,
  offeredVersions,
  parseNetworkConfig,
  parseNetworkConfigText,
} from './config.js';
export type { NetworkConfig, NetworkListing, PluginConfig } from './config.js';
export { CniError, WELL_KNOWN_CODES, codeName, invalidArgument, isCniError } from './errors.js';
export type { CniErrorCode, CniErrorDetails, CniVerb } from './errors.js';
export { createNodePluginExec, execPlugin } from './exec.js';
export type {
  NodePluginExecOptions,
  PluginExec,
  PluginExecRequest,
  PluginExecResult,
  PluginStartRequest,
  StartedPlugin,
} from './exec.js';
export { findPlugin } from './lookup.js';
export { DEFAULT_CACHE_DIR, DEFAULT_CONF_DIR, DEFAULT_PLUGIN_DIRS } from './defaults.js';
export { encodeResult, ipFamily, parseResult } from './result.js';
export type { CniDns, CniInterface, CniIp, CniResult, CniRoute } from './result.js';
export { createCniCache } from './cache.js';
export type { CacheEntry, CniCache } from './cache.js';
export {
  MAX_IFNAME_BYTES,
  NAME_PATTERN,
  checkArgs,
  checkContainerId,
  checkIfName,
  formatArgs,
  parseArgs,
} from './validate.js';
export type { CniArgs } from './validate.js';
export {
  RESULT_VERSIONS,
  SPEC_VERSION,
  compareVersions,
  isVersion,
  negotiateVersion,
} from './version.js';
export type { PluginVersions } from './version.js';
export { decode } from './decode.js';
export {
  Bool,
  Problem,
  Text,
  checkedString,
  failWith,
  list,
  oneOf,
  problem,
  section,
  whole,
} from './codecs.js';
export type { ListOptions, Section } from './codecs.js';
export type { DecodeProblem } from './decode.js';
export { silentLogger } from './logger.js';
export type { Logger } from './logger.js';
