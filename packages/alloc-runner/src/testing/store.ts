import { kindOf } from '../errors.js';
import { noSpaceProblem, storeFullError } from '../store.js';
import type { RunnerStore, StoreHealth } from '../store.js';

/** A real store whose data dir can be made full: its writes then fail as on a full disk. */
export interface FillableStore extends RunnerStore {
  /** While full, every write (and `probe`) fails with `store-full`, changing nothing. */
  full: boolean;
}

/**
 * Wraps `real` (opened with `openRunnerStore`) so that a test can fill its disk: the errors and
 * the health are the ones `openRunnerStore` gives on a full filesystem, with `dataDir` named.
 */
export function fillable(real: RunnerStore, dataDir: string): FillableStore {
  let writeFailures = 0;
  let since: { problem: string; sinceMs: number } | undefined;
  const write = async (what: string, op: () => Promise<void>): Promise<void> => {
    if (store.full) {
      writeFailures++;
      const problem = noSpaceProblem(dataDir, 'No space left on device');
      since ??= { problem, sinceMs: 0 };
      throw storeFullError(what, problem);
    }
    await op();
    since = undefined;
  };
  const store: FillableStore = {
    full: false,
    path: real.path,
    health: (): StoreHealth =>
      since === undefined
        ? { writable: true, writeFailures }
        : { writable: false, ...since, writeFailures },
    async probe() {
      try {
        await write('writing the probe', async () => {
          await real.probe();
        });
        return true;
      } catch (error) {
        if (kindOf(error) === 'exhausted') return false;
        throw error;
      }
    },
    get: (allocId) => real.get(allocId),
    list: () => real.list(),
    put: (record) =>
      write(`writing the record of allocation "${record.allocId}"`, () => real.put(record)),
    remove: (allocId) =>
      write(`removing the record of allocation "${allocId}"`, () => real.remove(allocId)),
    close: () => real.close(),
  };
  return store;
}
