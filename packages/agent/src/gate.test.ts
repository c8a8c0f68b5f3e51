import { createDeferred } from '@allocnet/alloc-runner/testing';
import { createReapGate } from './gate.js';

describe('createReapGate', () => {
  it('runs shared work side by side, and exclusive work alone after it', async () => {
    const gate = createReapGate();
    const order: string[] = [];
    const a = createDeferred();
    const b = createDeferred();
    const s1 = gate.shared(async () => {
      order.push('s1 start');
      await a.promise;
      order.push('s1 end');
    });
    const s2 = gate.shared(async () => {
      order.push('s2 start');
      await b.promise;
      order.push('s2 end');
    });
    const x = gate.exclusive(() => {
      order.push('x');
      return Promise.resolve();
    });
    // A setup that arrives after a waiting reap goes after it.
    const s3 = gate.shared(() => {
      order.push('s3');
      return Promise.resolve();
    });
    await Promise.resolve();
    expect(order).toEqual(['s1 start', 's2 start']);
    a.resolve();
    b.resolve();
    await Promise.all([s1, s2, x, s3]);
    expect(order).toEqual(['s1 start', 's2 start', 's1 end', 's2 end', 'x', 's3']);
  });

  it('lets the next one in when the work fails', async () => {
    const gate = createReapGate();
    await expect(gate.exclusive(() => Promise.reject(new Error('reap failed')))).rejects.toThrow(
      'reap failed',
    );
    await expect(gate.shared(() => Promise.resolve(1))).resolves.toBe(1);
    await expect(gate.exclusive(() => Promise.resolve(2))).resolves.toBe(2);
  });
});
