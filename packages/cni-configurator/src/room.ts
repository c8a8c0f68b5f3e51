/**
 * The room of one host-local directory: the lock that keeps a reclaim's window closed to new
 * setups (holds.ts).
 *
 * A reclaim (restore setting an allocation up again with exactly its recorded addresses) removes
 * its holds and then runs an ADD that asks host-local for those addresses. Between the removal
 * and host-local's reservation, an ADD that asks for nothing in the same directory would take
 * the first free address, which may be one of them. So the ADDs of a directory come in two
 * classes, and the rule is:
 *
 * - ADDs of one class run together, any number of them; ADDs of the two classes never overlap
 *   (`reclaim`: a reclaim's whole ADD with retry, the DELs between attempts included, since they
 *   release the address; `new`: any other setup's ADD with retry);
 * - a class that waits stops the other from letting more in: when the room empties, every waiter
 *   of the other class enters at once, then the next turn goes back. Neither starves, and a new
 *   setup waits at most about one batch of reclaims' ADDs;
 * - a directory without reclaims costs nothing: a new setup finds the room in its own class with
 *   no one waiting and enters at once (a counter, no promise to wait for).
 *
 * A waiter whose signal fires leaves the queue (its setup fails `aborted`); the other class's
 * turn is not held up by it. Entering is synchronous when the room admits at once.
 */
export type RoomClass = 'reclaim' | 'new';

export interface Room {
  /** Resolves, once the rule admits `cls`, with the function that leaves the room. */
  enter(cls: RoomClass, signal?: AbortSignal): Promise<() => void>;
  /** Inside now, and which class. */
  readonly inside: number;
  readonly current: RoomClass | undefined;
  /** Waiting now, by class. */
  waiting(cls: RoomClass): number;
}

interface Waiter {
  readonly admit: () => void;
  readonly signal: AbortSignal | undefined;
  readonly onAbort: () => void;
}

/** The error a waiter is rejected with: the signal's reason (an AbortSignal's is an Error). */
function abortReason(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason : new Error('aborted', { cause: reason });
}

function other(cls: RoomClass): RoomClass {
  return cls === 'reclaim' ? 'new' : 'reclaim';
}

export function createRoom(): Room {
  let current: RoomClass | undefined;
  let inside = 0;
  const queues: Record<RoomClass, Waiter[]> = { reclaim: [], new: [] };

  function leaver(): () => void {
    let left = false;
    return () => {
      if (left) return;
      left = true;
      inside--;
      if (inside === 0) next();
    };
  }

  function admitAll(cls: RoomClass): void {
    const admitted = queues[cls].splice(0);
    inside += admitted.length;
    for (const w of admitted) {
      w.signal?.removeEventListener('abort', w.onAbort);
      w.admit();
    }
  }

  /** The room is empty: the other class's waiters if any, else this class's, all at once. */
  function next(): void {
    const turn: RoomClass | undefined =
      current !== undefined && queues[other(current)].length > 0
        ? other(current)
        : current !== undefined && queues[current].length > 0
          ? current
          : queues.reclaim.length > 0
            ? 'reclaim'
            : queues.new.length > 0
              ? 'new'
              : undefined;
    if (turn === undefined) {
      current = undefined;
      return;
    }
    current = turn;
    admitAll(turn);
  }

  return {
    get inside() {
      return inside;
    },
    get current() {
      return current;
    },
    waiting: (cls) => queues[cls].length,

    enter(cls, signal) {
      if (signal?.aborted === true) return Promise.reject(abortReason(signal));
      if (inside === 0 || (current === cls && queues[other(cls)].length === 0)) {
        current = cls;
        inside++;
        return Promise.resolve(leaver());
      }
      return new Promise<() => void>((resolve, reject) => {
        const waiter: Waiter = {
          admit: () => {
            resolve(leaver());
          },
          signal,
          onAbort: () => {
            const queue = queues[cls];
            const at = queue.indexOf(waiter);
            if (at >= 0) queue.splice(at, 1);
            // The last waiter of its class gone: those of the class inside waited only for it.
            if (queue.length === 0 && current === other(cls) && inside > 0) admitAll(current);
            if (signal !== undefined) reject(abortReason(signal));
          },
        };
        signal?.addEventListener('abort', waiter.onAbort, { once: true });
        queues[cls].push(waiter);
      });
    },
  };
}

/** The rooms of a configurator, one per host-local directory, made on first use. */
export function createRooms(): (dir: string) => Room {
  const rooms = new Map<string, Room>();
  return (dir) => {
    let room = rooms.get(dir);
    if (room === undefined) {
      room = createRoom();
      rooms.set(dir, room);
    }
    return room;
  };
}
