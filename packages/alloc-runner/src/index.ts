export { createAllocRunner } from './runner.js';
export type {
  AllocRunner,
  AllocRunnerOptions,
  AttachOptions,
  AttachResult,
  DetachResult,
  BackgroundOptions,
  BackgroundStart,
  OperationOptions,
  ReconcileOptions,
  RunnerConfigurator,
  RunnerStats,
  StartReport,
} from './runner.js';
export { systemClock } from './context.js';
export type { Clock } from './context.js';
export type { CheckReport } from './lifecycle.js';
export type { ForceCleanupOptions, RunnerCleanupReport, RunnerTeardownReport } from './teardown.js';
export type { RestoreOutcome, RestoreReport, RestoreResult } from './restore.js';
export type {
  NamespaceReapFailure,
  ReapOptions,
  ReconcileMode,
  ReconcileReport,
  RunnerLeakReport,
  RunnerReapReport,
  StrayNamespace,
} from './reconciler.js';
export { RunnerError, invalidInput, isRunnerError } from './errors.js';
export type { RunnerErrorCode, RunnerErrorDetails } from './errors.js';
export { checkAllocId, configuratorSpecsOf, decodeSpec, isValidSpec } from './spec.js';
export { canonicalSpec, specDifferences } from './canonical.js';
export type {
  AttachmentSpec,
  CniOrigin,
  InterruptedSetup,
  RunnerSpec,
  SpecLimits,
  ValidRunnerSpec,
} from './spec.js';
export { SCHEMA_VERSION, attachmentsOf } from './record.js';
export type {
  AllocPhase,
  AllocRecord,
  AttachmentPhase,
  AttachmentView,
  ExtraAttachment,
} from './record.js';
export { MIGRATIONS, RECORD_PREFIX, SCHEMA_KEY, openRunnerStore } from './store.js';
export type { Migration, MigrationContext, OpenStoreOptions, RunnerStore } from './store.js';
export { realRoomSystem } from './room.js';
export type { RoomSystem } from './room.js';
export { NETNS_RUN_DIR, checkNetnsName, createIpNetnsManager } from './netns.js';
export type { IpNetnsManagerOptions, NetnsManager } from './netns.js';
export { CRASH_ENV, CRASH_POINTS, crashPointsFromEnv, noCrashPoints } from './crash.js';
export type { CrashPoint, CrashPoints } from './crash.js';
export {
  DEFAULT_MAX_ATTACHMENTS,
  DEFAULT_MAX_CONCURRENT,
  DEFAULT_NETNS_PREFIX,
  DEFAULT_RECONCILE_INTERVAL_MS,
  DEFAULT_RECONCILE_MODE,
} from './defaults.js';
