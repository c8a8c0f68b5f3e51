// handBackMemory against this process's own heap: a full collection takes back garbage at once.
import { handBackMemory, memoryMiB } from './memory.js';

describe('handBackMemory', () => {
  it('collects the garbage of a burst at once and says how long the collection took', async () => {
    // The burst's objects are unreachable once this returns.
    const before = (() => {
      const burst = Array.from({ length: 500_000 }, (_, i) => ({ i, s: `x${i}` }));
      expect(burst.length).toBe(500_000);
      return memoryMiB();
    })();
    const gcMs = await handBackMemory();
    const after = memoryMiB();
    expect(typeof gcMs).toBe('number');
    expect(after.heapUsedMiB).toBeLessThan(before.heapUsedMiB - 15);
    expect(after.rssMiB).toBeGreaterThan(0);
  });
});
