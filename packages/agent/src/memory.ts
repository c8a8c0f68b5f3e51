// Handing memory back after a burst of work: the restore of a thousand allocations and the reap
// path's warm-up leave V8's heap grown with garbage and glibc's heap with freed blocks, which the
// resident size goes on counting until V8's memory reducer gets to it (seconds to minutes later).
// Measured with 1,000 allocations: RSS 162-166 MiB when the restore was done, heap 100 MiB of
// which 70 used (docs/performance.md). One full collection, a pause for V8's background
// unmapping of the freed pages (done within 50 ms in a test with 200 MiB freed), then glibc's
// malloc_trim.
import { setTimeout as sleep } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { releaseFreeMemory } from '@allocnet/spawn';

/** How long the freed pages are given to be unmapped before glibc's trim and the RSS read. */
const UNMAP_WAIT_MS = 100;

let collector: (() => void) | null | undefined;

/**
 * V8's full collection: `gc` of a fresh context once `--expose-gc` is set at run time (what
 * jest's leak detector does; the agent's own context gets no `gc`). Null when V8 refuses.
 */
function fullCollection(): (() => void) | null {
  if (collector === undefined) {
    try {
      setFlagsFromString('--expose-gc');
      const gc: unknown = runInNewContext('gc');
      collector = typeof gc === 'function' ? (gc as () => void) : null;
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
