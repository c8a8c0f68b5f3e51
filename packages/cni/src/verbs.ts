// What each verb does over the chain: ADD (and the undo of a failed one), CHECK, DEL, STATUS, GC,
// and the DEL that finishes a pending ADD. createCniRuntime (runtime.ts) is the facade over these.
//
// ADD-in-progress markers: ADD records its intent in the cache (`markAdding`) after the version is
// settled and before the first plugin gets its stdin, and clears it once the result is written,
// or once the DEL that undoes a failed ADD succeeded; DEL clears it too. A marker that survives
// (a crash, or an undo that failed) is a pending ADD: `pendingAdds` lists them and
// `undoPendingAdd` runs the DEL with the configuration and arguments the marker recorded.
//
// Nothing here locks, as in libcni: calls for one attachment must not overlap (the allocation
// runner never runs two operations on one allocation at once); calls for different attachments
// may run in parallel and share only the VERSION cache (negotiation.ts).
import { attachmentOf, checkAttachment, entryOf } from './attachment.js';
import type { Attachment, CheckedAttachment } from './attachment.js';
import type { CacheEntry, CniCache } from './cache.js';
import { parseNetworkConfigText } from './config.js';
import type { NetworkConfig } from './config.js';
import { CniError, isCniError } from './errors.js';
import { stdinFor } from './invoke.js';
import type { CallOptions, Invoker, Step } from './invoke.js';
import type { Logger } from './logger.js';
import type { Negotiation } from './negotiation.js';
import { parsedResult } from './plugin-output.js';
import { encodeResult, parseResult } from './result.js';
import type { CniResult } from './result.js';
import { atLeast } from './version.js';

export interface AddResult {
  /** The version the chain ran at. */
  readonly cniVersion: string;
  readonly result: CniResult;
  /** The result as JSON at `cniVersion`, as cached and as `allocnet cni add` prints it. */
  readonly json: Record<string, unknown>;
}

export interface GcReport {
  /** Cached attachments of the network that were not in the valid list, and were deleted. */
  readonly deleted: readonly { readonly containerId: string; readonly ifName: string }[];
  /** Every failure; GC goes on past each one. */
  readonly errors: readonly CniError[];
  /** False when the network has `disableGC`. */
  readonly ran: boolean;
}

/** What every verb works with: one runtime's cache, logger, plugin invoker and version negotiation. */
export interface VerbContext {
  readonly cache: CniCache;
  readonly logger: Logger;
  readonly invoker: Invoker;
  readonly negotiation: Negotiation;
}

/**
 * DEL over `steps` in reverse; stops at the first failure (the spec's rule) and throws it.
 * `prepare` (the version, the prevResult) runs while the first plugin's process starts.
 */
async function delChain(
  ctx: VerbContext,
  network: NetworkConfig,
  steps: readonly Step[],
  a: CheckedAttachment,
  call: CallOptions | undefined,
  prepare: () => Promise<{ cniVersion: string; prevResult: Record<string, unknown> | undefined }>,
): Promise<void> {
  const reversed = [...steps].reverse();
  let ready = { cniVersion: '', prevResult: undefined as Record<string, unknown> | undefined };
  await ctx.invoker.runChain(
    reversed,
    'DEL',
    ctx.invoker.env('DEL', a),
    a.containerId,
    call,
    (i) =>
      stdinFor((reversed[i] as Step).plugin, network, ready.cniVersion, {
        capabilityArgs: a.capabilityArgs,
        // prevResult on DEL came with spec 0.4.0.
        ...(ready.prevResult === undefined || !atLeast(ready.cniVersion, '0.4.0')
          ? {}
          : { prevResult: ready.prevResult }),
      }),
    undefined,
    async () => {
      ready = await prepare();
    },
  );
}

/** ADD over the chain in order; on a failure, DEL over the chain in reverse, then the error. */
export async function add(
  ctx: VerbContext,
  network: NetworkConfig,
  attachment: Attachment,
  call: CallOptions | undefined,
): Promise<AddResult> {
  const { cache, invoker, negotiation } = ctx;
  const a = checkAttachment(attachment, 'ADD');
  const steps = invoker.resolve(network);
  const environment = invoker.env('ADD', a);
  let cniVersion = '';
  let prev: CniResult | undefined;
  // Set once the first plugin gets its stdin: from then on a failure has something to undo.
  const state = { applying: false };
  try {
    await invoker.runChain(
      steps,
      'ADD',
      environment,
      a.containerId,
      call,
      (i) => {
        state.applying = true;
        return stdinFor((steps[i] as Step).plugin, network, cniVersion, {
          capabilityArgs: a.capabilityArgs,
          ...(prev === undefined ? {} : { prevResult: encodeResult(prev, cniVersion) }),
        });
      },
      (i, stdout) => {
        const type = (steps[i] as Step).plugin.type;
        prev = parsedResult(type, 'ADD', a.containerId, stdout, cniVersion);
        call?.onPluginResult?.(type, prev);
      },
      // While the first plugin's process starts: settle the version, then put the intent on
      // disk, before that plugin gets its stdin.
      async () => {
        cniVersion = await negotiation.version(network, steps, call);
        await cache.markAdding(entryOf(network, a));
      },
    );
    const result = prev ?? parseResult({}, cniVersion);
    const json = encodeResult(result, cniVersion);
    await cache.writeResult(entryOf(network, a, json));
    await cache.clearAdding(network.name, a.containerId, a.ifName);
    return { cniVersion, result, json };
  } catch (error) {
    // Nothing ran (the intent could not be recorded): nothing to undo.
    if (!state.applying) throw error;
    // Undo whatever the chain did, with the last result any plugin gave, whatever the
    // caller's signal says: a cancelled ADD must not stay half-applied.
    const partial = prev === undefined ? undefined : encodeResult(prev, cniVersion);
    try {
      await delChain(ctx, network, steps, a, undefined, () =>
        Promise.resolve({ cniVersion, prevResult: partial }),
      );
      await cache.clearAdding(network.name, a.containerId, a.ifName);
    } catch (undoError) {
      if (!isCniError(error)) throw error;
      const why = isCniError(undoError) ? undoError.message : String(undoError);
      throw new CniError(
        `${error.message}; and the DEL that undoes it failed too (the ADD stays pending): ${why}`,
        {
          code: error.code,
          ...(error.specCode === undefined ? {} : { specCode: error.specCode }),
          msg: error.msg,
          ...(error.details === undefined ? {} : { details: error.details }),
          ...(error.plugin === undefined ? {} : { plugin: error.plugin }),
          verb: 'ADD',
          containerId: a.containerId,
          network: network.name,
          cause: undoError,
        },
      );
    }
    throw error;
  }
}

/** CHECK in order with the cached result; a no-op when the network has `disableCheck`. */
export async function check(
  ctx: VerbContext,
  network: NetworkConfig,
  attachment: Attachment,
  call: CallOptions | undefined,
): Promise<{ readonly ran: boolean }> {
  const { cache, invoker, negotiation } = ctx;
  const a = checkAttachment(attachment, 'CHECK');
  if (network.disableCheck) return { ran: false };
  const steps = invoker.resolve(network);
  const cniVersion = await negotiation.version(network, steps, call);
  if (!atLeast(cniVersion, '0.4.0')) {
    const msg = `network ${JSON.stringify(network.name)} runs at ${cniVersion}; CHECK needs 0.4.0 or later`;
    throw new CniError(msg, {
      code: 'check-not-supported',
      msg,
      network: network.name,
      verb: 'CHECK',
    });
  }
  const cached = await cache.readResult(network.name, a.containerId, a.ifName);
  if (cached?.result === undefined) {
    const msg = `no cached ADD result for ${JSON.stringify(a.containerId)} (${a.ifName}) in network ${JSON.stringify(network.name)}; CHECK needs a completed ADD`;
    throw new CniError(msg, {
      code: 'not-added',
      msg,
      network: network.name,
      verb: 'CHECK',
      containerId: a.containerId,
    });
  }
  let prevResult: Record<string, unknown>;
  try {
    prevResult = encodeResult(parseResult(cached.result, cniVersion), cniVersion);
  } catch (error) {
    const msg = `the cached ADD result for ${JSON.stringify(a.containerId)} cannot be read: ${(error as Error).message}`;
    throw new CniError(msg, {
      code: 'cache',
      specCode: 5,
      msg,
      network: network.name,
      verb: 'CHECK',
      cause: error,
    });
  }
  await invoker.runChain(steps, 'CHECK', invoker.env('CHECK', a), a.containerId, call, (i) =>
    stdinFor((steps[i] as Step).plugin, network, cniVersion, {
      capabilityArgs: a.capabilityArgs,
      prevResult,
    }),
  );
  return { ran: true };
}

/** DEL in reverse with the cached result; goes on when the netns is gone. Removes the cache entry. */
export async function del(
  ctx: VerbContext,
  network: NetworkConfig,
  attachment: Attachment,
  call: CallOptions | undefined,
): Promise<void> {
  const { cache, invoker, negotiation, logger } = ctx;
  const a = checkAttachment(attachment, 'DEL');
  const steps = invoker.resolve(network);
  await delChain(ctx, network, steps, a, call, async () => {
    const cniVersion = await negotiation.version(network, steps, call);
    try {
      const cached = await cache.readResult(network.name, a.containerId, a.ifName);
      const prevResult =
        cached?.result === undefined
          ? undefined
          : encodeResult(parseResult(cached.result, cniVersion), cniVersion);
      return { cniVersion, prevResult };
    } catch (error) {
      // A cache entry that cannot be read must not block the DEL: go on without prevResult (as
      // libcni does) and remove the entry once the DEL succeeds.
      logger.warn('cni cache entry cannot be read; deleting without prevResult', {
        network: network.name,
        containerId: a.containerId,
        error: error instanceof Error ? error.message : String(error),
      });
      return { cniVersion, prevResult: undefined };
    }
  });
  await cache.removeResult(network.name, a.containerId, a.ifName);
  await cache.clearAdding(network.name, a.containerId, a.ifName);
}

/** Runs DEL for a pending ADD with the configuration and arguments it recorded. */
export async function undoPendingAdd(
  ctx: VerbContext,
  entry: CacheEntry,
  call: CallOptions | undefined,
): Promise<void> {
  const network = parseNetworkConfigText(
    entry.config,
    `pending ADD of ${entry.networkName}-${entry.containerId}-${entry.ifName}`,
  );
  await del(ctx, network, attachmentOf(entry), call);
}

/** STATUS in order (networks at 1.1.0 or later; others report `ran: false`). */
export async function status(
  ctx: VerbContext,
  network: NetworkConfig,
  call: CallOptions | undefined,
): Promise<{ readonly ran: boolean }> {
  const { invoker, negotiation } = ctx;
  const steps = invoker.resolve(network);
  const cniVersion = await negotiation.version(network, steps, call);
  if (!atLeast(cniVersion, '1.1.0')) return { ran: false };
  const environment = invoker.env('STATUS', { containerId: '', netns: '', ifName: '', args: [] });
  await invoker.runChain(steps, 'STATUS', environment, undefined, call, (i) =>
    stdinFor((steps[i] as Step).plugin, network, cniVersion, {}),
  );
  return { ran: true };
}

/** DELs cached attachments of the network not in `valid`, then GC on each plugin (1.1.0 or later). */
export async function gc(
  ctx: VerbContext,
  network: NetworkConfig,
  valid: readonly { readonly containerId: string; readonly ifName: string }[],
  call: CallOptions | undefined,
): Promise<GcReport> {
  const { cache, invoker, negotiation } = ctx;
  if (network.disableGC) return { deleted: [], errors: [], ran: false };
  const keep = new Set(valid.map((v) => `${v.containerId}\0${v.ifName}`));
  const errors: CniError[] = [];
  const deleted: { containerId: string; ifName: string }[] = [];
  const asError = (error: unknown): CniError => {
    if (isCniError(error)) return error;
    const msg = error instanceof Error ? error.message : String(error);
    return new CniError(msg, {
      code: 'plugin-error',
      msg,
      network: network.name,
      verb: 'GC',
      cause: error,
    });
  };
  for (const entry of await cache.listResults()) {
    if (entry.networkName !== network.name || keep.has(`${entry.containerId}\0${entry.ifName}`))
      continue;
    try {
      await del(ctx, network, attachmentOf(entry), call);
      deleted.push({ containerId: entry.containerId, ifName: entry.ifName });
    } catch (error) {
      errors.push(asError(error));
    }
  }
  try {
    const steps = invoker.resolve(network);
    const cniVersion = await negotiation.version(network, steps, call);
    if (atLeast(cniVersion, '1.1.0')) {
      const attachments = valid.map((v) => ({ containerID: v.containerId, ifname: v.ifName }));
      const environment = invoker.env('GC', { containerId: '', netns: '', ifName: '', args: [] });
      for (const step of steps) {
        // `cni.dev/attachments` is the name spec-v1.1.0 first gave the key; libcni sends both.
        const fields = {
          'cni.dev/valid-attachments': attachments,
          'cni.dev/attachments': attachments,
        };
        try {
          await invoker.run(
            step,
            'GC',
            stdinFor(step.plugin, network, cniVersion, { fields }),
            environment,
            undefined,
            call,
          );
        } catch (error) {
          errors.push(asError(error));
        }
      }
    }
  } catch (error) {
    errors.push(asError(error));
  }
  return { deleted, errors, ran: true };
}
