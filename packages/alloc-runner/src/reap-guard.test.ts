// The reap guard on its own, with deferreds (no sleeps): operations side by side; an operation on
// an allocation the reap did not count starts beside it and is spared; one on an allocation the
// reap has taken waits for that allocation's batch only; the orphans go only when no operation
// overlapped the reap, holding every operation while they go; one reap at a time; a failed or
// aborted reap lets the next in. The runner's use of it is in runner.test.ts and
// reconciler.test.ts.
import { setImmediate } from 'node:timers/promises';
import { isRunnerError } from './errors.js';
import { createReapGuard } from './reap-guard.js';
import type { ReapScope } from './reap-guard.js';
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

/** A guard over `records` and the live set its operations keep. */
function guardOver(records: Iterable<string> = []) {
  const live = new Set<string>();
  const guard = createReapGuard({ records: () => records, active: () => live });
  return { guard, live };
}

/** Starts a reap that holds until `end` resolves; resolves its scope once it runs. */
async function holdingReap(
  guard: ReturnType<typeof createReapGuard>,
  end: Promise<void>,
): Promise<{ scope: ReapScope; reap: Promise<void> }> {
  const scoped = createDeferred<ReapScope>();
  const reap = guard.reap(async (scope) => {
    scoped.resolve(scope);
    await end;
  });
  return { scope: await scoped.promise, reap };
}

describe('createReapGuard', () => {
  it('runs operations side by side; a reap counts those under way as known and lets others start beside it, spared', async () => {
    const { guard, live } = guardOver(['r']);
    const order: string[] = [];
    const a = createDeferred();
    const b = createDeferred();
    const s1 = operation(guard, live, order, 'a', a.promise);
    const s2 = operation(guard, live, order, 'b', b.promise);
    await drain();
    expect(order).toEqual(['a start', 'b start']);

    const reaping = createDeferred();
    const { scope, reap } = await holdingReap(guard, reaping.promise);
    expect([...scope.known].sort()).toEqual(['a', 'b', 'r']);
    // An operation on an allocation the reap did not count starts at once, and is spared; one on
    // an allocation it counted starts at once too, and needs no sparing.
    const s3 = operation(guard, live, order, 'c');
    const s4 = operation(guard, live, order, 'a');
    await Promise.all([s3, s4]);
    expect(order).toEqual(['a start', 'b start', 'c start', 'a start', 'c end', 'a end']);
    expect([...scope.spared]).toEqual(['c']);
    expect(scope.take(['a', 'c', 'l'])).toEqual(['l']);

    reaping.resolve();
    a.resolve();
    b.resolve();
    await Promise.all([s1, s2, reap]);
    expect(order.slice(6)).toEqual(['a end', 'b end']);
  });

  it('holds an operation on an allocation the reap has taken until its batch is done, and only that one', async () => {
    const { guard, live } = guardOver();
    const order: string[] = [];
    const reaping = createDeferred();
    const { scope, reap } = await holdingReap(guard, reaping.promise);
    expect(scope.take(['l1', 'l2'])).toEqual(['l1', 'l2']);

    const ops = [
      operation(guard, live, order, 'l1'),
      operation(guard, live, order, 'l2'),
      operation(guard, live, order, 'new'),
    ];
    await drain();
    expect(order).toEqual(['new start', 'new end']);
    scope.done(['l1']);
    await drain();
    expect(order.slice(2)).toEqual(['l1 start', 'l1 end']);
    // Once its batch is done, the allocation is the operation's: spared from then on.
    expect([...scope.spared]).toEqual(['new', 'l1']);
    scope.done(['l2']);
    await Promise.all(ops);
    expect(order.slice(4)).toEqual(['l2 start', 'l2 end']);
    reaping.resolve();
    await reap;
  });

  it('lets every held operation go when the reap ends, even when it fails', async () => {
    const { guard, live } = guardOver();
    const order: string[] = [];
    const failing = createDeferred();
    const { scope, reap } = await holdingReap(guard, failing.promise);
    scope.take(['l1']);
    const held = operation(guard, live, order, 'l1');
    await drain();
    expect(order).toEqual([]);
    failing.reject(new Error('iptables is gone'));
    await expect(reap).rejects.toThrow('iptables is gone');
    await held;
    expect(order).toEqual(['l1 start', 'l1 end']);
  });

  it('leaves the orphans to the next pass when an operation was under way at the start or began since', async () => {
    const { guard, live } = guardOver();
    const order: string[] = [];
    const a = createDeferred();
    const s1 = operation(guard, live, order, 'a', a.promise);
    await drain();
    const first = await holdingReap(guard, Promise.resolve());
    // `a` was running when the reap started.
    expect(first.scope.takeOrphans()).toBeUndefined();
    await first.reap;
    a.resolve();
    await s1;

    const reaping = createDeferred();
    const second = await holdingReap(guard, reaping.promise);
    await operation(guard, live, order, 'b');
    expect(second.scope.takeOrphans()).toBeUndefined();
    reaping.resolve();
    await second.reap;
  });

  it('removes the orphans of a pass nothing overlapped, holding every operation until they are gone', async () => {
    const { guard, live } = guardOver(['r']);
    const order: string[] = [];
    const reaping = createDeferred();
    const { scope, reap } = await holdingReap(guard, reaping.promise);
    const release = scope.takeOrphans();
    expect(release).toBeDefined();
    const ops = [operation(guard, live, order, 'r'), operation(guard, live, order, 'new')];
    await drain();
    expect(order).toEqual([]);
    release?.();
    await Promise.all(ops);
    expect(order.filter((o) => o.endsWith('start'))).toEqual(['r start', 'new start']);
    reaping.resolve();
    await reap;
  });

  it('runs one reap at a time, in call order, each with what is live when it starts', async () => {
    const live = new Set<string>(['r1']);
    const guard = createReapGuard({ records: () => [], active: () => live });
    const first = createDeferred();
    const seen: string[][] = [];
    const x1 = guard.reap(async ({ known }) => {
      seen.push([...known]);
      await first.promise;
    });
    const x2 = guard.reap(({ known }) => {
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
    const { guard } = guardOver();
    await expect(guard.reap(() => Promise.reject(new Error('reap failed')))).rejects.toThrow(
      'reap failed',
    );
    await expect(guard.admit('a')).resolves.toBeUndefined();
    await expect(guard.reap(() => Promise.resolve(2))).resolves.toBe(2);
  });
  it('lets a reap waiting for another leave when its signal aborts, and runs the next one', async () => {
    const { guard } = guardOver();
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
