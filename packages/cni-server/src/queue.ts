// allocnet-cni's DEL queue: while the agent is down (or not ready), a runtime's DEL is written
// as `<queueDir>/<sha256>.del` (`{queuedAtUnixMs, env, config}`) under a shared flock on
// `<queueDir>/.lock`, and the plugin exits 0. The agent replays the queue under the exclusive
// lock before its CNI server turns ready, and again every `intervalMs` (a plugin that found
// the agent not ready just before it turned ready queues after the first replay). Each DEL runs
// as if it had just arrived; one that succeeds (or can never succeed: undecodable) is removed,
// one that fails stays for the next replay. Every replayed DEL is logged and counted.
import { mkdir, readFile, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { messageOf } from '@allocnet/base';
import { lockExclusive } from '@allocnet/libc';
import { badField } from './errors.js';
import type { CniHandler } from './handler.js';
import { decodeCniRequest } from './request.js';
import type { CniLogger } from './seams.js';

export interface ReplayReport {
  readonly replayed: number;
  readonly failed: number;
  readonly dropped: number;
}

export interface CniQueueOptions {
  readonly dir: string;
  readonly handler: CniHandler;
  readonly logger: CniLogger;
  /** Counts each replayed DEL by outcome. */
  readonly onReplay?: (outcome: 'replayed' | 'failed' | 'dropped') => void;
}

/** Replays every queued DEL once, under the exclusive lock. */
export async function replayCniQueue(
  options: CniQueueOptions,
  signal?: AbortSignal,
): Promise<ReplayReport> {
  const { dir, handler, logger } = options;
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const names = (await readdir(dir)).filter((n) => n.endsWith('.del') && !n.startsWith('.'));
  if (names.length === 0) return { replayed: 0, failed: 0, dropped: 0 };
  // Plugins hold it shared for the few milliseconds they write a file.
  const lock = await lockExclusive(join(dir, '.lock'), 10_000);
  const counts = { replayed: 0, failed: 0, dropped: 0 };
  try {
    // Listed again under the lock: a plugin may have renamed one in since.
    const locked = (await readdir(dir)).filter((n) => n.endsWith('.del') && !n.startsWith('.'));
    for (const name of locked.sort()) {
      const file = join(dir, name);
      let queued: { queuedAtUnixMs?: unknown; env?: unknown; config?: unknown };
      try {
        queued = JSON.parse(await readFile(file, 'utf8')) as typeof queued;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
        logger.error('a queued DEL cannot be read; removing it', {
          file,
          error: messageOf(error),
        });
        await rm(file, { force: true });
        counts.dropped++;
        options.onReplay?.('dropped');
        continue;
      }
      const fields = { file, queuedAtUnixMs: queued.queuedAtUnixMs };
      try {
        const call = decodeCniRequest({ env: queued.env, config: queued.config });
        if (call.command !== 'DEL')
          throw badField(['env', 'CNI_COMMAND'], `is ${call.command}; only DELs are queued`);
        try {
          await handler.handle(call, signal ?? new AbortController().signal);
        } catch (error) {
          counts.failed++;
          options.onReplay?.('failed');
          logger.warn('a queued DEL failed; it stays queued for the next replay', {
            ...fields,
            containerId: call.containerId,
            ifName: call.ifName,
            error: messageOf(error),
          });
          continue;
        }
        await rm(file, { force: true });
        counts.replayed++;
        options.onReplay?.('replayed');
        logger.info('replayed a DEL queued while the agent was down', {
          ...fields,
          containerId: call.containerId,
          ifName: call.ifName,
          network: call.networkName,
        });
      } catch (error) {
        logger.error('a queued DEL is not a valid CNI call; removing it', {
          ...fields,
          error: messageOf(error),
        });
        await rm(file, { force: true });
        counts.dropped++;
        options.onReplay?.('dropped');
      }
    }
  } finally {
    lock.release();
  }
  return counts;
}

export interface CniQueueRepeatOptions extends CniQueueOptions {
  /** How often to look for DELs queued after the start's replay. */
  readonly intervalMs: number;
  /** Each repeated replay's report (the agent gauges the DELs still queued). */
  readonly onReport?: (report: ReplayReport) => void;
}

/**
 * Replays the queue every `intervalMs`, one replay at a time (a tick while one runs is skipped);
 * a replay that fails is logged and the next tick tries again. The timer does not keep the
 * process alive. `stop` ends it; a replay under way finishes on its own.
 */
export function repeatCniQueueReplay(options: CniQueueRepeatOptions): { stop(): void } {
  let replaying = false;
  const timer = setInterval(() => {
    if (replaying) return;
    replaying = true;
    replayCniQueue(options)
      .then((report) => {
        options.onReport?.(report);
      })
      .catch((error: unknown) => {
        options.logger.warn('replaying the CNI DEL queue failed', { error: messageOf(error) });
      })
      .finally(() => {
        replaying = false;
      });
  }, options.intervalMs);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
    },
  };
}
