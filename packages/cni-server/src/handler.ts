// What the CNI server does with each verb, through the same runner as a gRPC setup (records,
// retry, gates, rollback, the teardown audit, and the runner's own guard against a leak reap
// that started before it): ADD is a setup of the attachment's allocation in the runtime's
// namespace (every network of the conflist's `delegates`, all or nothing: the runner's setup of
// its attachments), answered with the stored result in the request's cniVersion; DEL a teardown
// (idempotent: an unknown attachment still gets the sweep; the runner tears down every
// attachment); CHECK the runner's CHECK (of every attachment); STATUS and GC as in spec 1.1.
// Failures are thrown as they come; the server answers them (answer.ts).
import { messageOf } from '@allocnet/base';
import { decodeSpec } from '@allocnet/alloc-runner';
import type { AllocRecord, AllocRunner } from '@allocnet/alloc-runner';
import { RESULT_VERSIONS, encodeResult } from '@allocnet/cni';
import { DEFAULT_NETWORK_NAME, portMappings } from '@allocnet/cni-configurator';
import type { NetworkCatalog } from '@allocnet/cni-configurator';
import { cniResultOf } from './answer.js';
import type { CniAnswer } from './answer.js';
import { CniFault, badField } from './errors.js';
import { attachmentAllocId, specOfAdd } from './add-spec.js';
import type { CniCall } from './request.js';
import type { CniLogger } from './seams.js';

/** The runner's members the CNI door uses. */
export type CniRunner = Pick<
  AllocRunner,
  'setup' | 'get' | 'check' | 'teardown' | 'list' | 'findLeaks'
>;

/** The caps on one allocation (the agent's config `limits`), as `decodeSpec` takes them. */
export type CniLimits = NonNullable<Parameters<typeof decodeSpec>[1]>;

export interface CniHandlerOptions {
  readonly runner: CniRunner;
  readonly catalog: () => NetworkCatalog;
  /** Re-reads the conf dir: a network just added may not be in the catalog yet. */
  readonly reload: () => Promise<NetworkCatalog>;
  readonly ignoreHostIps: boolean;
  /** The caps a gRPC setup has too (the agent's config `limits`). */
  readonly limits: CniLimits;
  readonly logger: CniLogger;
}

export interface CniHandler {
  /** Runs one decoded call; throws what `faultOf` turns into the answer. */
  handle(call: CniCall, signal: AbortSignal): Promise<CniAnswer>;
}

const EMPTY: CniAnswer = { status: 200, body: undefined };

/** The default network's name: the catalog's embedded network (the configurator always has it). */
function defaultNetworkOf(catalog: NetworkCatalog): string {
  return catalog.networks.find((n) => n.source === 'default')?.name ?? DEFAULT_NETWORK_NAME;
}

/**
 * The networks a record's ADD asked for, in order, resolved (the default network by its name):
 * what a conflist's delegates make. Read off its spec, not its attachments now: a failed record
 * has none left, a detached secondary is gone from `extra`, an AttachNetwork added one; none of
 * these makes the allocation another conflist's.
 */
function networksOf(rec: AllocRecord, defaultName: string): string[] {
  const named = rec.spec.attachments ?? [];
  const asked = named.length > 0 ? named.map((a) => a.network) : [rec.spec.network];
  return asked.map((n) => (n === undefined || n === '' ? defaultName : n));
}

/** The conflist's networks: `delegates`, or the one `delegate` (the default when absent). */
function callNetworks(call: CniCall, defaultName: string): string[] {
  return call.delegates.length > 0 ? [...call.delegates] : [call.delegate ?? defaultName];
}

/**
 * The conflist's networks the agent does not know (after a reload of the conf dir: a network just
 * added may not be in the catalog yet) are refused naming the first (`config.delegate`, or
 * `config.delegates[1]`): checked before anything else, so that a bad request changes nothing.
 */
async function checkDelegates(options: CniHandlerOptions, call: CniCall): Promise<void> {
  const wanted =
    call.delegates.length > 0
      ? call.delegates.map((name, k) => ({ name, at: ['config', 'delegates', k] }))
      : call.delegate === undefined
        ? []
        : [{ name: call.delegate, at: ['config', 'delegate'] }];
  const unknown = (c: NetworkCatalog) =>
    wanted.find((w) => !c.networks.some((n) => n.name === w.name));
  let catalog = options.catalog();
  if (unknown(catalog) !== undefined) catalog = await options.reload();
  const missing = unknown(catalog);
  if (missing !== undefined)
    throw badField(
      missing.at,
      `${JSON.stringify(missing.name)} is not an allocnet network (networks: ${catalog.networks.map((n) => JSON.stringify(n.name)).join(', ')})`,
    );
}

async function add(
  options: CniHandlerOptions,
  call: CniCall,
  signal: AbortSignal,
): Promise<CniAnswer> {
  const { runner } = options;
  await checkDelegates(options, call);
  // The runner's decoder with the agent's limits, as a gRPC setup: more mappings than
  // `limits.maxPorts` is code 4 naming config.runtimeConfig.portMappings, more CNI_ARGS than
  // `limits.maxCniArgs` code 7 naming env.CNI_ARGS (faultOf).
  const spec = decodeSpec(specOfAdd(call), options.limits);
  // Two mappings on one host port: what the configurator would find only after the intent.
  portMappings(spec, options.ignoreHostIps);
  await runner.setup(spec, { signal });
  const rec = runner.get(spec.allocId);
  const result = rec === undefined ? undefined : cniResultOf(rec);
  if (result === undefined)
    throw new CniFault(
      `allocation ${JSON.stringify(spec.allocId)} was set up without a CNI result (over gRPC, or by an older agent); tear it down first`,
      { code: 'no-cni-result' },
    );
  return { status: 200, body: encodeResult(result, call.cniVersion) };
}

async function del(
  options: CniHandlerOptions,
  call: CniCall,
  signal: AbortSignal,
): Promise<CniAnswer> {
  const allocId = attachmentAllocId(call.containerId, call.ifName);
  const report = await options.runner.teardown(allocId, { signal });
  if (report.report.delError !== undefined)
    options.logger.warn('the delegate DEL failed; the audit removed what it left', {
      allocId,
      containerId: call.containerId,
      error: report.report.delError,
    });
  return EMPTY;
}

/**
 * GC: every allocation made through this server by this conflist (its ADD's attachments are the
 * conflist's networks, in order) and not in the runtime's valid list is torn down, with every
 * attachment; then leaks tagged with any of those networks are reaped. The log counts what was
 * torn down; what failed is counted apart and fails the GC.
 */
async function gc(
  options: CniHandlerOptions,
  call: CniCall,
  signal: AbortSignal,
): Promise<CniAnswer> {
  const { runner } = options;
  const defaultName = defaultNetworkOf(options.catalog());
  const networks = callNetworks(call, defaultName);
  const network = networks.join(',');
  const valid = new Set(
    call.validAttachments.map((a) => attachmentAllocId(a.containerId, a.ifName)),
  );
  const stale = runner
    .list()
    .filter(
      (r) =>
        r.spec.origin !== undefined &&
        networksOf(r, defaultName).join(',') === network &&
        !valid.has(r.allocId),
    )
    .map((r) => r.allocId);
  const leaks = (await runner.findLeaks({ signal })).leaks
    .filter((l) => l.networks.some((n) => networks.includes(n)) && !valid.has(l.allocId))
    .map((l) => l.allocId);
  const ids = [...new Set([...stale, ...leaks])];
  const failed = new Map<string, string>();
  for (const allocId of ids) {
    try {
      await runner.teardown(allocId, { signal });
    } catch (error) {
      failed.set(allocId, messageOf(error));
    }
  }
  options.logger.info('CNI GC', {
    network,
    kept: valid.size,
    removed: stale.filter((id) => !failed.has(id)).length,
    leaksReaped: leaks.filter((id) => !failed.has(id)).length,
    failed: failed.size,
  });
  if (failed.size > 0)
    throw new CniFault(
      `GC of network ${JSON.stringify(network)} could not remove ${failed.size} of ${ids.length} attachments`,
      {
        code: 'gc-incomplete',
        details: [...failed].map(([id, error]) => `${id}: ${error}`).join('; '),
      },
    );
  return EMPTY;
}

export function createCniHandler(options: CniHandlerOptions): CniHandler {
  return {
    async handle(call, signal) {
      switch (call.command) {
        case 'ADD':
          return add(options, call, signal);
        case 'DEL':
          return del(options, call, signal);
        case 'CHECK':
          await options.runner.check(attachmentAllocId(call.containerId, call.ifName), { signal });
          return EMPTY;
        case 'GC':
          return gc(options, call, signal);
        case 'STATUS':
          // Asked only once the server is ready (server.ts answers 50 before).
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
