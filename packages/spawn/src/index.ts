export { SpawnError, defaultSpawnMethod, isSpawnError, spawnChild } from './spawn.js';
export type { ChildExit, SpawnMethod, SpawnOptions, SpawnedChild } from './spawn.js';
export { inheritedEnv, runProcess } from './run.js';
export type { RunOptions, RunResult } from './run.js';
