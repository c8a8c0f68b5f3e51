export { createAllocRunner, systemClock } from './runner.js';
export type {
  AllocRunner,
  AllocRunnerOptions,
  CheckReport,
  Clock,
  OperationOptions,
  ReconcileMode,
  ReconcileOptions,
  ReconcileReport,
  RestoreOutcome,
  RestoreReport,
  RestoreResult,
  RunnerLogger,
  RunnerStats,
  RunnerTeardownReport,
  StartReport,
} from './runner.js';
export { RunnerError, isRunnerError } from './errors.js';
export type { RunnerErrorCode, RunnerErrorDetails } from './errors.js';
export { canonicalSpec, checkAllocId, decodeSpec, specDifferences } from './spec.js';
export type { InterruptedSetup, RunnerSpec } from './spec.js';
export { SCHEMA_VERSION } from './record.js';
export type { AllocPhase, AllocRecord } from './record.js';
export { MIGRATIONS, RECORD_PREFIX, SCHEMA_KEY, openRunnerStore } from './store.js';
export type { Migration, MigrationContext, OpenStoreOptions, RunnerStore } from './store.js';
export { NETNS_RUN_DIR, checkNetnsName, createIpNetnsManager } from './netns.js';
export type { IpNetnsManagerOptions, NetnsManager } from './netns.js';
export { CRASH_ENV, CRASH_POINTS, crashPointsFromEnv, noCrashPoints } from './crash.js';
export type { CrashPoint, CrashPoints } from './crash.js';
