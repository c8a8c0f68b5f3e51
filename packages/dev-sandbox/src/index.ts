export { DEV_OWNED, agentArgs, runDevAgent, sandboxPaths } from './sandbox.js';
export type {
  DevFlags,
  DevIo,
  DevOptions,
  DevSignal,
  DevSignalSource,
  SandboxPaths,
} from './sandbox.js';
export { DevError, isDevError, problemOf } from './errors.js';
export type { DevErrorCode, DevErrorDetails } from './errors.js';
