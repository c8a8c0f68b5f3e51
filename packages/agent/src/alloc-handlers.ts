// AllocNetworkService: the scheduler's calls. Each decodes its request (requests.ts) and runs on
// the runner through call.ts (signal, status, log line); setups and teardowns feed the duration
// histograms. The runner keeps a reap from meeting a setup in flight: nothing here waits.
import * as grpc from '@grpc/grpc-js';
import { kindOf } from '@allocnet/base';
import { attachmentsOf, isRunnerError, specDifferences } from '@allocnet/alloc-runner';
import type { AllocRecord, AllocRunner } from '@allocnet/alloc-runner';
import { DEFAULT_NETWORK_NAME } from '@allocnet/cni-configurator';
import type { CniConfigurator } from '@allocnet/cni-configurator';
import type { AllocNetworkServiceHandlers, ListAllocNetworksResponse } from '@allocnet/proto';
import { cut, idForLog } from './call.js';
import type { CallHandler } from './call.js';
import { hostStateMessage, stateCounts, statusMessage } from './convert.js';
import { AgentError, messageOf } from './errors.js';
import { createListEncoder } from './list-encode.js';
import {
  decodeAttachRequest,
  decodeCheckRequest,
  decodeDetachRequest,
  decodeEmptyRequest,
  decodeGetRequest,
  decodeSetupRequest,
  decodeTeardownRequest,
} from './requests.js';
import type { AllocLimits } from './requests.js';
import type { AgentMetrics } from './metrics.js';

/** What the scheduler's calls use of the runner. */
export type AllocCallsRunner = Pick<
  AllocRunner,
  'setup' | 'teardown' | 'check' | 'get' | 'list' | 'isRestoring' | 'attach' | 'detach'
>;

/** What the calls use of the configurator: its networks, read again for a name not known. */
export type NetworkSource = Pick<CniConfigurator, 'catalog' | 'reload'>;

export interface AllocHandlersDeps {
  readonly runner: AllocCallsRunner;
  readonly configurator: NetworkSource;
  readonly metrics: Pick<AgentMetrics, 'setup' | 'teardown'>;
  readonly ignoreHostIps: boolean;
  /** The agent's caps on one allocation (config `limits`). */
  readonly limits: AllocLimits;
}

/** The network a request that names none gets: the embedded default's name. */
function defaultNetworkOf(configurator: NetworkSource): () => string {
  return () =>
    configurator.catalog().networks.find((n) => n.source === 'default')?.name ??
    DEFAULT_NETWORK_NAME;
}

/** SetupAllocNetwork: decode, setup, and the setup histogram (bad input left out). */
function setupCall(
  deps: AllocHandlersDeps,
  { unary }: CallHandler,
): AllocNetworkServiceHandlers['SetupAllocNetwork'] {
  const { runner, configurator, metrics } = deps;
  const defaultNetwork = defaultNetworkOf(configurator);
  return unary(
    'setup',
    'info',
    async (request, { signal, fields }) => {
      const id = idForLog(request.allocId);
      if (id !== undefined) fields.allocId = id;
      // The primary's network: the request's, or its first attachment's.
      const primary = request.network || (request.attachments[0]?.network ?? '');
      fields.network = primary === '' ? defaultNetwork() : cut(primary);
      if (request.attachments.length > 1) fields.attachments = request.attachments.length;
      const spec = await decodeSetupRequest(request, {
        catalog: () => configurator.catalog(),
        reload: () => configurator.reload(),
        ignoreHostIps: deps.ignoreHostIps,
        limits: deps.limits,
      });
      fields.decoded = true;
      const before = runner.get(spec.allocId);
      const status = await runner.setup(spec, { signal });
      const record = runner.get(spec.allocId);
      // Nothing ran when an equal setup was already ready and its record did not change.
      const already =
        before?.phase === 'ready' &&
        specDifferences(before.spec, spec).length === 0 &&
        record?.updatedAtMs === before.updatedAtMs;
      fields.attempts = already ? 0 : status.attempts;
      fields.alreadySetUp = already;
      fields.address = status.address;
      return {
        status: record === undefined ? null : statusMessage(record, defaultNetwork()),
        alreadySetUp: already,
      };
    },
    (code, seconds, fields) => {
      const decoded = fields.decoded === true;
      delete fields.decoded;
      // Calls refused as bad input would only blur the histogram.
      if (!decoded || code === grpc.status.INVALID_ARGUMENT) return;
      const ok = code === grpc.status.OK;
      metrics.setup(seconds, ok ? 'ok' : 'error', Math.max(0, (fields.attempts ?? 1) - 1));
    },
  );
}

/** TeardownAllocNetwork: decode, teardown, and the teardown histogram (bad input left out). */
function teardownCall(
  deps: AllocHandlersDeps,
  { unary }: CallHandler,
): AllocNetworkServiceHandlers['TeardownAllocNetwork'] {
  const { runner, metrics } = deps;
  const defaultNetwork = defaultNetworkOf(deps.configurator);
  return unary(
    'teardown',
    'info',
    async (request, { signal, fields }) => {
      const id = idForLog(request.allocId);
      if (id !== undefined) fields.allocId = id;
      const allocId = decodeTeardownRequest(request);
      const record = runner.get(allocId);
      if (record !== undefined)
        fields.network = record.status?.network ?? record.spec.network ?? defaultNetwork();
      fields.decoded = true;
      const { known, report } = await runner.teardown(allocId, { signal });
      fields.known = known;
      if (report.delError !== undefined) fields.delError = report.delError;
      const removed = stateCounts(report.removed);
      if (Object.values(removed).some((n) => n > 0)) fields.auditRemoved = removed;
      return {
        wasKnown: known,
        delRan: report.delRan,
        delError: report.delError ?? '',
        removed: hostStateMessage(report.removed),
      };
    },
    (code, seconds, fields) => {
      const decoded = fields.decoded === true;
      delete fields.decoded;
      if (!decoded || code === grpc.status.INVALID_ARGUMENT) return;
      metrics.teardown(seconds, code === grpc.status.OK ? 'ok' : 'error');
    },
  );
}

/** GetAllocNetwork, ListAllocNetworks and CheckAllocNetwork: the records, and CHECK. */
function readCalls(
  deps: AllocHandlersDeps,
  { unary }: CallHandler,
): Pick<
  AllocNetworkServiceHandlers,
  'GetAllocNetwork' | 'ListAllocNetworks' | 'CheckAllocNetwork'
> {
  const { runner } = deps;
  const defaultNetwork = defaultNetworkOf(deps.configurator);
  const encodeList = createListEncoder(statusMessage);
  const recordOf = (allocId: string): AllocRecord => {
    const record = runner.get(allocId);
    if (record === undefined)
      throw new AgentError(`allocation ${JSON.stringify(allocId)} is not known to this agent`, {
        code: 'not-found',
      });
    return record;
  };

  return {
    GetAllocNetwork: unary('get', 'debug', (request, { fields }) => {
      const id = idForLog(request.allocId);
      if (id !== undefined) fields.allocId = id;
      const record = recordOf(decodeGetRequest(request));
      return Promise.resolve({
        status: statusMessage(record, defaultNetwork(), runner.isRestoring(record.allocId)),
      });
    }),

    ListAllocNetworks: unary('list', 'debug', (request, { fields }) => {
      decodeEmptyRequest(request);
      const records = runner.list();
      fields.count = records.length;
      const encoded = encodeList(records, defaultNetwork(), (id) => runner.isRestoring(id));
      // Already bytes (list-encode.ts): call.ts writes them as they are.
      return Promise.resolve(encoded as unknown as ListAllocNetworksResponse);
    }),

    CheckAllocNetwork: unary('check', 'info', async (request, { signal, fields }) => {
      const id = idForLog(request.allocId);
      if (id !== undefined) fields.allocId = id;
      const allocId = decodeCheckRequest(request);
      let healthy = true;
      let checkRan: boolean;
      let problem = '';
      try {
        ({ ran: checkRan } = await runner.check(allocId, { signal }));
      } catch (error) {
        // An unhealthy network is an answer, not an error: a CHECK that found it broken, or an
        // allocation recorded failed. A CHECK that could not run, or was aborted, is an error.
        const broken = kindOf(error) === 'broken';
        const failed = isRunnerError(error) && error.code === 'failed';
        if (!broken && !failed) throw error;
        healthy = false;
        checkRan = broken;
        problem = messageOf(error);
      }
      const record = recordOf(allocId);
      fields.network = record.status?.network ?? record.spec.network ?? defaultNetwork();
      fields.healthy = healthy;
      if (!healthy) fields.problem = problem;
      return { healthy, checkRan, problem, status: statusMessage(record, defaultNetwork()) };
    }),
  };
}

/** AttachNetwork and DetachNetwork: one network more or less on a running allocation. */
function attachCalls(
  deps: AllocHandlersDeps,
  { unary }: CallHandler,
): Pick<AllocNetworkServiceHandlers, 'AttachNetwork' | 'DetachNetwork'> {
  const { runner, configurator } = deps;
  const defaultNetwork = defaultNetworkOf(configurator);
  return {
    AttachNetwork: unary('attach', 'info', async (request, { signal, fields }) => {
      const id = idForLog(request.allocId);
      if (id !== undefined) fields.allocId = id;
      const named = request.attachment?.network ?? '';
      fields.network = named === '' ? defaultNetwork() : cut(named);
      const { allocId, attachment } = await decodeAttachRequest(request, {
        catalog: () => configurator.catalog(),
        reload: () => configurator.reload(),
        ignoreHostIps: deps.ignoreHostIps,
        limits: deps.limits,
      });
      // The count is checked by the runner in the allocation's turn, against its record then.
      const { record, alreadyAttached } = await runner.attach(allocId, attachment, {
        signal,
        maxAttachments: deps.limits.maxAttachments,
      });
      fields.alreadyAttached = alreadyAttached;
      if (attachment.ifName !== undefined) fields.interfaceName = attachment.ifName;
      return { status: statusMessage(record, defaultNetwork()), alreadyAttached };
    }),

    DetachNetwork: unary('detach', 'info', async (request, { signal, fields }) => {
      const id = idForLog(request.allocId);
      if (id !== undefined) fields.allocId = id;
      const { allocId, ifName } = decodeDetachRequest(request);
      fields.interfaceName = ifName;
      const before = runner.get(allocId);
      const view =
        before === undefined ? undefined : attachmentsOf(before).find((v) => v.ifName === ifName);
      if (view !== undefined) fields.network = view.network || defaultNetwork();
      const { record, report } = await runner.detach(allocId, ifName, { signal });
      if (report.delError !== undefined) fields.delError = report.delError;
      const removed = stateCounts(report.removed);
      if (Object.values(removed).some((n) => n > 0)) fields.auditRemoved = removed;
      return {
        status: statusMessage(record, defaultNetwork()),
        delRan: report.delRan,
        delError: report.delError ?? '',
        removed: hostStateMessage(report.removed),
      };
    }),
  };
}

/** AllocNetworkService's handlers, one call each, run through `calls`. */
export function createAllocHandlers(
  deps: AllocHandlersDeps,
  calls: CallHandler,
): AllocNetworkServiceHandlers {
  return {
    SetupAllocNetwork: setupCall(deps, calls),
    TeardownAllocNetwork: teardownCall(deps, calls),
    ...readCalls(deps, calls),
    ...attachCalls(deps, calls),
  };
}
