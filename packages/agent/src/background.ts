// What the agent does in the background once it serves: the restore of what the last run left
// and the first reconcile (the runner's `startInBackground`), then one warm-up of the reap path.
import { isRunnerError } from '@allocnet/alloc-runner';
import type { AllocRunner } from '@allocnet/alloc-runner';
import type { CniConfigurator } from '@allocnet/cni-configurator';
import { WARM_REAP_ALLOCATIONS } from './defaults.js';
import { messageOf } from './errors.js';
import type { AgentLogger } from './logging.js';
import { handBackMemory, memoryMiB } from './memory.js';
import { warmReapEncoding } from './operator-handlers.js';

/** What the warm-up uses of the configurator; a test's configurator may not have it. */
export type WarmingConfigurator = Partial<Pick<CniConfigurator, 'warmReap'>>;

/**
 * Restores what the last run left, then reconciles once, in the background (the runner's
 * `startInBackground`): the agent serves meanwhile, an operation on an allocation still being
 * restored waits for that one. With `after`, the holds and the restore begin once it settles.
 * `handedBack` is told of each hand-back of memory it does (the restore's, the warm-up's).
 * Returns how many allocations are being restored.
 */
export function restoreInBackground(
  runner: AllocRunner,
  configurator: WarmingConfigurator,
  logger: AgentLogger,
  after?: Promise<unknown>,
  handedBack: () => void = () => undefined,
): number {
  const { restoring, done } = runner.startInBackground(after === undefined ? {} : { after });
  done.then(
    async (started) => {
      // The restore read thousands of plugin and iptables outputs: hand back the memory they
      // took (memory.ts; docs/performance.md: the RSS after a restore).
      const gcMs = await handBackMemory();
      handedBack();
      logger.info('restored allocations from the last run', {
        ...started.restore.counts,
        durationMs: started.restore.durationMs,
        ...memoryMiB(),
        ...(gcMs === undefined ? {} : { gcMs }),
      });
      void warmReapPath(configurator, logger, handedBack);
    },
    (error: unknown) => {
      if (isRunnerError(error) && error.code === 'reconcile-failed') {
        // The first reconcile failing (iptables missing, say) does not stop the agent: requests
        // will say what is wrong, and the reconciler tries again at its interval.
        logger.error('the first reconcile failed; the agent serves anyway', {
          error: messageOf(error),
        });
      } else if (
        isRunnerError(error) &&
        (error.code === 'shutting-down' || error.code === 'aborted')
      ) {
        logger.info(
          'the agent stopped before the restore was done; the next start restores the rest',
        );
      } else {
        logger.error('restoring the allocations failed', { error: messageOf(error) });
      }
    },
  );
  return restoring;
}

/**
 * Once the restore and the first reconcile are done: the reap's parse, plan, report and stream
 * encoding run once over WARM_REAP_ALLOCATIONS made-up leaks, in memory and in slices (the
 * configurator's `warmReap`), so that an operator's first ReapLeaks does not run them before V8
 * has compiled them (issue 28: it was 1.21× the second). Nothing on the host is read or changed.
 */
async function warmReapPath(
  configurator: WarmingConfigurator,
  logger: AgentLogger,
  handedBack: () => void,
): Promise<void> {
  if (configurator.warmReap === undefined) return;
  const started = performance.now();
  try {
    const report = await configurator.warmReap(WARM_REAP_ALLOCATIONS);
    await warmReapEncoding(report.leaks);
    const durationMs = Math.round(performance.now() - started);
    // The warm-up built a reap of thousands of leaks to throw away: its memory goes back too.
    const gcMs = await handBackMemory();
    handedBack();
    logger.info('warmed the reap path', {
      allocations: report.leaks.length,
      durationMs,
      ...memoryMiB(),
      ...(gcMs === undefined ? {} : { gcMs }),
    });
  } catch (error) {
    logger.warn('warming the reap path failed; the first reap runs cold', {
      error: messageOf(error),
    });
  }
}
