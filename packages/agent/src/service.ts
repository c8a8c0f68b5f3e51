// The two services' handlers. Every handler decodes its request (requests.ts), runs with an
// AbortSignal that fires at the client's deadline or when the call is cancelled, maps any error
// to a status (status.ts), records metrics and logs one line: `{op, allocId, network,
// durationMs, attempts, outcome, code, error}`.
import * as grpc from '@grpc/grpc-js';
import { isRunnerError, specDifferences } from '@allocnet/alloc-runner';
import type { AllocRecord, AllocRunner } from '@allocnet/alloc-runner';
import { findPlugin, parseNetworkConfig } from '@allocnet/cni';
import type { CniRuntime } from '@allocnet/cni';
import type { CniConfigurator, NetworkCatalog } from '@allocnet/cni-configurator';
import type {
  AllocNetworkServiceHandlers,
  OperatorServiceHandlers,
  PluginInfo,
  ReapLeaksProgress,
} from '@allocnet/proto';
import {
  catalogMessages,
  hostStateMessage,
  leakMessage,
  stateCounts,
  statusMessage,
} from './convert.js';
import { AgentError, messageOf, show } from './errors.js';
import type { ReapGate } from './gate.js';
import type { AgentLogger } from './logging.js';
import type { AgentMetrics } from './metrics.js';
import {
  decodeCheckRequest,
  decodeEmptyRequest,
  decodeForceCleanupRequest,
  decodeGetRequest,
  decodeReapRequest,
  decodeSetupRequest,
  decodeTeardownRequest,
} from './requests.js';
import { grpcFailure, statusName } from './status.js';
import type { AbortCause } from './status.js';

export interface ServiceDeps {
  readonly runner: AllocRunner;
  readonly configurator: CniConfigurator;
  /** Asked for the plugins' VERSION answers (GetAgentInfo). */
  readonly runtime: Pick<CniRuntime, 'versions' | 'pluginDirs'>;
  readonly metrics: AgentMetrics;
  readonly logger: AgentLogger;
  readonly gate: ReapGate;
  readonly ignoreHostIps: boolean;
  /** Reported by GetAgentInfo. */
  readonly info: {
    readonly version: string;
    readonly reconcileMode: string;
    readonly dataDir: string;
    readonly socketPath: string;
    readonly startedAtMs: number;
  };
  /** What ReloadConfig (and SIGHUP) does: re-read the CNI configs and what can change live. */
  readonly reload: () => Promise<NetworkCatalog>;
  /** True once the agent is stopping: a call cancelled then was cut by the shutdown. */
  readonly stopping: () => boolean;
  /** Default performance.now. */
  readonly now?: () => number;
}

/** What every server call has (grpc-js does not export its `ServerSurfaceCall`). */
type SurfaceCall = Pick<
  grpc.ServerUnaryCall<unknown, unknown>,
  'getDeadline' | 'on' | 'removeListener'
>;

/** What one call's log line says, filled in as the call learns it. */
interface LogFields {
  allocId?: string;
  network?: string;
  attempts?: number;
  [key: string]: unknown;
}

interface CallContext {
  readonly signal: AbortSignal;
  readonly fields: LogFields;
}

/**
 * A signal for one call: aborted when the client's deadline passes (DEADLINE_EXCEEDED) or the
 * call is cancelled (the client went away, or a forced shutdown cut it).
 */
function callSignal(
  call: SurfaceCall,
  stopping: () => boolean,
): { signal: AbortSignal; cause: () => AbortCause | undefined; dispose: () => void } {
  const controller = new AbortController();
  let cause: AbortCause | undefined;
  const abort = (why: AbortCause) => {
    if (controller.signal.aborted) return;
    cause = why;
    controller.abort(new Error(`the call was aborted: ${why}`));
  };
  const deadline = call.getDeadline();
  const at = deadline instanceof Date ? deadline.getTime() : deadline;
  let timer: NodeJS.Timeout | undefined;
  if (Number.isFinite(at)) {
    const ms = at - Date.now();
    if (ms <= 0) abort('deadline');
    // A deadline beyond setTimeout's range is as good as none.
    else if (ms < 2_147_483_647)
      timer = setTimeout(() => {
        abort('deadline');
      }, ms);
  }
  const onCancel = () => {
    // At the deadline the client resets the stream as grpc-js's own deadline timer ends it: a
    // cancellation this close to the deadline is the deadline (the margin covers the transit
    // time between the client's clock and this one).
    if (Number.isFinite(at) && Date.now() >= at - 100) abort('deadline');
    else abort(stopping() ? 'shutdown' : 'cancelled');
  };
  call.on('cancelled', onCancel);
  return {
    signal: controller.signal,
    cause: () => cause,
    dispose() {
      if (timer !== undefined) clearTimeout(timer);
      call.removeListener('cancelled', onCancel);
    },
  };
}

/** A string from a request, for a log line: at most 80 characters. */
function cut(text: string): string {
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** The allocation id a request names, for the log line (quoted and cut when it is odd). */
function idForLog(value: unknown): string | undefined {
  if (typeof value !== 'string' || value === '') return undefined;
  return /^[A-Za-z0-9_.-]{1,64}$/.test(value) ? value : show(value);
}

export interface ServiceHandlers {
  readonly alloc: AllocNetworkServiceHandlers;
  readonly operator: OperatorServiceHandlers;
  /** RPCs running now. */
  inFlight(): number;
}

export function createServiceHandlers(deps: ServiceDeps): ServiceHandlers {
  const { runner, configurator, metrics, logger, gate } = deps;
  const now = deps.now ?? (() => performance.now());
  let running = 0;
  const defaultNetwork = () =>
    configurator.catalog().networks.find((n) => n.source === 'default')?.name ?? 'nomad';

  /** Runs one call: signal, decode, work, status, metrics and the log line. */
  async function serve<T>(
    op: string,
    call: SurfaceCall,
    level: 'info' | 'debug',
    work: (ctx: CallContext) => Promise<T>,
    after?: (code: grpc.status, seconds: number, fields: LogFields) => void,
  ): Promise<{ ok: true; value: T } | { ok: false; error: grpc.StatusObject }> {
    running++;
    const began = now();
    const { signal, cause, dispose } = callSignal(call, deps.stopping);
    const fields: LogFields = {};
    try {
      const value = await work({ signal, fields });
      const seconds = (now() - began) / 1000;
      after?.(grpc.status.OK, seconds, fields);
      logger[level](op, {
        op,
        ...fields,
        durationMs: Math.round(seconds * 1000),
        outcome: 'ok',
      });
      return { ok: true, value };
    } catch (error) {
      const failure = grpcFailure(error, cause());
      const seconds = (now() - began) / 1000;
      const code = statusName(failure.code);
      metrics.failure(op, code);
      const attempts = failure.metadata['allocnet-attempts'];
      if (attempts !== undefined && fields.attempts === undefined)
        fields.attempts = Number(attempts);
      after?.(failure.code, seconds, fields);
      // The caller's mistakes are theirs to act on; the agent's failures are the operator's.
      const serious =
        failure.code === grpc.status.INTERNAL ||
        failure.code === grpc.status.UNAVAILABLE ||
        failure.code === grpc.status.UNKNOWN;
      logger[serious ? 'error' : level === 'debug' ? 'debug' : 'info'](op, {
        op,
        ...fields,
        durationMs: Math.round(seconds * 1000),
        outcome: 'failed',
        code,
        error: failure.details,
      });
      const metadata = new grpc.Metadata();
      for (const [k, v] of Object.entries(failure.metadata)) metadata.set(k, v);
      return { ok: false, error: { code: failure.code, details: failure.details, metadata } };
    } finally {
      dispose();
      running--;
    }
  }

  function unary<Req, Res>(
    op: string,
    level: 'info' | 'debug',
    work: (request: Req, ctx: CallContext) => Promise<Res>,
    after?: (code: grpc.status, seconds: number, fields: LogFields) => void,
  ): grpc.handleUnaryCall<Req, Res> {
    return (call, callback) => {
      void serve(op, call, level, (ctx) => work(call.request, ctx), after).then((result) => {
        if (result.ok) callback(null, result.value);
        else callback(result.error);
      });
    };
  }

  const recordOf = (allocId: string): AllocRecord => {
    const record = runner.get(allocId);
    if (record === undefined)
      throw new AgentError(`allocation ${JSON.stringify(allocId)} is not known to this agent`, {
        code: 'not-found',
      });
    return record;
  };

  let leaksFound = 0;
  let leaksReaped = 0;

  /** ListLeaks' answer without allocations that got a record while the scan ran (setups in flight). */
  async function currentLeaks(signal: AbortSignal) {
    const known = runner.list().map((r) => r.allocId);
    const report = await configurator.findLeaks(known, { signal });
    return {
      leaks: report.leaks.filter((l) => runner.get(l.allocId) === undefined),
      orphans: report.orphans,
    };
  }

  async function pluginInfos(signal: AbortSignal): Promise<PluginInfo[]> {
    const types = [...new Set(configurator.catalog().networks.flatMap((n) => n.plugins))].sort();
    return Promise.all(
      types.map(async (type): Promise<PluginInfo> => {
        let path: string;
        try {
          path = findPlugin(type, deps.runtime.pluginDirs);
        } catch (error) {
          return { type, path: '', supportedVersions: [], error: messageOf(error) };
        }
        try {
          // A one-plugin list: its VERSION answer alone (answers are cached per binary).
          const probe = parseNetworkConfig(
            { cniVersion: '1.0.0', name: 'allocnet-version-probe', type },
            'version probe',
          );
          const versions = await deps.runtime.versions(probe, { signal });
          return {
            type,
            path,
            supportedVersions: [...(versions.plugins[0]?.supportedVersions ?? [])],
            error: '',
          };
        } catch (error) {
          return { type, path, supportedVersions: [], error: messageOf(error) };
        }
      }),
    );
  }

  const alloc: AllocNetworkServiceHandlers = {
    SetupAllocNetwork: unary(
      'setup',
      'info',
      async (request, { signal, fields }) => {
        const id = idForLog(request.allocId);
        if (id !== undefined) fields.allocId = id;
        fields.network = request.network === '' ? defaultNetwork() : cut(request.network);
        const spec = await decodeSetupRequest(request, {
          catalog: () => configurator.catalog(),
          reload: () => configurator.reload(),
          ignoreHostIps: deps.ignoreHostIps,
        });
        fields.decoded = true;
        return gate.shared(async () => {
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
        });
      },
      (code, seconds, fields) => {
        const decoded = fields.decoded === true;
        delete fields.decoded;
        // Calls refused as bad input would only blur the histogram.
        if (!decoded || code === grpc.status.INVALID_ARGUMENT) return;
        const ok = code === grpc.status.OK;
        metrics.setup(seconds, ok ? 'ok' : 'error', Math.max(0, (fields.attempts ?? 1) - 1));
      },
    ),

    TeardownAllocNetwork: unary(
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
    ),

    GetAllocNetwork: unary('get', 'debug', (request, { fields }) => {
      const id = idForLog(request.allocId);
      if (id !== undefined) fields.allocId = id;
      const record = recordOf(decodeGetRequest(request));
      return Promise.resolve({ status: statusMessage(record, defaultNetwork()) });
    }),

    ListAllocNetworks: unary('list', 'debug', (request, { fields }) => {
      decodeEmptyRequest(request);
      const records = runner.list();
      fields.count = records.length;
      const network = defaultNetwork();
      return Promise.resolve({ allocations: records.map((r) => statusMessage(r, network)) });
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
        // An unhealthy network is an answer, not an error; a missing plugin or an abort is.
        const unhealthy =
          isRunnerError(error) &&
          (error.code === 'failed' || error.code === 'check-failed') &&
          grpcFailure(error, undefined).code !== grpc.status.UNAVAILABLE;
        if (!unhealthy) throw error;
        healthy = false;
        checkRan = error.code === 'check-failed';
        problem = error.message;
      }
      const record = recordOf(allocId);
      fields.network = record.status?.network ?? record.spec.network ?? defaultNetwork();
      fields.healthy = healthy;
      if (!healthy) fields.problem = problem;
      return { healthy, checkRan, problem, status: statusMessage(record, defaultNetwork()) };
    }),
  };

  const operator: OperatorServiceHandlers = {
    ForceCleanup: unary('force-cleanup', 'info', async (request, { signal, fields }) => {
      const id = idForLog(request.allocId);
      if (id !== undefined) fields.allocId = id;
      const args = decodeForceCleanupRequest(request);
      if (args.network !== undefined) fields.network = args.network;
      fields.dryRun = args.dryRun;
      if (!args.dryRun && runner.get(args.allocId) !== undefined)
        logger.warn('forced cleanup of an allocation the agent knows; its network stops working', {
          allocId: args.allocId,
        });
      const report = await configurator.forceCleanup(args.allocId, {
        signal,
        dryRun: args.dryRun,
        ...(args.network === undefined ? {} : { network: args.network }),
      });
      fields.removed = stateCounts(report.removed);
      return { dryRun: report.dryRun, removed: hostStateMessage(report.removed) };
    }),

    ListLeaks: unary('list-leaks', 'info', async (request, { signal, fields }) => {
      decodeEmptyRequest(request);
      const { leaks, orphans } = await currentLeaks(signal);
      leaksFound += leaks.length;
      metrics.leaksFound(leaks.length);
      fields.leaks = leaks.length;
      fields.orphans = stateCounts(orphans);
      return { leaks: leaks.map(leakMessage), orphans: hostStateMessage(orphans) };
    }),

    ReapLeaks: (call) => {
      void serve('reap-leaks', call, 'info', async ({ signal, fields }) => {
        const args = decodeReapRequest(call.request);
        fields.dryRun = args.dryRun;
        fields.batchSize = args.batchSize;
        const write = (message: ReapLeaksProgress) => {
          if (!call.cancelled) call.write(message);
        };
        if (args.dryRun) {
          const { leaks, orphans } = await currentLeaks(signal);
          leaksFound += leaks.length;
          metrics.leaksFound(leaks.length);
          leaks.forEach((leak, i) => {
            write({ step: { done: i + 1, total: leaks.length, allocId: leak.allocId } });
          });
          fields.leaks = leaks.length;
          write({
            summary: {
              reaped: leaks.map(leakMessage),
              orphans: hostStateMessage(orphans),
              failed: [],
            },
          });
          return;
        }
        const report = await gate.exclusive(() =>
          configurator.reapLeaks(
            runner.list().map((r) => r.allocId),
            {
              signal,
              batchSize: args.batchSize,
              onProgress: (p) => {
                write({ step: { done: p.done, total: p.total, allocId: p.allocId ?? '' } });
              },
            },
          ),
        );
        const found = report.reaped.length + report.failed.length;
        leaksFound += found;
        leaksReaped += report.reaped.length;
        metrics.leaksFound(found);
        metrics.leaksReaped(report.reaped.length);
        fields.reaped = report.reaped.length;
        fields.failed = report.failed.length;
        fields.orphans = stateCounts(report.orphans);
        write({
          summary: {
            reaped: report.reaped.map(leakMessage),
            orphans: hostStateMessage(report.orphans),
            failed: report.failed.map((f) => ({ allocId: f.allocId, error: f.error })),
          },
        });
      }).then((result) => {
        if (result.ok) call.end();
        else call.emit('error', result.error);
      });
    },

    ReloadConfig: unary('reload', 'info', async (request, { fields }) => {
      decodeEmptyRequest(request);
      const catalog = await deps.reload();
      fields.networks = catalog.networks.length;
      fields.invalidFiles = catalog.invalid.length;
      return catalogMessages(catalog);
    }),

    GetAgentInfo: unary('agent-info', 'debug', async (request, { signal }) => {
      decodeEmptyRequest(request);
      const stats = runner.stats();
      const catalog = catalogMessages(configurator.catalog());
      return {
        version: deps.info.version,
        plugins: await pluginInfos(signal),
        networks: catalog.networks,
        invalidFiles: catalog.invalidFiles,
        counts: {
          liveAllocations: stats.live,
          setups: stats.setups,
          teardowns: stats.teardowns,
          failures: stats.setupFailures + stats.teardownFailures,
          leaksFound: stats.leaksFound + leaksFound,
          leaksReaped: stats.leaksReaped + leaksReaped,
        },
        reconcileMode: deps.info.reconcileMode,
        dataDir: deps.info.dataDir,
        socketPath: deps.info.socketPath,
        startedAtUnixMs: deps.info.startedAtMs,
      };
    }),
  };

  return { alloc, operator, inFlight: () => running };
}
