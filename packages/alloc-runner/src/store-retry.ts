// The store retry: after a write found the data dir full, every `intervalMs` it writes a small
// probe (store.ts `probe`); once one succeeds the store is writable again, and it removes the
// records that a full dir kept after their network was undone (`ctx.unremoved`), each in its
// allocation's turn. Nothing else needs retrying: a write that failed for lack of space changed
// nothing, and its caller got `store-full` (RESOURCE_EXHAUSTED) to retry itself. The timer runs
// only while there is something to retry; `kick()` (called after each operation) starts it.
import type { RunnerContext } from './context.js';
import { logInfo } from './context.js';
import { kindOf, messageOf } from './errors.js';

export interface StoreRetry {
  /** Starts the timer when the store is not writable or a record waits for removal. */
  kick(): void;
  /** One round now: the probe, then the removals. Resolves when done; never rejects. */
  retryNow(): Promise<void>;
  /** Stops the timer and waits for a running round. */
  stop(): Promise<void>;
}

export interface StoreRetryOptions {
  readonly intervalMs: number;
  readonly closing: () => boolean;
}

export function createStoreRetry(ctx: RunnerContext, options: StoreRetryOptions): StoreRetry {
  const { store, queue, unremoved, log } = ctx;
  let timer: unknown;
  let running: Promise<void> | undefined;

  const pending = (): boolean => !store.health().writable || unremoved.size > 0;

  async function removeLeftRecord(allocId: string): Promise<void> {
    await queue.run(allocId, async () => {
      // Another operation may have settled it meanwhile.
      if (!unremoved.has(allocId)) return;
      await store.remove(allocId);
      unremoved.delete(allocId);
      logInfo(ctx, 'removed the record a full data dir had kept', { allocId });
    });
  }

  async function round(): Promise<void> {
    if (!store.health().writable) {
      if (!(await store.probe())) return;
      logInfo(ctx, 'the state store is writable again', { path: store.path });
    }
    for (const allocId of [...unremoved]) {
      try {
        await removeLeftRecord(allocId);
      } catch (error) {
        if (kindOf(error) === 'exhausted') return;
        log.warn('removing a record a full data dir had kept failed', {
          allocId,
          error: messageOf(error),
        });
      }
    }
  }

  function retryNow(): Promise<void> {
    running ??= round()
      .catch((error: unknown) => {
        log.warn('the state store retry failed', { error: messageOf(error) });
      })
      .finally(() => {
        running = undefined;
      });
    return running;
  }

  function kick(): void {
    if (timer !== undefined || options.intervalMs === 0 || options.closing() || !pending()) return;
    timer = ctx.clock.setTimeout(() => {
      void retryNow().then(() => {
        timer = undefined;
        kick();
      });
    }, options.intervalMs);
  }

  return {
    kick,
    retryNow,
    async stop() {
      if (timer !== undefined) ctx.clock.clearTimeout(timer);
      timer = undefined;
      await running;
    },
  };
}
