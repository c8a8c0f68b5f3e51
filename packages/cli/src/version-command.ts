import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { connectOptions } from './connect-options.js';
import type { ConnectOptions } from './connect-options.js';
import type { CliIo } from './io.js';
import { withAgent } from './with-agent.js';

/** This package's version, from its package.json. */
export function cliVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  return pkg.version;
}

/** `allocnet version`: the CLI's version and, when it answers, the agent's. */
export function versionCommand(io: CliIo): Command {
  return connectOptions(
    new Command('version')
      .description('print the version of the CLI and of the agent, if one answers')
      .option('--json', 'print JSON'),
  ).action(async (options: ConnectOptions & { json?: boolean }) => {
    const cli = cliVersion();
    let agent: string | undefined;
    let store: string | undefined;
    let problem: string | undefined;
    try {
      const info = await withAgent({ ...options, timeout: '3000' }, (a) =>
        a.unary(a.operator, 'GetAgentInfo', {}),
      );
      agent = info.version;
      // An agent whose data dir is full answers reads and refuses writes: say so here too.
      if (info.store?.writable === false) store = info.store.problem;
    } catch (error) {
      problem = error instanceof Error ? error.message : String(error);
    }
    if (options.json === true) {
      io.stdout.write(
        `${JSON.stringify({ cli, agent: agent ?? null, agentError: problem ?? null, agentStoreProblem: store ?? null }, null, 2)}\n`,
      );
      return;
    }
    io.stdout.write(`allocnet ${cli}\n`);
    io.stdout.write(
      agent === undefined
        ? `agent: not reachable (${problem ?? ''})\n`
        : `agent ${agent} at ${options.address}\n`,
    );
    if (store !== undefined) {
      io.stdout.write(`agent's state store is not writable: ${store}\n`);
    }
  });
}
