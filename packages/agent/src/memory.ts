// Handing memory back after a burst of work: the restore of a thousand allocations, the reap
// path's warm-up and a thousand setups in a row leave V8's heap grown with garbage and glibc's
// heap with freed blocks, which the resident size goes on counting: V8's memory reducer gets to it
// minutes later or never (an agent at 201 MiB after 1,000 setups stayed there while idle). One
// full collection that compacts the whole old space, a pause for V8's background unmapping of the
// freed pages (done within 50 ms in a test with 200 MiB freed), then glibc's malloc_trim.
//
// What a plain full collection leaves (measured on the agent after 1,000 setups, V8 11.3):
// - the old space's pages with a few live objects each: 60 MiB kept for 23 MiB live. Compacting
//   every page (`--compact-on-every-full-gc`, set for this collection only) moves the live
//   objects together and frees the rest.
// - the young generation at its largest, 32 MiB resident on a machine with a lot of memory. V8
//   shrinks it only at a full collection after a few seconds of allocating little: so the idle
//   hand-back waits that long (IDLE_HAND_BACK).
import { setTimeout as sleep } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { RunnerConfigurator } from '@allocnet/alloc-runner';
import { releaseFreeMemory } from '@allocnet/spawn';
import type { AgentLogger } from './logging.js';

/** How long the freed pages are given to be unmapped before glibc's trim and the RSS read. */
const UNMAP_WAIT_MS = 100;

let collector: (() => void) | null | undefined;

/**
 * V8's full collection, compacting every page: `gc` of a fresh context once `--expose-gc` is set
 * at run time (what jest's leak detector does; the agent's own context gets no `gc`). Null when
 * V8 refuses.
 */
function fullCollection(): (() => void) | null {
  if (collector === undefined) {
    try {
      setFlagsFromString('--expose-gc');
      const gc: unknown = runInNewContext('gc');
      collector =
        typeof gc === 'function'
          ? () => {
              setFlagsFromString('--compact-on-every-full-gc');
              try {
                (gc as () => void)();
              } finally {
                setFlagsFromString('--no-compact-on-every-full-gc');
              }
            }
          : null;
    } catch {
      collector = null;
    }
  }
  return collector;
}

/**
 * After a burst of work: a full collection, the unmapping's pause, malloc_trim; the collection's
 * ms (undefined without one). Never throws.
 */
export async function handBackMemory(): Promise<number | undefined> {
  const gc = fullCollection();
  const started = performance.now();
  gc?.();
  const ms = gc === null ? undefined : Math.round(performance.now() - started);
  await sleep(UNMAP_WAIT_MS);
  try {
    releaseFreeMemory();
  } catch {
    // Nothing depends on it: the memory goes back later, or stays counted.
  }
  return ms;
}

/** The process's memory in MiB: resident, and the V8 heap's size and use. */
export function memoryMiB(): { rssMiB: number; heapTotalMiB: number; heapUsedMiB: number } {
  const m = process.memoryUsage();
  const mib = (n: number) => Math.round(n / 2 ** 20);
  return { rssMiB: mib(m.rss), heapTotalMiB: mib(m.heapTotal), heapUsedMiB: mib(m.heapUsed) };
}

/** When the agent hands memory back after a burst of operations (`createIdleHandBack`). */
export interface IdleHandBackOptions {
  /** How long no operation (or call) has run. Default IDLE_HAND_BACK.idleMs. */
  readonly idleMs?: number;
  /** How much the RSS grew since the last hand-back (or the start). Default IDLE_HAND_BACK.growthMiB. */
  readonly growthMiB?: number;
  /** The seams a test replaces: the RSS in MiB, and the hand-back. */
  readonly rssMiB?: () => number;
  readonly handBack?: () => Promise<number | undefined>;
}

/**
 * The idle hand-back's defaults. Eight seconds without an operation or a call: V8 shrinks its
 * young generation only at a full collection once its allocation rate over the last five seconds
 * is low (at 3 s after a burst it did not, at 6 s it did, in a test). A growth below 24 MiB is
 * not worth a full collection.
 */
export const IDLE_HAND_BACK = { idleMs: 8000, growthMiB: 24 } as const;

export interface IdleHandBack {
  /** Marks an operation (or a call) begun; the function it returns marks it ended (once). */
  begin(): () => void;
  /** Memory was handed back another way (the restore's, the warm-up's): growth counts from now. */
  rebase(): void;
  /** No more hand-backs: the agent stops. */
  stop(): void;
}

/**
 * Hands memory back (`handBackMemory`) once no operation has run for `idleMs` and the RSS grew
 * by `growthMiB` since the last hand-back, and logs it. Nothing runs while operations do. The
 * agent marks its gRPC calls as operations too: the collection stops the process for tens of
 * milliseconds (76 ms after 1,000 setups), which a call would wait out. With operations alone, a
 * CI run of the integration test of a big reap's latency (probes every 20 ms) failed in both its
 * attempts, 168 and 209 ms against 23 and 12 quiet; it did not fail here, and a hand-back landing among the
 * probes fits its timing.
 */
export function createIdleHandBack(
  logger: Pick<AgentLogger, 'info'>,
  options: IdleHandBackOptions = {},
): IdleHandBack {
  const idleMs = options.idleMs ?? IDLE_HAND_BACK.idleMs;
  const growthMiB = options.growthMiB ?? IDLE_HAND_BACK.growthMiB;
  const rssMiB = options.rssMiB ?? (() => process.memoryUsage.rss() / 2 ** 20);
  const handBack = options.handBack ?? handBackMemory;
  const state = { running: 0, stopped: false };
  // A call, so that the check after the hand-back's await is not narrowed away: `stop` may come
  // while it runs.
  const stopped = (): boolean => state.stopped;
  let timer: NodeJS.Timeout | undefined;
  let baseline = rssMiB();

  async function whenIdle(): Promise<void> {
    timer = undefined;
    const before = rssMiB();
    if (state.stopped || state.running > 0 || before - baseline < growthMiB) return;
    const gcMs = await handBack();
    const after = memoryMiB();
    baseline = rssMiB();
    if (stopped()) return;
    logger.info('handed memory back after a burst of operations', {
      rssBeforeMiB: Math.round(before),
      ...after,
      ...(gcMs === undefined ? {} : { gcMs }),
    });
  }

  return {
    begin() {
      state.running++;
      clearTimeout(timer);
      timer = undefined;
      let ended = false;
      return () => {
        if (ended) return;
        ended = true;
        state.running--;
        if (state.running > 0 || state.stopped) return;
        timer = setTimeout(() => void whenIdle(), idleMs);
        timer.unref();
      };
    },
    rebase() {
      baseline = rssMiB();
    },
    stop() {
      state.stopped = true;
      clearTimeout(timer);
    },
  };
}

/**
 * `configurator` as the runner sees it, each operation marked with `begin` while it runs: the
 * setups, CHECKs, teardowns, leak scans, reaps and forced cleanups.
 */
export function trackingOperations(
  c: RunnerConfigurator,
  begin: () => () => void,
): RunnerConfigurator {
  const track =
    <A extends unknown[], R>(f: (...a: A) => Promise<R>) =>
    async (...a: A): Promise<R> => {
      const end = begin();
      try {
        return await f(...a);
      } finally {
        end();
      }
    };
  return {
    catalog: () => c.catalog(),
    checkSpec: (spec) => {
      c.checkSpec(spec);
    },
    portMappingsOf: (spec) => c.portMappingsOf(spec),
    checkBatch: () => c.checkBatch(),
    holdAddresses: (...a) => c.holdAddresses(...a),
    setup: track((...a: Parameters<RunnerConfigurator['setup']>) => c.setup(...a)),
    check: track((...a: Parameters<RunnerConfigurator['check']>) => c.check(...a)),
    teardown: track((...a: Parameters<RunnerConfigurator['teardown']>) => c.teardown(...a)),
    findLeaks: track((...a: Parameters<RunnerConfigurator['findLeaks']>) => c.findLeaks(...a)),
    reapLeaks: track((...a: Parameters<RunnerConfigurator['reapLeaks']>) => c.reapLeaks(...a)),
    forceCleanup: track((...a: Parameters<RunnerConfigurator['forceCleanup']>) =>
      c.forceCleanup(...a),
    ),
  };
}
