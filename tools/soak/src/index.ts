export { MAX_COUNT, MAX_WIDTH, PORT_BASE, USAGE, parseSoakArgs } from './args.js';
export type { SoakOptions } from './args.js';
export { MAX_FAILURES_KEPT, churn, cycleAllocId } from './churn.js';
export type { AllocOps, ChurnOptions, ChurnProgress, ChurnResult } from './churn.js';
export { SoakError, isSoakError } from './errors.js';
export type { SoakErrorCode, SoakErrorDetails } from './errors.js';
export { createNodeReader } from './node-state.js';
export type { NodeReader, NodeReaderOptions } from './node-state.js';
export { PLUGIN_DIR, runSoak } from './soak.js';
export type { RunSoakOptions } from './soak.js';
export { formatSummary, summarize } from './summary.js';
export type { Latency, SoakSummary, SummaryInput } from './summary.js';
export {
  RSS_GROWTH_LIMIT_PERCENT,
  describeCounts,
  growthPercent,
  leakFindings,
  percentile,
  rssProblem,
  rulesetLines,
} from './verdict.js';
export type { NodePlaces, NodeState, Rulesets, StateCounts } from './verdict.js';
