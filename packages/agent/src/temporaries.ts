// The start sweep: the temporaries of interrupted writes in the files the agent writes, removed
// once the data dir's lock is held. A durable write (`writeFileDurably`, @allocnet/base/files)
// removes its temporary when it fails; only a writer killed midway (a SIGKILL of the agent with
// setups in flight) leaves one, named `.<file>.<pid>.<8 hex>.tmp`. Those of a writer that is gone
// are removed: in the CNI cache (results and ADD markers: `CniCache.staleTemporaries`) and beside
// the ready file. A live writer's stay: an `allocnet cni add` run on the same cache dir is
// writing it now. `allocnet leaks` reports (and `--reap` removes) any found later, as orphans.
import { basename, dirname } from 'node:path';
import { removeStaleTemporaries } from '@allocnet/base/files';
import { createCniCache } from '@allocnet/cni';
import type { AgentConfig } from './config.js';
import { messageOf } from './errors.js';
import type { AgentLogger } from './logging.js';

/**
 * Removes the stale temporaries of the agent's files; resolves their paths. It never fails the
 * start: a directory it cannot read is logged (a setup that needs it will say what is wrong).
 */
export async function sweepTemporaries(
  config: Pick<AgentConfig, 'cni' | 'readyFile'>,
  logger: AgentLogger,
): Promise<string[]> {
  const removed: string[] = [];
  try {
    const cache = createCniCache(config.cni.cacheDir);
    for (const path of await cache.staleTemporaries()) {
      await cache.removeTemporary(path);
      removed.push(path);
    }
    const ready = config.readyFile;
    if (ready !== undefined)
      removed.push(
        ...(await removeStaleTemporaries([{ dir: dirname(ready), target: basename(ready) }])),
      );
  } catch (error) {
    logger.warn('the temporaries of interrupted writes could not all be removed', {
      error: messageOf(error),
      removed: removed.length,
    });
    return removed;
  }
  if (removed.length > 0) {
    logger.info('removed the temporaries of interrupted writes', { count: removed.length });
    logger.debug('the temporaries removed', { paths: removed });
  }
  return removed;
}
