// What `createAllocRunner` uses for an option it is not given; the agent's own defaults
// (packages/agent/src/defaults.ts) are these too, so a library user and an agent behave alike.

/** Namespaces the runner makes are `<prefix><allocId>`. */
export const DEFAULT_NETNS_PREFIX = 'alloc-';

/** Operations on different allocations at once. */
export const DEFAULT_MAX_CONCURRENT = 8;

/**
 * What the reconciler does with what it finds: `report` only counts it. Removing state is an
 * operator's decision (`reconcile.mode: reap`, or `allocnet leaks --reap`): a node whose records
 * were lost would otherwise have every allocation's network removed by its first reconcile.
 */
export const DEFAULT_RECONCILE_MODE = 'report';

/** How often the reconciler runs after the first pass (5 minutes). */
export const DEFAULT_RECONCILE_INTERVAL_MS = 300_000;

/** How often the store retry probes a full data dir for space (store-retry.ts). */
export const DEFAULT_STORE_RETRY_MS = 5_000;

/**
 * The longest one operation (setup, CHECK, teardown, or the settling of a record before one) may
 * hold its allocation's turn: 10 minutes, well past a setup's worst case with the agent's default
 * plugin timeout (3 ADD attempts of a 4-plugin chain at 60 s each, and their DELs).
 */
export const DEFAULT_OPERATION_TIMEOUT_MS = 600_000;

/** Attachments (networks) one allocation may ask for, when a front door gives no limit of its own. */
export const DEFAULT_MAX_ATTACHMENTS = 8;
