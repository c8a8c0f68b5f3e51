/**
 * Keeps ReapLeaks from removing the state of a setup it did not know about. A reap lists the
 * runner's records, then scans the host and removes what is tagged with anything else; a setup
 * that started after the listing would have its fresh rules reaped. So setups run under the
 * shared side of this gate and a reap under the exclusive side: a reap waits for the setups in
 * flight (their records exist once they finish), and setups that arrive meanwhile wait for the
 * reap. Writers are preferred: once a reap waits, new setups queue behind it. Reaps are rare
 * operator actions; setups never wait on one another here.
 */
export interface ReapGate {
  shared<T>(fn: () => Promise<T>): Promise<T>;
  exclusive<T>(fn: () => Promise<T>): Promise<T>;
}

export function createReapGate(): ReapGate {
  let readers = 0;
  let writer = false;
  const waitingWriters: (() => void)[] = [];
  const waitingReaders: (() => void)[] = [];

  function wake(): void {
    if (writer) return;
    if (waitingWriters.length > 0) {
      if (readers === 0) {
        writer = true;
        waitingWriters.shift()?.();
      }
      return;
    }
    while (waitingReaders.length > 0) {
      readers++;
      waitingReaders.shift()?.();
    }
  }

  return {
    async shared(fn) {
      if (writer || waitingWriters.length > 0) {
        await new Promise<void>((resolve) => waitingReaders.push(resolve));
      } else readers++;
      try {
        return await fn();
      } finally {
        readers--;
        wake();
      }
    },
    async exclusive(fn) {
      if (writer || readers > 0 || waitingWriters.length > 0) {
        await new Promise<void>((resolve) => {
          waitingWriters.push(resolve);
        });
      } else writer = true;
      try {
        return await fn();
      } finally {
        writer = false;
        wake();
      }
    },
  };
}
