import { isIptablesError } from '@allocnet/iptables-node';
import type { Family, Rule, Table } from '@allocnet/iptables-node';
import type { IptablesState } from './types.js';

/**
 * One chain's rules (`iptables -S <chain>`), undefined when the chain does not exist. The read
 * starts after the call: what it returns is at least as new as the moment of asking.
 */
export type ReadChain = (
  family: Family,
  table: Table,
  chain: string,
  call?: { readonly signal?: AbortSignal },
) => Promise<readonly Rule[] | undefined>;

interface Slot {
  inFlight: Promise<unknown> | undefined;
  next: Promise<readonly Rule[] | undefined> | undefined;
}

/**
 * A `ReadChain` that batches: callers waiting for the same chain share one `iptables -S`. At most
 * one read per chain runs at a time; callers that arrive while it runs share the next one (the
 * running one may have read the chain before they asked).
 *
 * A restore CHECKs hundreds of allocations at once, each of them looking at the same shared
 * chains (CNI-FORWARD, CNI-HOSTPORT-DNAT, FORWARD): on a node with many allocations each
 * iptables call is costly (nf_tables fetches the chain's rules from the kernel), so sharing them
 * saves most of the cost of a restore.
 */
export function batchedChainReader(
  iptables: Readonly<Record<Family, Pick<IptablesState, 'listRules'>>>,
): ReadChain {
  const slots = new Map<string, Slot>();

  async function read(family: Family, table: Table, chain: string) {
    try {
      return await iptables[family].listRules(table, chain);
    } catch (error) {
      if (isIptablesError(error) && error.code === 'not-found') return undefined;
      throw error;
    }
  }

  return (family, table, chain, call = {}) => {
    const key = `${family}:${table}:${chain}`;
    let slot = slots.get(key);
    if (slot === undefined) {
      slot = { inFlight: undefined, next: undefined };
      slots.set(key, slot);
    }
    const own = slot;
    if (own.next === undefined) {
      // The next read starts once the running one is done, and no sooner than the next turn of
      // the event loop, so that callers arriving together share it.
      own.next = (own.inFlight ?? Promise.resolve())
        .catch(() => undefined)
        .then(() => new Promise((resolve) => setImmediate(resolve)))
        .then(() => {
          own.next = undefined;
          const running = read(family, table, chain);
          own.inFlight = running;
          const done = () => {
            if (own.inFlight !== running) return;
            own.inFlight = undefined;
            // Nothing queued and nothing running: the slot goes (allocation chains are many).
            if (own.next === undefined) slots.delete(key);
          };
          running.then(done, done);
          return running;
        });
    }
    return untilAborted(own.next, call.signal);
  };
}

/** The promise, or a rejection with the signal's reason as soon as it aborts. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      reject(signal.reason as Error);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}
