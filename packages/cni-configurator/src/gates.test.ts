import { createGates } from './gates.js';

function deferred() {
  let resolve!: () => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const tick = () => new Promise<void>((r) => setImmediate(r));

describe('first-setup gates', () => {
  it('runs the first setups of a cold gate one at a time, then everything in parallel', async () => {
    const gates = createGates();
    const running: string[] = [];
    const first = deferred();
    const log: string[] = [];
    const job = (name: string, wait: Promise<void>) =>
      gates.run(['bridge:nomad', 'firewall:ipv4'], async () => {
        running.push(name);
        log.push(`start ${name} (${running.length} running)`);
        await wait;
        running.splice(running.indexOf(name), 1);
      });
    const a = job('a', first.promise);
    const b = job('b', Promise.resolve());
    const c = job('c', Promise.resolve());
    await tick();
    expect(log).toEqual(['start a (1 running)']);
    first.resolve();
    await Promise.all([a, b, c]);
    expect(gates.isWarm('bridge:nomad')).toBe(true);
    // Once warm, setups do not wait on each other.
    const slow = deferred();
    const d = job('d', slow.promise);
    const e = job('e', Promise.resolve());
    await e;
    expect(log.at(-1)).toBe('start e (2 running)');
    slow.resolve();
    await d;
  });

  it('hands a cold gate to the next setup when the first one fails', async () => {
    const gates = createGates();
    const order: string[] = [];
    const a = gates.run(['bridge:x'], () => {
      order.push('a');
      return Promise.reject(new Error('boom'));
    });
    const b = gates.run(['bridge:x'], () => {
      order.push('b');
      return Promise.resolve();
    });
    await expect(a).rejects.toThrow('boom');
    await b;
    expect(order).toEqual(['a', 'b']);
    expect(gates.isWarm('bridge:x')).toBe(true);
  });

  it('never deadlocks two setups that need the same gates in another order', async () => {
    const gates = createGates();
    const results = await Promise.all([
      gates.run(['b', 'a'], () => Promise.resolve(1)),
      gates.run(['a', 'b'], () => Promise.resolve(2)),
      gates.run(['a'], () => Promise.resolve(3)),
    ]);
    expect(results).toEqual([1, 2, 3]);
  });

  it('lets setups on different bridges warm up in parallel', async () => {
    const gates = createGates();
    const hold = deferred();
    let both = false;
    let inside = 0;
    const job = (bridge: string) =>
      gates.run([`bridge:${bridge}`], async () => {
        inside++;
        if (inside === 2) both = true;
        await hold.promise;
        inside--;
      });
    const a = job('one');
    const b = job('two');
    await tick();
    expect(both).toBe(true);
    hold.resolve();
    await Promise.all([a, b]);
  });
});
