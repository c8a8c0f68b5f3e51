export { bindLibc, loadKoffiLibc } from './bind.js';
export { lockExclusive, readHolder, tryLockExclusive, writeHolder } from './flock.js';
export type { HeldLock } from './flock.js';
export { allocateAhead } from './fallocate.js';
export { SetnsError, inNetworkNamespace } from './netns.js';
