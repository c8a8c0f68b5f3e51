// The reap guard on its own, with deferreds (no sleeps): the agent's former ReapGate tests
// (setups side by side, a setup arriving during a reap goes after it, a failed reap lets the next
// in) and the reconciler's hold (an operation already on the shared side is counted as known and
// not waited for). The runner's use of it is in runner.test.ts and reconciler.test.ts.
import { setImmediate } from 'node:timers/promises';
import { isRunnerError } from './errors.js';
import { createReapGuard } from './reap-guard.js';
import { createDeferred } from './testing/index.js';

/** An operation on `id` under the guard: admitted, then its work until `done` resolves. */
function operation(
  guard: ReturnType<typeof createReapGuard>,
  live: Set<string>,
  order: string[],
  id: string,
  done: Promise<void> = Promise.resolve(),
): Promise<void> {
  live.add(id); // queued: the queue counts it from here (activeIds)
  return (async () => {
    await guard.admit(id);
    order.push(`${id} start`);
    await done;
    order.push(`${id} end`);
    live.delete(id);
  })();
}

/** Lets every promise callback that is ready run (one macrotask turn runs all microtasks). */
async function drain(): Promise<void> {
  await setImmediate();
}

describe('createReapGuard', () => {
  it('runs operations side by side; a reap counts those under way as known instead of waiting', async () => {
    const live = new Set<string>();
    const guard = createReapGuard(() => live);
    const order: string[] = [];
    const a = createDeferred();
    const b = createDeferred();
    const s1 = operation(guard, live, order, 'a', a.promise);
    const s2 = operation(guard, live, order, 'b', b.promise);
    await drain();
    expect(order).toEqual(['a start', 'b start']);

    const reaping = createDeferred();
    let known: string[] = [];
    const x = guard.reap(async (k) => {
      known = [...k].sort();
      order.push('x start');
      await reaping.promise;
      order.push('x end');
    });
    await drain();
    expect(known).toEqual(['a', 'b']);
    // An operation that arrives during the reap on an allocation it did not count goes after it;
    // one on an allocation it counted goes on.
    const s3 = operation(guard, live, order, 'c');
    const s4 = operation(guard, live, order, 'a');
    await drain();
    expect(order).toEqual(['a start', 'b start', 'x start', 'a start', 'a end']);

    reaping.resolve();
    await drain();
    expect(order.slice(5)).toEqual(['x end', 'c start', 'c end']);
    a.resolve();
    b.resolve();
    await Promise.all([s1, s2, x, s3, s4]);
    expect(order.slice(8)).toEqual(['a end', 'b end']);
  });

  it('runs one reap at a time, in call order, each with what is live when it starts', async () => {
    const live = new Set<string>(['r1']);
    const guard = createReapGuard(() => live);
    const first = createDeferred();
    const seen: string[][] = [];
    const x1 = guard.reap(async (known) => {
      seen.push([...known]);
      await first.promise;
    });
    const x2 = guard.reap((known) => {
      seen.push([...known]);
      return Promise.resolve();
    });
    await drain();
    expect(seen).toEqual([['r1']]);
    live.add('r2');
    first.resolve();
    await Promise.all([x1, x2]);
    expect(seen).toEqual([['r1'], ['r1', 'r2']]);
  });

  it('lets the next one in when the reap fails', async () => {
    const guard = createReapGuard(() => []);
    await expect(guard.reap(() => Promise.reject(new Error('reap failed')))).rejects.toThrow(
      'reap failed',
    );
    await expect(guard.admit('a')).resolves.toBeUndefined();
    await expect(guard.reap(() => Promise.resolve(2))).resolves.toBe(2);
  });
  it('lets a reap waiting for another leave when its signal aborts, and runs the next one', async () => {
    const guard = createReapGuard(() => []);
    const first = createDeferred();
    const x1 = guard.reap(() => first.promise);
    const controller = new AbortController();
    let ran = false;
    const x2 = guard.reap(() => {
      ran = true;
      return Promise.resolve();
    }, controller.signal);
    const x3 = guard.reap(() => Promise.resolve(3));
    controller.abort(new Error('deadline'));
    const refused = await x2.catch((error: unknown) => error);
    expect(isRunnerError(refused) && [refused.code, refused.kind, refused.message]).toEqual([
      'aborted',
      'aborted',
      'the reap of leaked state was aborted before its turn',
    ]);
    first.resolve();
    await x1;
    await expect(x3).resolves.toBe(3);
    expect(ran).toBe(false);
  });
});
