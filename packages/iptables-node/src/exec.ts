import { inheritedEnv, runProcess } from '@allocnet/spawn';
import type { CommandResult, CommandRunner, CommandSpec } from './runner.js';

/**
 * The real `CommandRunner`, on @allocnet/spawn (posix_spawn: starting iptables does not fork the
 * agent, which costs 6 ms or more per command from an agent-sized process; docs/spawn.md): no
 * shell, the agent's environment with `LC_ALL=C` so messages read the same everywhere, stdin
 * /dev/null unless `input` is given, output kept whole, SIGKILL at the timeout or on abort.
 */
export function createSpawnRunner(): CommandRunner {
  return {
    run(spec: CommandSpec): Promise<CommandResult> {
      return runProcess({
        file: spec.file,
        args: spec.args,
        env: inheritedEnv({ LC_ALL: 'C' }),
        ...(spec.input === undefined ? {} : { input: spec.input }),
        ...(spec.signal === undefined ? {} : { signal: spec.signal }),
        ...(spec.timeoutMs === undefined ? {} : { timeoutMs: spec.timeoutMs }),
      });
    },
  };
}
