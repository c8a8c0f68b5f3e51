// The two services' handlers behind one facade: AllocNetworkService in alloc-handlers.ts,
// OperatorService in operator-handlers.ts (GetAgentInfo in agent-info.ts), both run through one
// call handler (call.ts: signal at the deadline, status, failure metric, one log line per call).
// The counters GetAgentInfo reports, leaks found and reaped among them, are the runner's.
import type { AllocNetworkServiceHandlers, OperatorServiceHandlers } from '@allocnet/proto';
import { createAllocHandlers } from './alloc-handlers.js';
import type { AllocCallsRunner, AllocHandlersDeps } from './alloc-handlers.js';
import { createCallHandler } from './call.js';
import type { AgentMetrics } from './metrics.js';
import { createOperatorHandlers } from './operator-handlers.js';
import type { OperatorHandlersDeps, OperatorRunner } from './operator-handlers.js';

export interface ServiceDeps
  extends
    Omit<AllocHandlersDeps, 'runner' | 'metrics'>,
    Omit<OperatorHandlersDeps, 'runner' | 'configurator'> {
  readonly runner: AllocCallsRunner & OperatorRunner;
  readonly metrics: Pick<AgentMetrics, 'failure' | 'setup' | 'teardown'>;
  /** True once the agent is stopping: a call cancelled then was cut by the shutdown. */
  readonly stopping: () => boolean;
  /** Default performance.now. */
  readonly now?: () => number;
  /** Marks each call begun; what it returns marks it ended (the idle hand-back, memory.ts). */
  readonly activity?: () => () => void;
}

export interface ServiceHandlers {
  readonly alloc: AllocNetworkServiceHandlers;
  readonly operator: OperatorServiceHandlers;
  /** RPCs running now. */
  inFlight(): number;
}

export function createServiceHandlers(deps: ServiceDeps): ServiceHandlers {
  const calls = createCallHandler({
    metrics: deps.metrics,
    logger: deps.logger,
    stopping: deps.stopping,
    ...(deps.now === undefined ? {} : { now: deps.now }),
    ...(deps.activity === undefined ? {} : { activity: deps.activity }),
  });
  return {
    alloc: createAllocHandlers(deps, calls),
    operator: createOperatorHandlers(deps, calls),
    inFlight: calls.inFlight,
  };
}
