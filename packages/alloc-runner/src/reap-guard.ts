// The reap guard: keeps a reap of leaked state away from state that is being made, without
// making the operations the reap does not touch wait for it.
//
// A reap lists the allocations it must spare (`known`), scans the host, plans, and removes what is
// tagged with any other id, batch by batch, then the orphans (state no id can be read from: a
// firewall accept for an address no reservation holds, a CNI chain nothing jumps to). The danger:
// an operation on an allocation the reap did not count has its fresh state seen by the scan and
// removed as a leak, or its half-made state (a firewall accept read before its reservation, a
// portmap chain before its jump) removed as an orphan. The rule, per allocation:
//
//   an operation on an allocation runs beside a reap unless the reap is removing that
//   allocation's state right now; the reap removes nothing of an allocation it did not count
//   once an operation on it has begun, and no orphan of a pass that any operation ran beside.
//
// The two sides:
// - operations: every operation of the allocation queue (setup, check, teardown, forceCleanup, a
//   restore's step, a stray namespace's removal) asks `admit(id)` before it starts (after the
//   operations queued before it on the same allocation, outside the `maxConcurrent` limit so that
//   a held operation takes no slot). With no reap under way, or with `id` in the reap's `known`,
//   it passes. Otherwise it passes too, and `id` is `spared`: the reap reads that set when it plans
//   (the id counts as known: its tagged state is no leak, its chains no orphans), and an id spared
//   after the plan is dropped by `take`, so the reap never removes its state, old or new. (Old
//   state of a leaked allocation that is set up again is for that allocation's own DEL and audit,
//   or its teardown.) It waits only while (a) `id` is taken, i.e. the reap planned to remove it
//   and its batch is not done yet: until that batch is done (a fence per allocation, not the whole
//   reap); or (b) the reap removes orphans (below): until they are gone. A door needs nothing of
//   its own: calling the runner is enough.
// - reaps: `reap(fn)` runs one reap at a time (a second waits for the first, in call order); one
//   waiting for another leaves at once when its caller's signal aborts. Its `known` is taken when
//   it starts: every record, and every allocation with an operation queued or running. `fn` gets
//   the scope (`known` and the `ReapFence` the configurator's reapLeaks uses). Nothing here waits
//   for an operation, so a reap never waits behind a slow setup and there is no deadlock with the
//   queue: work that needs a queue turn (removing a stray namespace) runs after `fn` returns.
//
// Orphans: untagged state cannot be told from an operation's half-made state by a scan that ran
// beside that operation (host-local writes the reservation before the firewall plugin adds the
// accepts, and the scan reads the two at once; a DEL removes them in the other order), and a
// removal by spec of an orphan accept can take the one rule a newcomer given the same address
// relies on. Of the two ways out, re-reading each orphan under a brief exclusive section, or
// leaving the orphans of a pass that overlapped an operation to the next pass, this takes the
// second: it needs no second scan, and orphans are rare (only state whose owner's tagged rules are
// gone) and never urgent. So `takeOrphans` answers undefined when any operation was queued or
// running when the reap started or was admitted since (known or not, checks included: the guard
// does not know what an operation does); otherwise it holds every operation until the orphans are
// removed, which is one small batch. A reap that no operation overlaps removes exactly what it
// removed before this rule.

import type { ReapFence } from '@allocnet/cni-configurator';
import { RunnerError } from './errors.js';

/** What a reap's `fn` gets: the ids it counted as live when it started, and its fence. */
export interface ReapScope extends ReapFence {
  /** Every record and every allocation with an operation queued or running when it started. */
  readonly known: ReadonlySet<string>;
}

/** The guard that the queue and the reapers share (context.ts builds one per runner). */
export interface ReapGuard {
  /** Resolves when an operation on `allocId` may start (see the opening comment). */
  admit(allocId: string): Promise<void>;
  /**
   * Runs `fn` as the only reap; the next reap waits for it. A `signal` that aborts while this
   * reap waits for an earlier one rejects it at once with `aborted` and `fn` never runs; once it
   * has started, the signal is `fn`'s to honour.
   */
  reap<T>(fn: (scope: ReapScope) => Promise<T>, signal?: AbortSignal): Promise<T>;
}

/** Where the guard reads what is live when a reap starts. */
export interface ReapGuardSources {
  /** Ids with a record. */
  records(): Iterable<string>;
  /** Ids with an operation queued or running. */
  active(): Iterable<string>;
}

function abortedReap(signal: AbortSignal): RunnerError {
  return new RunnerError('the reap of leaked state was aborted before its turn', {
    code: 'aborted',
    cause: signal.reason,
  });
}

/** A promise and what resolves it. */
function opening(): { readonly promise: Promise<void>; readonly open: () => void } {
  let open = () => {
    // Replaced below.
  };
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

/** One reap under way: its scope, and what an operation arriving meanwhile waits for. */
interface UnderWay {
  readonly scope: ReapScope;
  /** What an operation on `allocId` waits for before it may start; undefined: nothing. */
  hold(allocId: string): Promise<void> | undefined;
  /** An operation on `allocId` starts beside the reap. */
  admitted(allocId: string): void;
  /** The reap is over: every held operation goes on. */
  end(): void;
}

function underWay(known: ReadonlySet<string>, busy: boolean): UnderWay {
  const spared = new Set<string>();
  const taken = new Set<string>();
  // Openings for operations held on a taken id, made only when one arrives.
  const held = new Map<string, ReturnType<typeof opening>>();
  let orphans: ReturnType<typeof opening> | undefined;
  let overlapped = busy;

  const letGo = (allocId: string) => {
    taken.delete(allocId);
    held.get(allocId)?.open();
    held.delete(allocId);
  };
  const scope: ReapScope = {
    known,
    spared,
    take(allocIds) {
      const mine = allocIds.filter((id) => !spared.has(id) && !known.has(id));
      for (const id of mine) taken.add(id);
      return mine;
    },
    done(allocIds) {
      for (const id of allocIds) letGo(id);
    },
    takeOrphans() {
      if (overlapped) return undefined;
      const turn = opening();
      orphans = turn;
      return () => {
        if (orphans === turn) orphans = undefined;
        turn.open();
      };
    },
  };
  return {
    scope,
    hold(allocId) {
      if (orphans !== undefined) return orphans.promise;
      if (!taken.has(allocId)) return undefined;
      let wait = held.get(allocId);
      if (wait === undefined) held.set(allocId, (wait = opening()));
      return wait.promise;
    },
    admitted(allocId) {
      overlapped = true;
      if (!known.has(allocId)) spared.add(allocId);
    },
    end() {
      for (const id of [...taken]) letGo(id);
      orphans?.open();
      orphans = undefined;
    },
  };
}

export function createReapGuard(sources: ReapGuardSources): ReapGuard {
  let current: UnderWay | undefined;
  // The end of the last reap asked for: reaps run one after the other in call order.
  let tail: Promise<void> = Promise.resolve();

  async function run<T>(fn: (scope: ReapScope) => Promise<T>): Promise<T> {
    const active = [...sources.active()];
    const reap = underWay(new Set([...sources.records(), ...active]), active.length > 0);
    current = reap;
    try {
      return await fn(reap.scope);
    } finally {
      current = undefined;
      reap.end();
    }
  }

  return {
    async admit(allocId) {
      for (let reap = current; reap !== undefined; reap = current) {
        const wait = reap.hold(allocId);
        if (wait === undefined) {
          reap.admitted(allocId);
          return;
        }
        await wait;
      }
    },

    reap(fn, signal) {
      let started = false;
      const result = tail.then(() => {
        if (signal?.aborted === true) throw abortedReap(signal);
        started = true;
        return run(fn);
      });
      tail = result.then(
        () => undefined,
        () => undefined,
      );
      if (signal === undefined) return result;
      return new Promise((resolve, reject) => {
        const onAbort = () => {
          if (!started) reject(abortedReap(signal));
        };
        if (signal.aborted) onAbort();
        else signal.addEventListener('abort', onAbort, { once: true });
        result.then(resolve, reject).finally(() => {
          signal.removeEventListener('abort', onAbort);
        });
      });
    },
  };
}
