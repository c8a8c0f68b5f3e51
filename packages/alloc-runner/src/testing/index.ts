export { createRecordingConfigurator, emptyHostState } from './configurator.js';
export type {
  ConfiguratorCall,
  ConfiguratorMethod,
  RecordingConfigurator,
} from './configurator.js';
export { createRecordingNetns } from './netns.js';
export type { NetnsCall, NetnsMethod, RecordingNetns } from './netns.js';
export { createDeferred, createManualClock } from './clock.js';
export type { Deferred, ManualClock } from './clock.js';
export { fillable } from './store.js';
export type { FillableStore } from './store.js';
export { runnerRejection } from './errors.js';
