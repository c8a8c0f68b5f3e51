import { createRoom } from './room.js';
import type { RoomClass } from './room.js';

/** Enters `cls` and records when it got in; `leave` is set once in. */
function entrant(
  room: ReturnType<typeof createRoom>,
  cls: RoomClass,
  log: string[],
  name: string,
  signal?: AbortSignal,
) {
  const e = {
    leave: undefined as (() => void) | undefined,
    entered: undefined as unknown as Promise<void>,
  };
  e.entered = room.enter(cls, signal).then((leave) => {
    log.push(name);
    e.leave = leave;
  });
  return e;
}

const tick = () => new Promise<void>((r) => setImmediate(r));

describe('createRoom', () => {
  it('lets any number of one class in together, at once, when no one else waits', async () => {
    const room = createRoom();
    const log: string[] = [];
    const a = entrant(room, 'new', log, 'n1');
    const b = entrant(room, 'new', log, 'n2');
    await Promise.all([a.entered, b.entered]);
    expect([log, room.inside, room.current]).toEqual([['n1', 'n2'], 2, 'new']);
    a.leave?.();
    b.leave?.();
    expect([room.inside, room.current]).toEqual([0, undefined]);
  });

  it('never lets the two classes overlap, and a waiting class stops the other from entering more', async () => {
    const room = createRoom();
    const log: string[] = [];
    const n1 = entrant(room, 'new', log, 'n1');
    await n1.entered;
    const r1 = entrant(room, 'reclaim', log, 'r1');
    const r2 = entrant(room, 'reclaim', log, 'r2');
    // A reclaim waits: a new setup that comes now waits behind it, not beside n1.
    const n2 = entrant(room, 'new', log, 'n2');
    await tick();
    expect([log, room.waiting('reclaim'), room.waiting('new')]).toEqual([['n1'], 2, 1]);
    n1.leave?.();
    await Promise.all([r1.entered, r2.entered]);
    expect([log, room.current, room.inside]).toEqual([['n1', 'r1', 'r2'], 'reclaim', 2]);
    // Alternation: the reclaims' turn lets no more reclaims in while n2 waits.
    const r3 = entrant(room, 'reclaim', log, 'r3');
    r1.leave?.();
    await tick();
    expect(log).toEqual(['n1', 'r1', 'r2']);
    r2.leave?.();
    await n2.entered;
    expect([log, room.current]).toEqual([['n1', 'r1', 'r2', 'n2'], 'new']);
    n2.leave?.();
    await r3.entered;
    r3.leave?.();
    expect([log, room.inside, room.current]).toEqual([
      ['n1', 'r1', 'r2', 'n2', 'r3'],
      0,
      undefined,
    ]);
  });

  it('drops a waiter whose signal fires; those it held back go in', async () => {
    const room = createRoom();
    const log: string[] = [];
    const n1 = entrant(room, 'new', log, 'n1');
    await n1.entered;
    const abort = new AbortController();
    const r1 = room.enter('reclaim', abort.signal);
    const n2 = entrant(room, 'new', log, 'n2');
    await tick();
    expect(log).toEqual(['n1']);
    abort.abort(new Error('deadline'));
    await expect(r1).rejects.toThrow('deadline');
    await n2.entered;
    expect([log, room.inside, room.waiting('reclaim')]).toEqual([['n1', 'n2'], 2, 0]);
    n1.leave?.();
    n2.leave?.();
    await expect(room.enter('new', abort.signal)).rejects.toThrow('deadline');
  });

  it('counts a second leave once', async () => {
    const room = createRoom();
    const leave = await room.enter('reclaim');
    const other = await room.enter('reclaim');
    leave();
    leave();
    expect(room.inside).toBe(1);
    other();
    expect(room.inside).toBe(0);
  });
});
