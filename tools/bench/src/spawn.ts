#!/usr/bin/env node
// What starting one plugin costs a Node process, by how it is started and how big the process is:
//   posix_spawn   : @allocnet/spawn's default (glibc posix_spawn, CLONE_VM|CLONE_VFORK: no fork)
//   child_process : node:child_process.spawn (libuv forks the whole process, then execs)
//   execa         : execa 9 (on child_process; what iptables and `ip netns` ran with before
//                   @allocnet/spawn; kept as the reference point)
// Each sample is one whole run of a real plugin (`loopback` answering VERSION: stdin in, JSON out,
// exit reaped), sequential, with the process holding `--ballast` MiB of touched memory (0 is a
// fresh Node process; an agent with 1,000 allocations restored holds about 150–190 MiB, see
// docs/operations.md). Methods alternate in rounds so drift hits each alike. Prints the median
// per method and ballast and the ratios child_process/posix_spawn, execa/posix_spawn; writes
// tools/bench/results/spawn.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { execa } from 'execa';
import { spawnChild } from '@allocnet/spawn';
import type { SpawnMethod } from '@allocnet/spawn';
import { summarize } from './stats.js';

const here = dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({
  options: {
    n: { type: 'string', default: '200' },
    rounds: { type: 'string', default: '5' },
    ballast: { type: 'string', default: '0,150' },
    plugin: { type: 'string', default: '/usr/lib/cni/loopback' },
  },
});
const N = Number(values.n);
const ROUNDS = Number(values.rounds);
const BALLASTS = values.ballast.split(',').map(Number);
if (!Number.isInteger(N) || N < 1)
  throw new Error(`--n ${values.n} is not a positive whole number`);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1)
  throw new Error(`--rounds ${values.rounds} is not a positive whole number`);
if (BALLASTS.some((b) => !Number.isInteger(b) || b < 0 || b > 4096))
  throw new Error(`--ballast ${values.ballast} is not a list of MiB counts 0-4096`);
const PLUGIN = values.plugin;

type Method = SpawnMethod | 'execa';
const METHODS: readonly Method[] = ['posix_spawn', 'child_process', 'execa'];
const ENV = { CNI_COMMAND: 'VERSION', CNI_PATH: dirname(PLUGIN), PATH: '/usr/bin:/bin' };
const STDIN = '{"cniVersion":"1.0.0"}';

async function once(method: Method): Promise<void> {
  let stdout: string;
  if (method === 'execa') {
    ({ stdout } = await execa(PLUGIN, [], { env: ENV, extendEnv: false, input: STDIN }));
  } else {
    const child = spawnChild({ file: PLUGIN, env: ENV, method });
    const out: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.resume();
    child.stdin?.end(STDIN);
    const exit = await child.closed;
    if (exit.code !== 0) throw new Error(`${PLUGIN} VERSION ended ${JSON.stringify(exit)}`);
    stdout = Buffer.concat(out).toString();
  }
  if (!stdout.includes('supportedVersions')) throw new Error(`unexpected answer: ${stdout}`);
}

async function sample(method: Method, n: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await once(method);
    times.push(performance.now() - t0);
  }
  return times;
}

const ballast: Buffer[] = [];
const results: Record<string, Record<Method, number[]>> = {};
for (const mib of BALLASTS) {
  while (ballast.length < mib) ballast.push(Buffer.alloc(1 << 20, ballast.length & 0xff));
  ballast.length = mib;
  const rss = process.memoryUsage().rss / 2 ** 20;
  const times: Record<Method, number[]> = { posix_spawn: [], child_process: [], execa: [] };
  for (const m of METHODS) await sample(m, 10); // warm-up: JIT, page cache
  for (let round = 0; round < ROUNDS; round++) {
    const order = METHODS.map((_, i) => METHODS[(i + round) % METHODS.length] as Method);
    for (const m of order) times[m].push(...(await sample(m, N)));
  }
  results[String(mib)] = times;
  const med = (m: Method) => summarize(times[m]).median;
  console.log(
    `ballast ${mib} MiB (rss ${rss.toFixed(0)} MiB), ${ROUNDS * N} spawns each: ` +
      METHODS.map((m) => `${m} ${med(m).toFixed(2)} ms`).join(', ') +
      ` -> child_process/posix_spawn ${(med('child_process') / med('posix_spawn')).toFixed(2)}x,` +
      ` execa/posix_spawn ${(med('execa') / med('posix_spawn')).toFixed(2)}x`,
  );
}

const out = join(here, '..', 'results');
mkdirSync(out, { recursive: true });
const summary = Object.fromEntries(
  Object.entries(results).map(([mib, times]) => [
    mib,
    Object.fromEntries(METHODS.map((m) => [m, summarize(times[m]).median])),
  ]),
);
writeFileSync(
  join(out, 'spawn.json'),
  `${JSON.stringify({ benchmark: 'spawn', plugin: PLUGIN, n: N, rounds: ROUNDS, date: new Date().toISOString(), medianMs: summary }, null, 2)}\n`,
);
