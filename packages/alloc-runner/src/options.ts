// The runner's options: what each means, its default (defaults.ts) and the check of each, so
// that `createAllocRunner` gets them resolved and valid.
import type { FieldPath, Logger } from '@allocnet/base';
import type { CniConfigurator } from '@allocnet/cni-configurator';
import type { Clock } from './context.js';
import type { CrashPoints } from './crash.js';
import {
  DEFAULT_MAX_CONCURRENT,
  DEFAULT_NETNS_PREFIX,
  DEFAULT_OPERATION_TIMEOUT_MS,
  DEFAULT_RECONCILE_INTERVAL_MS,
  DEFAULT_RECONCILE_MODE,
  DEFAULT_STORE_RETRY_MS,
} from './defaults.js';
import { RunnerError } from './errors.js';
import { checkNetnsName } from './netns.js';
import type { NetnsManager } from './netns.js';
import type { ReconcileMode } from './reconciler.js';
import type { RunnerStore } from './store.js';

/**
 * What the runner calls of the configurator: an allocation's setup, CHECK and teardown, and the
 * leak sweeper's scans, reaps and forced cleanup, the holds of recorded addresses at start, the
 * host ports a spec maps, the check of each attachment's spec and the catalog (the default
 * network's name: an attachment naming it is in the same network as one naming none). Nothing
 * else (reload, close) is its.
 */
export type RunnerConfigurator = Pick<
  CniConfigurator,
  | 'catalog'
  | 'checkSpec'
  | 'portMappingsOf'
  | 'setup'
  | 'check'
  | 'checkBatch'
  | 'teardown'
  | 'holdAddresses'
  | 'findLeaks'
  | 'reapLeaks'
  | 'forceCleanup'
>;

export interface ReconcileOptions {
  /** `reap` removes what belongs to no allocation; `report` only counts it. Default `report` (defaults.ts). */
  readonly mode?: ReconcileMode;
  /** Between the end of one reconcile and the start of the next; 0 turns it off. Default 300 000. */
  readonly intervalMs?: number;
}

export interface AllocRunnerOptions {
  /**
   * The agent's configurator, seen through what the runner calls of it (`RunnerConfigurator`).
   * The runner never closes it.
   */
  readonly configurator: RunnerConfigurator;
  /** The agent's data directory; the store is LMDB at `<dataDir>/state`. */
  readonly dataDir: string;
  /**
   * The store seam: one already opened (with `openRunnerStore`, possibly wrapped by a test). The
   * runner owns it from here and closes it on `close()`. Default: `openRunnerStore({ dataDir })`.
   */
  readonly store?: RunnerStore;
  /** Default `createIpNetnsManager()` (`ip netns` on this host). */
  readonly netns?: NetnsManager;
  /**
   * Namespaces the runner makes are `<netnsPrefix><allocId>`, and the reconciler treats every
   * namespace named `<netnsPrefix><a valid allocation id>` that no record has as its own leak.
   * No other program's namespaces may start with it. Default `alloc-`.
   */
  readonly netnsPrefix?: string;
  /** Operations on different allocations at once. Default 8. */
  readonly maxConcurrent?: number;
  /**
   * After a write found the data dir full: how often to probe it for space, and then remove the
   * records it kept (store-retry.ts); 0 turns the timer off (the next operation still retries).
   * Default 5 000.
   */
  readonly storeRetryMs?: number;
  /**
   * The deadline of one operation from the start of its turn: its signal aborts then (a setup
   * rolls back, `timed-out`), so that nothing holds an allocation's queue for ever. Every seam
   * honours the signal (plugins and host commands are killed). Default 600 000 (10 minutes).
   */
  readonly operationTimeoutMs?: number;
  readonly reconcile?: ReconcileOptions;
  readonly logger?: Logger;
  readonly clock?: Clock;
  /** Default `crashPointsFromEnv()`: `ALLOCNET_CRASH_AT`, read once, here. Only tests set it. */
  readonly crashPoints?: CrashPoints;
}

/** The numbers and names of the options, defaulted and checked. */
export interface RunnerSettings {
  readonly prefix: string;
  readonly maxConcurrent: number;
  readonly mode: ReconcileMode;
  readonly intervalMs: number;
  readonly storeRetryMs: number;
  readonly operationTimeoutMs: number;
}

function invalidOption(message: string, path: FieldPath): RunnerError {
  return new RunnerError(message, { code: 'invalid-argument', path });
}

/** The options' values, defaulted; `invalid-argument` naming the option for a bad one. */
export function resolveOptions(options: AllocRunnerOptions): RunnerSettings {
  const settings: RunnerSettings = {
    prefix: options.netnsPrefix ?? DEFAULT_NETNS_PREFIX,
    maxConcurrent: options.maxConcurrent ?? DEFAULT_MAX_CONCURRENT,
    mode: options.reconcile?.mode ?? DEFAULT_RECONCILE_MODE,
    intervalMs: options.reconcile?.intervalMs ?? DEFAULT_RECONCILE_INTERVAL_MS,
    storeRetryMs: options.storeRetryMs ?? DEFAULT_STORE_RETRY_MS,
    operationTimeoutMs: options.operationTimeoutMs ?? DEFAULT_OPERATION_TIMEOUT_MS,
  };
  const { prefix, maxConcurrent, intervalMs, operationTimeoutMs, storeRetryMs } = settings;
  if (prefix === '') {
    // Every namespace on the host would look like the runner's to the reconciler.
    throw invalidOption('netnsPrefix is empty; the runner needs a prefix of its own', [
      'netnsPrefix',
    ]);
  }
  checkNetnsName(prefix);
  if (!Number.isInteger(maxConcurrent) || maxConcurrent < 1) {
    throw invalidOption(`maxConcurrent ${maxConcurrent} is not a positive whole number`, [
      'maxConcurrent',
    ]);
  }
  if (!Number.isInteger(intervalMs) || intervalMs < 0) {
    throw invalidOption(`reconcile.intervalMs ${intervalMs} is not a whole number >= 0`, [
      'reconcile',
      'intervalMs',
    ]);
  }
  if (!Number.isInteger(operationTimeoutMs) || operationTimeoutMs < 1) {
    throw invalidOption(`operationTimeoutMs ${operationTimeoutMs} is not a positive whole number`, [
      'operationTimeoutMs',
    ]);
  }
  if (!Number.isInteger(storeRetryMs) || storeRetryMs < 0) {
    throw invalidOption(`storeRetryMs ${storeRetryMs} is not a whole number >= 0`, [
      'storeRetryMs',
    ]);
  }
  return settings;
}
