// handBackMemory against this process's own heap: a full collection takes back garbage at once;
// the idle hand-back over a made-up RSS; the operations it is told of.
import type { RunnerConfigurator } from '@allocnet/alloc-runner';
import { createIdleHandBack, handBackMemory, memoryMiB, trackingOperations } from './memory.js';

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

describe('createIdleHandBack', () => {
  const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  /** An idle hand-back over a made-up RSS, counting its hand-backs and log lines. */
  function rig(growthMiB = 24, idleMs = 30) {
    const state = { rss: 100, handBacks: 0, lines: [] as Record<string, unknown>[] };
    const idle = createIdleHandBack(
      {
        info: (_message: string, fields?: Record<string, unknown>) =>
          void state.lines.push(fields ?? {}),
      },
      {
        idleMs,
        growthMiB,
        rssMiB: () => state.rss,
        handBack: () => {
          state.handBacks++;
          state.rss = 90;
          return Promise.resolve(7);
        },
      },
    );
    return { state, idle };
  }

  it('hands memory back once operations stopped for idleMs and the RSS grew, and logs it', async () => {
    const { state, idle } = rig();
    const first = idle.begin();
    const second = idle.begin();
    state.rss = 160;
    first();
    await wait(80);
    // One operation still runs: nothing is done while it does.
    expect(state.handBacks).toBe(0);
    second();
    second(); // ending twice counts once
    await wait(80);
    expect(state.handBacks).toBe(1);
    expect(state.lines).toEqual([expect.objectContaining({ rssBeforeMiB: 160, gcMs: 7 })]);
    idle.stop();
  });

  it('leaves memory alone when the RSS grew less than growthMiB since the start', async () => {
    const { state, idle } = rig(24);
    state.rss = 120;
    idle.begin()();
    await wait(80);
    expect(state.handBacks).toBe(0);
    idle.stop();
  });

  it('waits again from the end of an operation begun before the idle time was up', async () => {
    // Wide margins: a loaded machine may run the second begin late, never 290 ms late.
    const { state, idle } = rig(24, 300);
    state.rss = 200;
    idle.begin()();
    await wait(10);
    const late = idle.begin();
    await wait(400);
    expect(state.handBacks).toBe(0);
    late();
    await wait(500);
    expect(state.handBacks).toBe(1);
    idle.stop();
  });

  it('counts the growth from a hand-back done another way (rebase)', async () => {
    const { state, idle } = rig(24);
    state.rss = 200;
    idle.rebase();
    state.rss = 210;
    idle.begin()();
    await wait(80);
    expect(state.handBacks).toBe(0);
    state.rss = 230;
    idle.begin()();
    await wait(80);
    expect(state.handBacks).toBe(1);
    idle.stop();
  });

  it('does nothing once stopped', async () => {
    const { state, idle } = rig();
    state.rss = 200;
    idle.begin()();
    idle.stop();
    await wait(80);
    expect(state.handBacks).toBe(0);
  });
});

describe('trackingOperations', () => {
  it('marks each operation while it runs, a failed one included, and passes calls through', async () => {
    const marks: string[] = [];
    const fake = {
      setup: () => {
        marks.push('setup runs');
        return Promise.resolve({ ok: true });
      },
      teardown: () => Promise.reject(new Error('the audit could not remove it')),
      catalog: () => 'the catalog',
    } as unknown as RunnerConfigurator;
    const tracked = trackingOperations(fake, () => {
      marks.push('begin');
      return () => marks.push('end');
    });
    await expect(tracked.setup({} as never, '/run/netns/x')).resolves.toEqual({ ok: true });
    await expect(tracked.teardown('a', undefined)).rejects.toThrow('the audit could not remove it');
    expect(tracked.catalog()).toBe('the catalog');
    expect(marks).toEqual(['begin', 'setup runs', 'end', 'begin', 'end']);
  });
});
