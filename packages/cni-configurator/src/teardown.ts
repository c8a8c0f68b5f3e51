// Teardown: DEL with what the ADD used, while the masquerade and DNAT chains go in one restore
// beside it (native-del.ts) and host-local's reservations right after bridge's DEL
// (native-release.ts), or, without an attachment, the whole chain's DEL with what the CNI
// runtime cached, after removing the firewall's rules for the addresses the allocation still
// holds (`sweepHeldAddresses`); then, always, the audit: whatever is still tagged with the
// allocation is swept (sweep.ts). Also the two other sweeps of one allocation: `forceCleanup`
// (operators) and `sweepAfterFailure` (setup.ts, after a failed setup).
//
// Concurrency: teardowns of different allocations run in parallel with each other and with
// setups, CHECKs and reaps; the runner never runs two operations on one allocation at once, so an
// allocation's DEL and audit never meet its own ADD. The audit takes no lock: other allocations'
// plugins change iptables under it, and `sweep` plans again when a restore fails because of that.
// Its cheap questions (probes.ts) read CNI-FORWARD through the shared chain reader, each read
// begun after the asking DEL ended. With `keepHolds` (restore's recreate, before a reclaim) the
// allocation's reservations become holds before the DEL and the audit leaves holds (holds.ts).
// The sweep before a DEL without an attachment needs no lock either: the
// addresses it removes rules for are reserved to the allocation until that DEL releases them.
import type { CacheEntry, NetworkConfig } from '@allocnet/cni';
import type { CallOptions, Family } from '@allocnet/iptables-node';
import { callOf, cniAttachment } from './context.js';
import type { ConfiguratorContext } from './context.js';
import { ConfiguratorError, invalidField, messageOf } from './errors.js';
import { keepAsHolds } from './holds.js';
import { listReservations, removeEmptyReservations } from './ipam.js';
import { linesAbout, linesFirewallAbout } from './marks.js';
import { nativeDel } from './native-del.js';
import { nativeRelease, releasingFirst } from './native-release.js';
import { EMPTY_PLAN, EMPTY_STATE, counts, isEmpty, joinStates } from './plan.js';
import { plan } from './planner.js';
import type { Selection } from './planner.js';
import { auditProbes, probeRunner } from './probes.js';
import { checkAllocId } from './spec.js';
import { scan, sweep } from './sweep.js';
import type { ScanOptions } from './sweep.js';
import type {
  AllocAttachment,
  AllocNetworking,
  CleanupReport,
  HostState,
  LeakSweeper,
  TeardownOptions,
  TeardownReport,
} from './types.js';

/** Sweeps one selection: what was removed (with `dryRun`, what would be); throws what stayed. */
async function sweepSelection(
  ctx: ConfiguratorContext,
  scanOptions: ScanOptions,
  selection: Selection,
  options: CallOptions & { readonly dryRun?: boolean },
): Promise<HostState> {
  const { removed, error } = await sweep(
    ctx,
    async () => plan(await scan(ctx, scanOptions), selection),
    options,
  );
  if (error !== undefined) throw error;
  return removed;
}

/** After a failed setup: whatever the attempts left tagged with the allocation goes. */
export async function sweepAfterFailure(
  ctx: ConfiguratorContext,
  allocId: string,
  network: NetworkConfig,
  addresses: readonly string[],
): Promise<void> {
  try {
    const removed = await sweepSelection(
      ctx,
      { fullIpam: [ctx.factsOf(network)], withCache: true },
      // Only this network's: the allocation's other attachments (set up before this one) stay.
      { allocIds: new Set([allocId]), network: network.name, networks: [network.name], addresses },
      {},
    );
    if (!isEmpty(removed))
      ctx.logger.warn('failed setup left state behind; removed it', {
        allocId,
        ...counts(removed),
      });
    const dir = ctx.factsOf(network).ipamDir;
    const empty = dir === undefined ? [] : await removeEmptyReservations(dir);
    if (empty.length > 0)
      ctx.logger.warn('removed reservations a killed host-local left empty', {
        allocId,
        network: network.name,
        addresses: empty,
      });
  } catch (error) {
    ctx.logger.warn('sweep after a failed setup failed', { allocId, error: messageOf(error) });
  }
}

/**
 * What the CNI runtime cached for an allocation: results (on the configurator's interface) and
 * ADD markers, in any network; with `only`, that network's on that interface alone.
 */
async function cachedAttachments(
  ctx: ConfiguratorContext,
  allocId: string,
  only: Only | undefined,
): Promise<CacheEntry[]> {
  const snapshot = await ctx.catalog.current();
  const names = only === undefined ? ctx.managedFacts(snapshot).map((f) => f.name) : [only.network];
  const ifName = only?.ifName ?? ctx.ifName;
  const results = await Promise.all(
    names.map(async (name) => {
      try {
        return await ctx.cache.readResult(name, allocId, ifName);
      } catch (error) {
        // An entry that cannot be read cannot drive a DEL; the audit removes the file.
        ctx.logger.warn('CNI cache entry cannot be read', {
          allocId,
          network: name,
          error: messageOf(error),
        });
        return undefined;
      }
    }),
  );
  const pending = (await ctx.runtime.pendingAdds()).filter(
    (e) =>
      e.containerId === allocId &&
      (only === undefined || (e.networkName === only.network && e.ifName === only.ifName)) &&
      !results.some((r) => r?.networkName === e.networkName),
  );
  return [...results.filter((r): r is CacheEntry => r !== undefined), ...pending];
}

/**
 * Before a DEL without an attachment. That DEL has no result to give the plugins (a pending ADD's
 * marker holds none), so the firewall plugin removes none of its accept rules, and the IPAM
 * plugin then releases the address that would find them: they carry no tag, and the audit would
 * not know them from anyone's. While a reservation still names the allocation, its address is
 * the allocation's alone (host-local gives no one a reserved address), so the accept rules for it
 * are the allocation's: removed here, before the DEL, with a scan that parses only them. An
 * address another network's host-local gave out too keeps one copy, as in any sweep. The
 * reservations themselves stay for the DEL to release. Resolves what went; throws what stayed.
 */
async function sweepHeldAddresses(
  ctx: ConfiguratorContext,
  allocId: string,
  only: Only | undefined,
  call: CallOptions,
): Promise<HostState> {
  const snapshot = await ctx.catalog.current();
  const managed = ctx
    .managedFacts(snapshot)
    .filter((f) => only === undefined || f.name === only.network);
  const { removed, error } = await sweep(
    ctx,
    async () => {
      const reservations = (
        await Promise.all(
          managed.flatMap((f) =>
            f.ipamDir === undefined ? [] : [listReservations(f.name, f.ipamDir)],
          ),
        )
      ).flat();
      const held = reservations.filter((r) => r.allocId === allocId).map((r) => r.address);
      if (held.length === 0) return EMPTY_PLAN;
      const found = await scan(ctx, {
        fullIpam: [],
        withCache: false,
        lines: linesFirewallAbout(held),
        ...call,
      });
      return plan(
        { ...found, reservations: reservations.filter((r) => r.allocId !== allocId) },
        {
          allocIds: new Set([allocId]),
          ...(only === undefined ? {} : { network: only.network }),
          networks: [],
          addresses: held,
        },
      );
    },
    call,
  );
  if (error !== undefined) throw error;
  return removed;
}

/** The audit after a DEL: the cheap questions when they can answer, else a sweep. */
async function audit(
  ctx: ConfiguratorContext,
  allocId: string,
  attachment: AllocAttachment | undefined,
  delFailed: boolean,
  probed: Promise<boolean | undefined>,
  call: CallOptions,
  keepHolds: boolean,
  only: Only | undefined,
): Promise<HostState> {
  const snapshot = await ctx.catalog.current();
  const own = attachment === undefined ? undefined : ctx.snapshotNetwork(attachment);
  const managed = ctx
    .managedFacts(snapshot, own === undefined ? [] : [own])
    .filter((f) => only === undefined || f.name === only.network);
  const ownFacts = own === undefined ? undefined : ctx.factsOf(own);
  const fast = ownFacts !== undefined && !delFailed;
  if (fast && (await probed) === false) return EMPTY_STATE;
  const names = managed.map((f) => f.name);
  const addresses = attachment?.addresses ?? [];
  return sweepSelection(
    ctx,
    {
      // A DEL that succeeded released the reservation and the cache entry; only the
      // allocation's own addresses need a look. Otherwise read everything.
      fullIpam: fast ? [] : ownFacts !== undefined ? [ownFacts] : managed,
      addressesIn: fast ? addresses.map((address) => ({ facts: ownFacts, address })) : [],
      withCache: !fast,
      keepHolds,
      // With every address known, only lines about this allocation need parsing: on a node
      // with many allocations, a few lines of the whole save.
      ...(fast ? { lines: linesAbout(allocId, names, addresses) } : {}),
      ...call,
    },
    {
      allocIds: new Set([allocId]),
      ...(only === undefined ? {} : { network: only.network }),
      networks: names,
      addresses,
    },
    call,
  );
}

/** A teardown's `only`, its network named as the catalog and the tags name it. */
type Only = { readonly network: string; readonly ifName: string };

/**
 * `TeardownOptions.only` with the default network's name for an empty one; checked against the
 * attachment when there is one (`invalid-argument` naming `only.network` or `only.ifName`).
 */
async function onlyOf(
  ctx: ConfiguratorContext,
  only: TeardownOptions['only'],
  attachment: AllocAttachment | undefined,
): Promise<Only | undefined> {
  if (only === undefined) return undefined;
  const network =
    only.network === '' ? (await ctx.catalog.current()).defaultNetwork.name : only.network;
  if (attachment !== undefined && attachment.network.name !== network)
    throw invalidField(
      ['only', 'network'],
      `is ${JSON.stringify(network)}, not the attachment's network ${JSON.stringify(attachment.network.name)}`,
    );
  if (attachment !== undefined && attachment.ifName !== only.ifName)
    throw invalidField(
      ['only', 'ifName'],
      `is ${JSON.stringify(only.ifName)}, not the attachment's interface ${JSON.stringify(attachment.ifName)}`,
    );
  return { network, ifName: only.ifName };
}

/** What the DEL part of a teardown did, for the audit after it. */
interface DelOutcome {
  readonly delRan: boolean;
  readonly delError: string | undefined;
  /** What went before the DEL (without an attachment: the firewall's rules). */
  readonly removedFirst: HostState;
  /** The audit's questions, some asked while the DEL still ran (auditProbes). */
  readonly probes: ReturnType<typeof probeRunner>;
  /** The chains removed beside the DEL, as `family:chain` (native-del.ts). */
  readonly nativeRemoved: Promise<ReadonlySet<string>>;
}

/**
 * No attachment (a crash during a setup or between ADD and the record, or an unknown
 * allocation): the firewall's rules for the addresses it still holds go first, then DEL from
 * what the CNI runtime cached for it, if anything, so the container side goes too.
 */
async function delFromCache(
  ctx: ConfiguratorContext,
  allocId: string,
  only: Only | undefined,
  call: CallOptions,
): Promise<DelOutcome> {
  let removedFirst: HostState;
  try {
    removedFirst = await sweepHeldAddresses(ctx, allocId, only, call);
  } catch (error) {
    throw new ConfiguratorError(
      `tearing down ${JSON.stringify(allocId)}: the firewall rules of its reserved addresses could not be removed: ${messageOf(error)}`,
      { code: 'teardown-failed', allocId, cause: error },
    );
  }
  let delRan = false;
  let delError: string | undefined;
  for (const entry of await cachedAttachments(ctx, allocId, only)) {
    delRan = true;
    try {
      await ctx.runtime.undoPendingAdd(entry, call);
    } catch (error) {
      delError ??= messageOf(error);
      ctx.logger.warn('DEL from the CNI cache failed; the audit removes what it left', {
        allocId,
        network: entry.networkName,
        error: messageOf(error),
      });
    }
  }
  return {
    delRan,
    delError,
    removedFirst,
    probes: probeRunner(undefined),
    nativeRemoved: Promise.resolve(new Set()),
  };
}

/**
 * DEL with what the ADD used, while the masquerade and DNAT chains go beside it and the firewall's
 * accepts before the addresses are released (native-del.ts), and the audit's questions are asked
 * as the plugins they are about exit.
 */
async function delAttachment(
  ctx: ConfiguratorContext,
  allocId: string,
  attachment: AllocAttachment,
  call: CallOptions,
  keepHolds: boolean,
): Promise<DelOutcome> {
  if (attachment.allocId !== allocId)
    throw invalidField(
      'attachment.allocId',
      `is ${JSON.stringify(attachment.allocId)}, not ${JSON.stringify(allocId)}`,
    );
  const network = ctx.snapshotNetwork(attachment);
  // Before the DEL, which would release them.
  if (keepHolds) await keepAsHolds(ctx, attachment);
  const native = nativeDel(ctx, network, attachment);
  const nativeRemoved: Promise<ReadonlySet<string>> =
    native?.remove(call) ?? Promise.resolve(new Set());
  const accepted: Promise<ReadonlySet<Family>> =
    native?.unaccept(call) ?? Promise.resolve(new Set());
  const probes = probeRunner(
    auditProbes(ctx, attachment, call, { chains: nativeRemoved, accepts: accepted }, keepHolds),
  );
  // Read now, with the holds made: a hold is not host-local's to release (native-release.ts).
  const own = await nativeRelease(ctx, network, attachment);
  // The accepts go before the addresses are released (native-del.ts): before the DEL when its
  // main plugin releases them, else beside it (docs/performance.md, "The accepts beside the DEL").
  if (own === undefined) await accepted;
  const reduced = native?.network ?? network;
  const done = releasingFirst(own, probes.pluginDone, accepted);
  let delError: string | undefined;
  try {
    await ctx.runtime.del(own?.reduce(reduced) ?? reduced, cniAttachment(attachment), {
      ...call,
      onPluginDone: done.pluginDone,
    });
  } catch (error) {
    delError = messageOf(error);
    ctx.logger.warn('DEL failed; the audit removes what it left', { allocId, error: delError });
  }
  await done.released();
  // Also when the DEL failed before the release: the audit reads what the removal left.
  await accepted;
  return { delRan: true, delError, removedFirst: EMPTY_STATE, probes, nativeRemoved };
}

async function teardown(
  ctx: ConfiguratorContext,
  allocIdInput: string,
  attachment: AllocAttachment | undefined,
  opts: TeardownOptions | undefined,
): Promise<TeardownReport> {
  const allocId = checkAllocId(allocIdInput);
  const call = callOf(opts);
  const keepHolds = opts?.keepHolds === true && attachment !== undefined;
  const only = await onlyOf(ctx, opts?.only, attachment);
  const { delRan, delError, removedFirst, probes, nativeRemoved } =
    attachment === undefined
      ? await delFromCache(ctx, allocId, only, call)
      : await delAttachment(ctx, allocId, attachment, call, keepHolds);
  // The audit reads what is left only once those chains' restore is done.
  await nativeRemoved;
  let removed: HostState;
  try {
    const probed = delError === undefined ? probes.answer() : Promise.resolve(undefined);
    removed = joinStates(
      removedFirst,
      await audit(ctx, allocId, attachment, delError !== undefined, probed, call, keepHolds, only),
    );
  } catch (error) {
    throw new ConfiguratorError(
      `tearing down ${JSON.stringify(allocId)}: state tagged with it could not be removed: ${messageOf(error)}`,
      { code: 'teardown-failed', allocId, cause: error },
    );
  }
  if (!isEmpty(removed))
    ctx.logger.warn('teardown audit removed state the DEL left', {
      allocId,
      delError,
      ...counts(removed),
    });
  return { allocId, delRan, delError, removed };
}

/** The audit's sweep without a DEL, for operators. */
async function forceCleanup(
  ctx: ConfiguratorContext,
  allocIdInput: string,
  opts: Parameters<LeakSweeper['forceCleanup']>[1],
): Promise<CleanupReport> {
  const allocId = checkAllocId(allocIdInput);
  const network = opts?.network === undefined || opts.network === '' ? undefined : opts.network;
  const call = callOf(opts);
  const snapshot = await ctx.catalog.current();
  const managed = ctx.managedFacts(snapshot);
  const dryRun = opts?.dryRun ?? false;
  try {
    const removed = await sweepSelection(
      ctx,
      {
        fullIpam: network === undefined ? managed : managed.filter((f) => f.name === network),
        withCache: true,
        ...call,
      },
      {
        allocIds: new Set([allocId]),
        ...(network === undefined ? {} : { network }),
        networks: managed.map((f) => f.name),
        addresses: [],
      },
      { ...call, dryRun },
    );
    return { allocId, dryRun, removed };
  } catch (error) {
    throw new ConfiguratorError(`cleaning up ${JSON.stringify(allocId)}: ${messageOf(error)}`, {
      code: 'cleanup-failed',
      allocId,
      cause: error,
    });
  }
}

export function createTeardown(
  ctx: ConfiguratorContext,
): Pick<AllocNetworking, 'teardown'> & Pick<LeakSweeper, 'forceCleanup'> {
  return {
    teardown: (allocId, attachment, opts) => teardown(ctx, allocId, attachment, opts),
    forceCleanup: (allocId, opts) => forceCleanup(ctx, allocId, opts),
  };
}
