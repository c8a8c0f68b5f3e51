export { createIpNetnsManager } from './manager.js';
export type {
  CallOptions,
  CommandRequest,
  IpNetnsManager,
  IpNetnsManagerOptions,
  NetnsManager,
} from './manager.js';
export {
  MAX_PATH_LENGTH,
  NETNS_RUN_DIR,
  absolutePathProblem,
  netnsNameProblem,
  netnsPathOf,
  resolveNetns,
  tidyPath,
} from './paths.js';
export { checkNetnsName, parseLinkNames, parseNetnsList, parsePids } from './names.js';
export { NetnsError, isNetnsError } from './errors.js';
// The seam `run` takes, re-exported for callers that write a fake.
export type { CommandExec, CommandSpec } from '@allocnet/spawn';
export type { NetnsCommandOutcome, NetnsErrorCode, NetnsErrorDetails } from './errors.js';
