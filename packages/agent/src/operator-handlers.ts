// OperatorService: the operator's calls, run through call.ts like the scheduler's. ForceCleanup,
// ListLeaks and ReapLeaks go through the runner (its queue, its counters, its guard that keeps
// a reap from meeting a setup in flight); ReloadConfig through the agent's reloader;
// GetAgentInfo (agent-info.ts) reads the runner's counters and asks the plugins their versions.
import type { AllocRunner } from '@allocnet/alloc-runner';
import { createPause } from '@allocnet/base';
import type { Leak, NetworkCatalog } from '@allocnet/cni-configurator';
import { loadAllocnetProto } from '@allocnet/proto';
import type { OperatorServiceHandlers, ReapLeaksProgress } from '@allocnet/proto';
import { agentInfoCall } from './agent-info.js';
import type { AgentInfoDeps } from './agent-info.js';
import { idForLog, requestOf } from './call.js';
import type { CallHandler } from './call.js';
import {
  catalogMessages,
  hostStateMessage,
  leakMessage,
  stateCounts,
  strayNamespaceMessage,
} from './convert.js';
import type { AgentLogger } from './logging.js';
import { decodeEmptyRequest, decodeForceCleanupRequest, decodeReapRequest } from './requests.js';
import { encodeInSlices } from './sliced-encode.js';

/** Reaped allocations per slice of the ReapLeaks summary's encoding (sliced-encode.ts). */
const LEAKS_PER_PART = 100;

let serializeProgress: ((message: ReapLeaksProgress) => Buffer) | undefined;

/** The ReapLeaks stream's own serializer (the one grpc-js writes its messages with). */
function progressSerializer(): (message: ReapLeaksProgress) => Buffer {
  serializeProgress ??= loadAllocnetProto().allocnet.v1.OperatorService.service.ReapLeaks
    .responseSerialize as (message: ReapLeaksProgress) => Buffer;
  return serializeProgress;
}

/**
 * The ReapLeaks summary encoded in slices: the first part with every field and the first
 * LEAKS_PER_PART reaped allocations, each next part with the next ones.
 */
async function slicedSummary(
  summary: NonNullable<ReapLeaksProgress['summary']>,
  reaped: readonly Parameters<typeof leakMessage>[0][],
): Promise<ReapLeaksProgress> {
  const serialize = progressSerializer();
  function* parts(): Generator<ReapLeaksProgress> {
    for (let i = 0; i === 0 || i < reaped.length; i += LEAKS_PER_PART) {
      const slice = reaped.slice(i, i + LEAKS_PER_PART).map(leakMessage);
      yield { summary: i === 0 ? { ...summary, reaped: slice } : { reaped: slice } };
    }
  }
  // The pre-encoded bytes stand for the message: call.ts's serializer writes them as they are.
  return (await encodeInSlices(serialize, parts())) as unknown as ReapLeaksProgress;
}

/**
 * The ReapLeaks stream's encoding run once over `leaks` and thrown away: a step per leak and the
 * sliced summary, as a reap of them writes (with the configurator's `warmReap`, compose.ts).
 */
export async function warmReapEncoding(leaks: readonly Leak[]): Promise<void> {
  const serialize = progressSerializer();
  const pause = createPause();
  for (const [i, leak] of leaks.entries()) {
    serialize({ step: { done: i + 1, total: leaks.length, allocId: leak.allocId } });
    const turn = pause();
    if (turn !== undefined) await turn;
  }
  const none = { rules: [], chains: [], reservations: [], cacheFiles: [] };
  await slicedSummary({ orphans: hostStateMessage(none), failed: [], namespaces: [] }, leaks);
}

/**
 * What the operator's calls use of the runner: its forced cleanup (in the allocation's turn,
 * saying whether it knew the allocation), its leak scan and reap, its counters.
 */
export type OperatorRunner = Pick<
  AllocRunner,
  'forceCleanup' | 'findLeaks' | 'reapLeaks' | 'stats'
>;

export interface OperatorHandlersDeps extends Omit<AgentInfoDeps, 'runner'> {
  readonly runner: OperatorRunner;
  readonly logger: AgentLogger;
  /** What ReloadConfig (and SIGHUP) does: re-read the CNI configs and what can change live. */
  readonly reload: () => Promise<NetworkCatalog>;
}

/** ForceCleanup: the sweep, with a warning when it cuts an allocation the agent knows. */
function forceCleanupCall(
  deps: OperatorHandlersDeps,
  { unary }: CallHandler,
): OperatorServiceHandlers['ForceCleanup'] {
  return unary('force-cleanup', 'info', async (request, { signal, fields }) => {
    const id = idForLog(request.allocId);
    if (id !== undefined) fields.allocId = id;
    const args = decodeForceCleanupRequest(request);
    if (args.network !== undefined) fields.network = args.network;
    fields.dryRun = args.dryRun;
    const { known, report } = await deps.runner.forceCleanup(args.allocId, {
      signal,
      dryRun: args.dryRun,
      ...(args.network === undefined ? {} : { network: args.network }),
    });
    if (known && !args.dryRun)
      deps.logger.warn(
        'forced cleanup of an allocation the agent knows; its network stops working',
        { allocId: args.allocId },
      );
    fields.removed = stateCounts(report.removed);
    return { dryRun: report.dryRun, removed: hostStateMessage(report.removed) };
  });
}

/** ListLeaks: the leaks, orphans and stray namespaces now. */
function listLeaksCall(
  deps: OperatorHandlersDeps,
  { unary }: CallHandler,
): OperatorServiceHandlers['ListLeaks'] {
  return unary('list-leaks', 'info', async (request, { signal, fields }) => {
    decodeEmptyRequest(request);
    const { leaks, orphans, namespaces } = await deps.runner.findLeaks({ signal });
    fields.leaks = leaks.length;
    fields.orphans = stateCounts(orphans);
    fields.namespaces = namespaces.length;
    return {
      leaks: leaks.map(leakMessage),
      orphans: hostStateMessage(orphans),
      namespaces: namespaces.map(strayNamespaceMessage),
    };
  });
}

/**
 * ReapLeaks: a stream of steps ending with the summary; a dry run lists what a reap would
 * remove, as steps, and removes nothing.
 */
function reapLeaksCall(
  deps: OperatorHandlersDeps,
  { serve }: CallHandler,
): OperatorServiceHandlers['ReapLeaks'] {
  const { runner } = deps;
  return (call) => {
    void serve('reap-leaks', call, 'info', async ({ signal, fields }) => {
      const args = decodeReapRequest(requestOf(call.request));
      fields.dryRun = args.dryRun;
      fields.batchSize = args.batchSize;
      const write = (message: ReapLeaksProgress) => {
        if (!call.cancelled) call.write(message);
      };
      if (args.dryRun) {
        const { leaks, orphans, namespaces } = await runner.findLeaks({ signal });
        leaks.forEach((leak, i) => {
          write({ step: { done: i + 1, total: leaks.length, allocId: leak.allocId } });
        });
        fields.leaks = leaks.length;
        fields.namespaces = namespaces.length;
        write(
          await slicedSummary(
            {
              orphans: hostStateMessage(orphans),
              failed: [],
              namespaces: namespaces.map(strayNamespaceMessage),
            },
            leaks,
          ),
        );
        return;
      }
      const report = await runner.reapLeaks({
        signal,
        batchSize: args.batchSize,
        onProgress: (p) => {
          write({ step: { done: p.done, total: p.total, allocId: p.allocId ?? '' } });
        },
      });
      fields.reaped = report.reaped.length;
      fields.failed = report.failed.length + report.namespaceFailures.length;
      fields.orphans = stateCounts(report.orphans);
      fields.namespaces = report.namespaces.length;
      const summary = await slicedSummary(
        {
          orphans: hostStateMessage(report.orphans),
          failed: [
            ...report.failed.map((f) => ({ allocId: f.allocId, error: f.error, netnsName: '' })),
            ...report.namespaceFailures.map((f) => ({
              allocId: f.namespace.allocId,
              error: f.error,
              netnsName: f.namespace.name,
            })),
          ],
          namespaces: report.namespaces.map(strayNamespaceMessage),
        },
        report.reaped,
      );
      write(summary);
    }).then((result) => {
      if (result.ok) call.end();
      else call.emit('error', result.error);
    });
  };
}

/** ReloadConfig: the agent's reload, answered with the networks it read. */
function reloadCall(
  deps: OperatorHandlersDeps,
  { unary }: CallHandler,
): OperatorServiceHandlers['ReloadConfig'] {
  return unary('reload', 'info', async (request, { fields }) => {
    decodeEmptyRequest(request);
    const catalog = await deps.reload();
    fields.networks = catalog.networks.length;
    fields.invalidFiles = catalog.invalid.length;
    return catalogMessages(catalog);
  });
}

/** OperatorService's handlers, one call each, run through `calls`. */
export function createOperatorHandlers(
  deps: OperatorHandlersDeps,
  calls: CallHandler,
): OperatorServiceHandlers {
  return {
    ForceCleanup: forceCleanupCall(deps, calls),
    ListLeaks: listLeaksCall(deps, calls),
    ReapLeaks: reapLeaksCall(deps, calls),
    ReloadConfig: reloadCall(deps, calls),
    GetAgentInfo: agentInfoCall(deps, calls),
  };
}
