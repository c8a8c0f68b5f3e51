import { PORT_BASE } from './args.js';
import { MAX_FAILURES_KEPT, churn, cycleAllocId } from './churn.js';
import type { AllocOps, ChurnOptions, ChurnProgress } from './churn.js';

/** A recording agent: each call waits until the test settles it, so overlap is the test's to see. */
function fakeAgent() {
  const calls: string[] = [];
  const pending: { readonly name: string; settle: (error?: Error) => void }[] = [];
  const inFlight = new Map<string, number>();
  let maxInFlight = 0;
  const call = (name: string, port: number | undefined, signal: AbortSignal) =>
    new Promise<void>((resolve, reject) => {
      calls.push(name);
      const key = port === undefined ? name : `port ${port}`;
      if (port !== undefined) {
        if (inFlight.has(key)) throw new Error(`${key} used by two setups at once`);
        inFlight.set(key, 1);
      }
      maxInFlight = Math.max(maxInFlight, pending.length + 1);
      const onAbort = () => {
        entry.settle(new Error('1 CANCELLED: Cancelled on client'));
      };
      const entry = {
        name,
        settle: (error?: Error) => {
          signal.removeEventListener('abort', onAbort);
          pending.splice(pending.indexOf(entry), 1);
          if (error === undefined) resolve();
          else reject(error);
        },
      };
      pending.push(entry);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  const ports = new Map<string, number>();
  const ops: AllocOps = {
    setup: async (id, port, signal) => {
      ports.set(id, port);
      await call(`setup ${id} ${port}`, port, signal);
    },
    teardown: async (id, signal) => {
      await call(`teardown ${id}`, undefined, signal);
      inFlight.delete(`port ${ports.get(id) ?? -1}`);
    },
  };
  return {
    ops,
    calls,
    pending,
    maxInFlight: () => maxInFlight,
    /** Settles every pending call (failing those `fail` picks), then lets the workers move on. */
    async step(fail: (name: string) => boolean = () => false) {
      for (const p of [...pending])
        p.settle(fail(p.name) ? new Error(`13 INTERNAL: ${p.name} failed`) : undefined);
      // The workers resume in promise jobs; setImmediate's turn comes after all of them.
      await new Promise((resolve) => setImmediate(resolve));
    },
  };
}

function options(
  ops: AllocOps,
  over: Partial<ChurnOptions> = {},
): ChurnOptions & { progress: ChurnProgress[] } {
  const progress: ChurnProgress[] = [];
  let clock = 0;
  let rss = 100;
  return {
    count: 6,
    width: 2,
    warmup: 2,
    progressEvery: 3,
    ops,
    rss: () => Promise.resolve(rss++),
    onProgress: (p) => progress.push(p),
    signal: new AbortController().signal,
    // Every reading 10 ms after the last: latencies and rates are exact.
    now: () => (clock += 10),
    progress,
    ...over,
  };
}

describe('churn', () => {
  it('runs count cycles, width at a time, each slot with its own port, setup before teardown', async () => {
    const agent = fakeAgent();
    const o = options(agent.ops);
    const state = { finished: false };
    const done = churn(o).finally(() => (state.finished = true));
    while (!state.finished) await agent.step();
    const result = await done;
    // Which slot takes which cycle after the first round depends on who finished first; what
    // holds: every cycle's setup before its teardown, two in flight, ports apart (the fake throws).
    expect([...agent.calls].sort()).toEqual(
      [0, 1, 2, 3, 4, 5]
        .flatMap((n) => [
          `setup ${cycleAllocId(n)} ${PORT_BASE + (agent.calls.includes(`setup ${cycleAllocId(n)} ${PORT_BASE}`) ? 0 : 1)}`,
          `teardown ${cycleAllocId(n)}`,
        ])
        .sort(),
    );
    for (let n = 0; n < 6; n++)
      expect(agent.calls.findIndex((c) => c.startsWith(`setup ${cycleAllocId(n)} `))).toBeLessThan(
        agent.calls.indexOf(`teardown ${cycleAllocId(n)}`),
      );
    expect(agent.calls.slice(0, 2)).toEqual([
      `setup soak-0000000 ${PORT_BASE}`,
      `setup soak-0000001 ${PORT_BASE + 1}`,
    ]);
    expect(agent.maxInFlight()).toBe(2);
    expect(result).toMatchObject({ done: 6, failures: 0, failureMessages: [], warmRssMiB: 100 });
    expect(result.setupMs).toHaveLength(6);
    expect(result.teardownMs).toHaveLength(6);
    expect(o.progress.map((p) => [p.done, p.count, p.failures, p.rssMiB])).toEqual([
      [3, 6, 0, 101],
      [6, 6, 0, 102],
    ]);
  });

  it('counts a cycle with a failed setup or teardown once, still tears a failed setup down', async () => {
    const agent = fakeAgent();
    const o = options(agent.ops, { count: 3, width: 3, progressEvery: 3 });
    const done = churn(o);
    await agent.step((name) => name === `setup soak-0000001 ${PORT_BASE + 1}`);
    await agent.step(
      (name) => name === 'teardown soak-0000001' || name === 'teardown soak-0000002',
    );
    const result = await done;
    expect(agent.calls).toContain('teardown soak-0000001');
    expect(result.done).toBe(3);
    expect(result.failures).toBe(2);
    expect(result.failureMessages).toEqual([
      `soak-0000001 setup: 13 INTERNAL: setup soak-0000001 ${PORT_BASE + 1} failed`,
      'soak-0000001 teardown: 13 INTERNAL: teardown soak-0000001 failed',
      'soak-0000002 teardown: 13 INTERNAL: teardown soak-0000002 failed',
    ]);
    expect(result.setupMs).toHaveLength(2);
    expect(result.teardownMs).toHaveLength(1);
    expect(o.progress.map((p) => p.failures)).toEqual([2]);
  });

  it(`keeps the first ${MAX_FAILURES_KEPT} failure messages and counts the rest`, async () => {
    const agent = fakeAgent();
    const done = churn(options(agent.ops, { count: 30, width: 30, progressEvery: 30 }));
    await agent.step((name) => name.startsWith('setup'));
    await agent.step();
    const result = await done;
    expect(result.failures).toBe(30);
    expect(result.failureMessages).toHaveLength(MAX_FAILURES_KEPT);
  });

  it('stops taking cycles on the signal and cancels the calls in flight', async () => {
    const agent = fakeAgent();
    const stop = new AbortController();
    const o = options(agent.ops, { count: 100, width: 2, signal: stop.signal });
    const done = churn(o);
    await agent.step();
    stop.abort();
    await agent.step();
    const result = await done;
    expect(result.done).toBe(0);
    expect(result.warmRssMiB).toBeUndefined();
    expect(agent.calls).toEqual([
      `setup soak-0000000 ${PORT_BASE}`,
      `setup soak-0000001 ${PORT_BASE + 1}`,
      'teardown soak-0000000',
      'teardown soak-0000001',
    ]);
  });

  it('rejects, stopping every worker, when the agent’s RSS cannot be read', async () => {
    const agent = fakeAgent();
    const gone = new Error('the agent (pid 42) is gone');
    const done = churn(
      options(agent.ops, { count: 10, width: 2, warmup: 1, rss: () => Promise.reject(gone) }),
    );
    // Held before it rejects, so the rejection is never unhandled.
    const outcome = done.then(
      () => 'resolved',
      (error: unknown) => error,
    );
    await agent.step();
    await agent.step();
    await agent.step();
    expect(await outcome).toBe(gone);
    expect(agent.pending).toEqual([]);
  });

  it('names cycles soak-NNNNNNN', () => {
    expect(cycleAllocId(0)).toBe('soak-0000000');
    expect(cycleAllocId(1_234_567)).toBe('soak-1234567');
  });
});
