export { createProgram, runCli } from './cli.js';
export type { CliIo } from './io.js';
export {
  DEFAULT_CACHE_DIR,
  DEFAULT_CONF_DIR,
  defaultContainerId,
  parseCapArgs,
} from './cni-command.js';
