// What the CNI server does with each verb, through the same runner as a gRPC setup (records,
// retry, gates, rollback, the teardown audit): ADD is a setup of the attachment's allocation in
// the runtime's namespace, answered with the stored result in the request's cniVersion; DEL a
// teardown (idempotent: an unknown attachment still gets the sweep); CHECK the runner's CHECK;
// STATUS and GC as in spec 1.1. Failures become the spec's error object (cni-server.ts sends it):
// table in docs/cni-plugin.md.
import { formatPath, invalidInputOf, kindOf, messageOf, renderProblem } from '@allocnet/base';
import type { ErrorKind } from '@allocnet/base';
import { decodeSpec } from '@allocnet/alloc-runner';
import type { AllocRecord, AllocRunner, RunnerSpec } from '@allocnet/alloc-runner';
import { RESULT_VERSIONS, SPEC_VERSION, encodeResult } from '@allocnet/cni';
import { portMappings } from '@allocnet/cni-configurator';
import type { NetworkCatalog } from '@allocnet/cni-configurator';
import { CniFault, attachmentAllocId, badField, requestFieldOf, specOfAdd } from './cni-request.js';
import type { CniCall } from './cni-request.js';
import type { ReapGate } from './gate.js';
import type { AgentLogger } from './logging.js';
import { DEFAULT_LIMITS } from './requests.js';
import type { AllocLimits } from './requests.js';

/** An answer: the HTTP status and the JSON body (undefined: empty). */
export interface CniAnswer {
  readonly status: number;
  readonly body: Record<string, unknown> | undefined;
}

/** allocnet's own CNI error codes (the spec leaves 100 and up to plugins). */
export const CNI_CODES = {
  incompatibleVersion: 1,
  invalidConfig: 4,
  invalidEnv: 7,
  tryAgainLater: 11,
  notReady: 50,
  /** The attachment is already set up with a different request (another netns, other ports). */
  conflict: 100,
  /** CHECK of an attachment allocnet does not have. */
  notFound: 101,
  /** CHECK found the attachment not as it was set up. */
  broken: 102,
  internal: 999,
} as const;

const KIND_CODE: Readonly<Record<ErrorKind, number>> = {
  invalid: CNI_CODES.invalidConfig,
  'not-found': CNI_CODES.notFound,
  conflict: CNI_CODES.conflict,
  unavailable: CNI_CODES.tryAgainLater,
  aborted: CNI_CODES.tryAgainLater,
  broken: CNI_CODES.broken,
  // The data dir is full: the same call works once space is freed (the runtime retries).
  exhausted: CNI_CODES.tryAgainLater,
  internal: CNI_CODES.internal,
};

const CODE_STATUS: Readonly<Record<number, number>> = {
  1: 400,
  4: 400,
  7: 400,
  11: 503,
  100: 409,
  101: 404,
};

/** The spec's error object for a fault, in the request's version. */
export function faultAnswer(fault: CniFault, cniVersion: string | undefined): CniAnswer {
  return {
    status: CODE_STATUS[fault.cniCode] ?? 500,
    body: {
      cniVersion: cniVersion ?? SPEC_VERSION,
      code: fault.cniCode,
      msg: fault.message,
      ...(fault.details === undefined ? {} : { details: fault.details }),
    },
  };
}

/** Any failure of a verb as a fault: bad input names the request's field, the rest by kind. */
export function faultOf(error: unknown, call: CniCall): CniFault {
  if (error instanceof CniFault) return error;
  const bad = invalidInputOf(error);
  if (bad !== undefined) {
    const path = requestFieldOf(bad.path, call);
    // The usual cause: the agent in another mount namespace than the runtime's (its netns
    // bind mounts are invisible then).
    const hint =
      path[1] === 'CNI_NETNS'
        ? " (the agent opens CNI_NETNS in its own mount namespace: it must run in the runtime's; docs/cni-plugin.md)"
        : '';
    return new CniFault(
      path[0] === 'env' ? CNI_CODES.invalidEnv : CNI_CODES.invalidConfig,
      `${formatPath(path)} ${renderProblem(bad.problem)}${hint}`,
      { path, details: messageOf(error) },
    );
  }
  const kind = kindOf(error) ?? 'internal';
  return new CniFault(KIND_CODE[kind], messageOf(error), {});
}

export interface CniHandlerOptions {
  readonly runner: AllocRunner;
  readonly catalog: () => NetworkCatalog;
  /** Re-reads the conf dir: a network just added may not be in the catalog yet. */
  readonly reload: () => Promise<NetworkCatalog>;
  readonly ignoreHostIps: boolean;
  /** The agent's caps (config `limits`), as over gRPC. Default `DEFAULT_LIMITS`. */
  readonly limits?: AllocLimits;
  readonly logger: AgentLogger;
  /**
   * The agent's reap gate, shared with the gRPC setups: an ADD runs under its shared side, so a
   * ReapLeaks (its exclusive side) never reaps the fresh state of an ADD it did not know about.
   */
  readonly gate: ReapGate;
}

export interface CniHandler {
  /** Runs one decoded call; throws what `faultOf` turns into the answer. */
  handle(call: CniCall, signal: AbortSignal): Promise<CniAnswer>;
}

const EMPTY: CniAnswer = { status: 200, body: undefined };

/** The network a record's attachment runs, resolved (the default network by its name). */
function networkOf(rec: AllocRecord, defaultName: string): string {
  return rec.attachment?.network.name ?? rec.spec.network ?? defaultName;
}

export function createCniHandler(options: CniHandlerOptions): CniHandler {
  const { runner, logger } = options;
  const defaultNetwork = () =>
    options.catalog().networks.find((n) => n.source === 'default')?.name ?? 'nomad';

  /**
   * What the configurator would find only after the intent is recorded: an unknown delegate,
   * two mappings on one host port. Checked first, so that a bad request changes nothing.
   */
  async function precheck(spec: RunnerSpec): Promise<void> {
    portMappings(spec, options.ignoreHostIps);
    const wanted = spec.network;
    if (wanted === undefined) return;
    const known = (c: NetworkCatalog) => c.networks.some((n) => n.name === wanted);
    let catalog = options.catalog();
    if (!known(catalog)) catalog = await options.reload();
    if (!known(catalog))
      throw badField(
        ['config', 'delegate'],
        `${JSON.stringify(wanted)} is not an allocnet network (networks: ${catalog.networks.map((n) => JSON.stringify(n.name)).join(', ')})`,
      );
  }

  async function add(call: CniCall, signal: AbortSignal): Promise<CniAnswer> {
    // The runner's decoder with the agent's limits, as a gRPC setup: more mappings than
    // `limits.maxPorts` is code 4 naming config.runtimeConfig.portMappings, more CNI_ARGS than
    // `limits.maxCniArgs` code 7 naming env.CNI_ARGS (faultOf).
    const spec = decodeSpec(specOfAdd(call), options.limits ?? DEFAULT_LIMITS);
    await precheck(spec);
    const result = await options.gate.shared(async () => {
      await runner.setup(spec, { signal });
      return runner.get(spec.allocId)?.attachment?.result;
    });
    if (result === undefined)
      throw new CniFault(
        CNI_CODES.conflict,
        `allocation ${JSON.stringify(spec.allocId)} was set up without a CNI result (over gRPC, or by an older agent); tear it down first`,
        {},
      );
    return { status: 200, body: encodeResult(result, call.cniVersion) };
  }

  async function del(call: CniCall, signal: AbortSignal): Promise<CniAnswer> {
    const allocId = attachmentAllocId(call.containerId, call.ifName);
    const report = await runner.teardown(allocId, { signal });
    if (report.report.delError !== undefined)
      logger.warn('the delegate DEL failed; the audit removed what it left', {
        allocId,
        containerId: call.containerId,
        error: report.report.delError,
      });
    return EMPTY;
  }

  async function check(call: CniCall, signal: AbortSignal): Promise<CniAnswer> {
    await runner.check(attachmentAllocId(call.containerId, call.ifName), { signal });
    return EMPTY;
  }

  /**
   * GC: every attachment of the delegate network made through this server and not in the
   * runtime's valid list is torn down; then leaks tagged with that network are reaped.
   */
  async function gc(call: CniCall, signal: AbortSignal): Promise<CniAnswer> {
    const network = call.delegate ?? defaultNetwork();
    const valid = new Set(
      call.validAttachments.map((a) => attachmentAllocId(a.containerId, a.ifName)),
    );
    const stale = runner
      .list()
      .filter(
        (r) =>
          r.spec.origin !== undefined &&
          networkOf(r, defaultNetwork()) === network &&
          !valid.has(r.allocId),
      );
    const leaks = (await runner.findLeaks({ signal })).leaks.filter(
      (l) => l.networks.includes(network) && !valid.has(l.allocId),
    );
    const ids = [...new Set([...stale.map((r) => r.allocId), ...leaks.map((l) => l.allocId)])];
    const failed: string[] = [];
    for (const allocId of ids) {
      try {
        await runner.teardown(allocId, { signal });
      } catch (error) {
        failed.push(`${allocId}: ${messageOf(error)}`);
      }
    }
    logger.info('CNI GC', {
      network,
      kept: valid.size,
      removed: stale.length,
      leaksReaped: leaks.length,
      failed: failed.length,
    });
    if (failed.length > 0)
      throw new CniFault(
        CNI_CODES.internal,
        `GC of network ${JSON.stringify(network)} could not remove ${failed.length} of ${ids.length} attachments`,
        { details: failed.join('; ') },
      );
    return EMPTY;
  }

  return {
    async handle(call, signal) {
      switch (call.command) {
        case 'ADD':
          return add(call, signal);
        case 'DEL':
          return del(call, signal);
        case 'CHECK':
          return check(call, signal);
        case 'GC':
          return gc(call, signal);
        case 'STATUS':
          // Asked only once the server is ready (cni-server.ts answers 50 before).
          return EMPTY;
        case 'VERSION':
          return {
            status: 200,
            body: { cniVersion: call.cniVersion, supportedVersions: [...RESULT_VERSIONS] },
          };
      }
    },
  };
}
