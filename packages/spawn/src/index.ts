export { SpawnError, isSpawnError } from './errors.js';
export { defaultSpawnMethod, releaseFreeMemory, spawnChild } from './spawn.js';
export type { ChildExit, SpawnMethod, SpawnOptions, SpawnedChild } from './spawn.js';
export { inheritedEnv, runProcess, startProcess } from './run.js';
export type { RunOptions, RunResult, StartOptions, StartedProcess } from './run.js';
export { createCommandExec } from './exec.js';
export type { CommandExec, CommandSpec } from './exec.js';
