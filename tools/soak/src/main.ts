#!/usr/bin/env node
// allocnet-soak: parses the flags, runs the soak with SIGINT/SIGTERM wired to its signal, prints
// the summary (text, or JSON with --json) and exits 0 (passed), 1 (failed, or could not run),
// 2 (a bad flag) or 130 (interrupted, after cleaning up).
import { messageOf } from '@allocnet/base';
import { USAGE, parseSoakArgs } from './args.js';
import { isSoakError } from './errors.js';
import { runSoak } from './soak.js';
import { formatSummary } from './summary.js';

/** The agent's entry beside its package's main module (`dist/index.js` → `dist/main.js`). */
function agentEntry(): string {
  return new URL('./main.js', import.meta.resolve('@allocnet/agent')).pathname;
}

async function main(argv: readonly string[]): Promise<number> {
  let options;
  try {
    options = parseSoakArgs(argv);
  } catch (error) {
    if (!isSoakError(error)) throw error;
    process.stderr.write(`${error.message}\n\n${USAGE}`);
    return 2;
  }
  if (options === 'help') {
    process.stdout.write(USAGE);
    return 0;
  }
  const stop = new AbortController();
  const onSignal = (): void => {
    if (!stop.signal.aborted)
      process.stderr.write('soak: interrupted; stopping the churn and cleaning up\n');
    stop.abort();
  };
  // Kept until the end, so a second Ctrl-C does not end the process halfway through the cleanup.
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    const summary = await runSoak({
      ...options,
      agentEntry: agentEntry(),
      signal: stop.signal,
      log: (line) => process.stderr.write(`${line}\n`),
    });
    process.stdout.write(
      options.json ? `${JSON.stringify(summary, null, 2)}\n` : formatSummary(summary),
    );
    if (!summary.ok)
      process.stderr.write(
        `soak FAILED: ${summary.problems.map((p) => p.split('\n')[0]).join('; ')}\n`,
      );
    return summary.ok ? 0 : 1;
  } catch (error) {
    process.stderr.write(`soak FAILED: ${messageOf(error)}\n`);
    return isSoakError(error) && error.code === 'interrupted' ? 130 : 1;
  } finally {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  }
}

process.exitCode = await main(process.argv.slice(2));
