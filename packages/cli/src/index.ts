export { createProgram, runCli } from './cli.js';
export type { CliIo } from './io.js';
export { defaultContainerId, parseCapArgs } from './cni-run.js';
// Exported here before @allocnet/cni had them; the CLI's defaults are @allocnet/cni's.
export { DEFAULT_CACHE_DIR, DEFAULT_CONF_DIR } from '@allocnet/cni/defaults';
