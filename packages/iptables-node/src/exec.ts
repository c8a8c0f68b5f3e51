// The process seam is @allocnet/spawn's `CommandExec` (what `PluginExec` is to @allocnet/cni),
// the same for `ip netns`; this package's users keep the names it has always exported.
import type { RunResult } from '@allocnet/spawn';

export { createCommandExec as createSpawnExec } from '@allocnet/spawn';
export type { CommandExec, CommandSpec } from '@allocnet/spawn';

/**
 * How a process ended (@allocnet/spawn's `RunResult`). A non-zero exit is a result, not an
 * exception: the caller decides what it means.
 */
export type CommandResult = RunResult;
