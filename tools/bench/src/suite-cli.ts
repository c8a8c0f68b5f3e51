// The suite's scenarios of the CLI as an operator meets it, each command a fresh process
// (fresh-process.ts) in a node namespace of the run's own:
//   cli      : `node -e 0`, `allocnet version` and `allocnet --help`, interleaved round by round
//              (version asks an agent socket where none listens: the answer does not depend on
//              whatever serves the host's default socket)
//   reap-cli : `allocnet leaks --reap --local` of 1,000 full-shape leaks, a fresh node per round,
//              with the save read and `node -e 0` on the same node state just before (reap.ts)
// Each command's first run comes before the rounds and is kept apart: the CLI's code cache (in a
// directory of the suite's own, suite.ts) does not hold its code yet, and it writes it, as the
// first run after an install does. The rounds are the runs after it.
// (`allocnet alloc list` is measured in the scale scenario, against its agent holding M.)
import { join } from 'node:path';
import { NODE_BARE, interleavedProcesses, timedProcess } from './fresh-process.js';
import type { TimedRun } from './fresh-process.js';
import { BenchError } from './errors.js';
import { CLI_MAIN } from './paths.js';
import { reapOnce } from './reap.js';
import { log, withNode } from './suite-node.js';
import type { SuitePlan } from './suite-plan.js';
import type { CliRun, ReapCliRun } from './summary.js';

/** What each command must print for its time to count (the command did what it was asked). */
const PRINTS = { node: /^$/, version: /^allocnet \S+$/m, help: /^Usage: allocnet/m } as const;

/** `node -e 0`, `allocnet version` and `allocnet --help`, `rounds` rounds interleaved. */
export async function cli({ rounds }: SuitePlan['cli']): Promise<CliRun> {
  return withNode(0, async (_lab, node, _ctrs, dir) => {
    log(`cli: ${rounds} rounds of node -e 0, allocnet version, allocnet --help`);
    const commands = {
      node: NODE_BARE,
      version: [process.execPath, CLI_MAIN, 'version', '--address', join(dir, 'none.sock')],
      help: [process.execPath, CLI_MAIN, '--help'],
    };
    const check = (k: keyof typeof PRINTS, run: TimedRun) => {
      if (!PRINTS[k].test(run.stdout))
        throw new BenchError(`${k} printed ${JSON.stringify(run.stdout.slice(0, 200))}`, {
          code: 'driver-ended',
        });
    };
    const first = async (k: 'version' | 'help') => {
      const run = await timedProcess(node.path, commands[k]);
      check(k, run);
      return run.ms;
    };
    const firstMs = { version: await first('version'), help: await first('help') };
    const ms = await interleavedProcesses(node.path, commands, rounds, check);
    return { rounds, ms, firstMs };
  });
}

/** `allocnet leaks --reap --local` of `leaks` full-shape leaks, a fresh node per round. */
export async function reapCli({ leaks, rounds }: SuitePlan['reapCli']): Promise<ReapCliRun> {
  const out = { leaks, cliMs: [] as number[], saveMs: [] as number[], nodeMs: [] as number[] };
  const once = await reapOnce({ method: 'cli', shape: 'full', allocs: leaks, round: 0 });
  const first = { cliMs: once.ms, saveMs: once.saveMs, nodeMs: once.nodeMs ?? Number.NaN };
  log(
    `reap-cli first run (its code not in the CLI's code cache yet): ${first.cliMs.toFixed(0)} ms; save read ${first.saveMs.toFixed(0)} ms, node -e 0 ${first.nodeMs.toFixed(0)} ms`,
  );
  for (let round = 0; round < rounds; round++) {
    const t = await reapOnce({ method: 'cli', shape: 'full', allocs: leaks, round });
    out.cliMs.push(t.ms);
    out.saveMs.push(t.saveMs);
    out.nodeMs.push(t.nodeMs ?? Number.NaN);
    log(
      `reap-cli round ${round + 1}/${rounds}: allocnet leaks --reap --local of ${leaks} in ${t.ms.toFixed(0)} ms; save read ${t.saveMs.toFixed(0)} ms, node -e 0 ${(t.nodeMs ?? Number.NaN).toFixed(0)} ms`,
    );
  }
  return { ...out, first };
}
