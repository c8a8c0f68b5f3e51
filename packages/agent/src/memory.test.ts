// handBackMemory against this process's own heap: a full collection takes back garbage at once.
import { handBackMemory, memoryMiB } from './memory.js';

describe('handBackMemory', () => {
  it('collects the garbage of a burst at once and says how long the collection took', async () => {
    let burst: { i: number; s: string }[] | undefined = Array.from({ length: 500_000 }, (_, i) => ({
      i,
      s: `x${i}`,
    }));
    const before = memoryMiB();
    expect(burst.length).toBe(500_000);
    burst = undefined;
    const gcMs = await handBackMemory();
    const after = memoryMiB();
    expect(typeof gcMs).toBe('number');
    expect(after.heapUsedMiB).toBeLessThan(before.heapUsedMiB - 15);
    expect(after.rssMiB).toBeGreaterThan(0);
  });
});
