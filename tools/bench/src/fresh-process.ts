// Fresh processes timed as a user meets them: each command a new process in a node namespace
// (`nsenter --net=`), timed from just before its spawn to its end (wall time, its start included),
// the contenders taking turns round by round in interleave.ts's order. For the CLI's start, its
// `alloc list`, the cold reap and their comparators (`node -e 0`, the save read).
import { inheritedEnv, runProcess } from '@allocnet/spawn';
import { BenchError } from './errors.js';
import { roundOrder } from './interleave.js';

/**
 * Fresh processes timed from their spawn to their end, interleaved round by round (a Williams
 * square over the contenders): sample k of each was taken in round k, beside the others'.
 */
export type ProcessSamples<K extends string> = Readonly<Record<K, readonly number[]>>;

/** A command run once: its wall time and what it printed. */
export interface TimedRun {
  readonly ms: number;
  readonly stdout: string;
}

/**
 * `argv` as a fresh process in `netns`, timed from its spawn to its end; a non-zero exit, or an
 * exit after `timeoutMs`, throws (`driver-ended`): a failed command is no sample of its cost.
 */
export async function timedProcess(
  netns: string,
  argv: readonly string[],
  timeoutMs = 120_000,
): Promise<TimedRun> {
  const t0 = performance.now();
  const r = await runProcess({
    file: 'nsenter',
    args: [`--net=${netns}`, '--', ...argv],
    env: inheritedEnv(),
    timeoutMs,
  });
  const ms = performance.now() - t0;
  if (r.kind !== 'exited' || r.exitCode !== 0)
    throw new BenchError(
      `${argv.join(' ')} ${r.kind === 'exited' ? `exited ${r.exitCode}` : r.message}: ${r.stderr.slice(0, 500)}`,
      { code: 'driver-ended' },
    );
  return { ms, stdout: r.stdout };
}

/** `iptables-save` and `ip6tables-save` at once, fresh processes in `netns`: the read any reap must do. */
export async function timedSaves(netns: string): Promise<number> {
  const t0 = performance.now();
  await Promise.all([
    timedProcess(netns, ['iptables-save']),
    timedProcess(netns, ['ip6tables-save']),
  ]);
  return performance.now() - t0;
}

/** `node -e 0` in `netns`: a bare start of the Node that runs the CLI. */
export const NODE_BARE: readonly string[] = [process.execPath, '-e', '0'];

/**
 * `rounds` rounds of every command in `commands` once each, in interleave.ts's rotating order,
 * each a fresh process in `netns`; `check` is given each run's output (and may throw).
 */
export async function interleavedProcesses<K extends string>(
  netns: string,
  commands: Readonly<Record<K, readonly string[]>>,
  rounds: number,
  check: (k: K, out: TimedRun) => void = () => undefined,
): Promise<ProcessSamples<K>> {
  const names = Object.keys(commands) as K[];
  const out = Object.fromEntries(names.map((k) => [k, [] as number[]])) as Record<K, number[]>;
  for (let round = 0; round < rounds; round++)
    for (const k of roundOrder(names, round)) {
      const run = await timedProcess(netns, commands[k]);
      check(k, run);
      out[k].push(run.ms);
    }
  return out;
}
