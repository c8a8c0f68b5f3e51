// ADD with Nomad's retry, for setup.ts: one attempt (`attemptAdd`: the ADD, and the masquerade,
// firewall and portmap rules written beside it, native-add.ts) and a plain loop around it (`addWithRetry`), with a DEL and
// a wait between attempts; and the error a failed setup becomes (`setupFailure`).
//
// The runner never runs two operations on one allocation at once, so an allocation's ADDs and
// the DELs between them never overlap.
import { kindOf } from '@allocnet/base';
import { isCniError } from '@allocnet/cni';
import type { Attachment, CniResult, NetworkConfig } from '@allocnet/cni';
import type { ConfiguratorContext } from './context.js';
import { ConfiguratorError, isConfiguratorError, messageOf } from './errors.js';
import { nativeAdd, pickedResult } from './native-add.js';
import type { Heal, NativeAdd } from './native-add.js';
import type { AddressPick } from './native-pick.js';

type Call = { signal?: AbortSignal };

/** CNI error codes that another attempt cannot fix. */
const FINAL_CNI_CODES = new Set([
  'invalid-argument',
  'invalid-config',
  'network-not-found',
  'plugin-not-found',
  'no-common-version',
  'incompatible-version',
  'invalid-network-config',
  'decode-failure',
  'unsupported-field',
  'spawn',
  'aborted',
]);

/** A failed setup as the caller sees it: the first error, with what was being done and how often. */
export function setupFailure(
  error: unknown,
  context: { allocId: string; network: string; attempts: number },
): ConfiguratorError {
  if (isConfiguratorError(error)) return error;
  const where = `setting up ${JSON.stringify(context.allocId)} in network ${JSON.stringify(context.network)}`;
  // The CNI runtime's and iptables' own kinds; an AbortSignal's reason is a DOMException.
  const aborted =
    kindOf(error) === 'aborted' || (error instanceof Error && error.name === 'AbortError');
  const unavailable = kindOf(error) === 'unavailable';
  const tries =
    context.attempts === 0
      ? 'before the first ADD (host prerequisites)'
      : `after ${context.attempts} attempt${context.attempts === 1 ? '' : 's'}`;
  return new ConfiguratorError(
    aborted
      ? `${where} was cancelled: ${messageOf(error)}`
      : `${where} failed ${tries}: ${messageOf(error)}`,
    {
      code: aborted ? 'aborted' : unavailable ? 'unavailable' : 'setup-failed',
      allocId: context.allocId,
      network: context.network,
      attempts: context.attempts,
      cause: error,
    },
  );
}

/** How one attempt ended: the result, or the error and whether another attempt could fix it. */
type Attempt =
  | { readonly ok: true; readonly result: CniResult }
  | { readonly ok: false; readonly error: unknown; readonly final: boolean };

/**
 * One ADD. With `native`, its rules are written beside the chain: from the start when the setup
 * picked the addresses (`pick`: the result will carry them) and `early` allows, else once the main
 * plugin answered; portmap's work besides iptables (route_localnet, stale UDP flows) after that
 * answer. Rules written for picked addresses that the answer does not carry are removed and written
 * for the answer's. What was written goes with the attempt (the chain's undo runs without those
 * plugins). A failed write undoes the whole ADD and is final: another attempt would write the same
 * rules the same way. Throws only when removing a failed attempt's rules fails.
 */
async function attemptAdd(
  ctx: ConfiguratorContext,
  network: NetworkConfig,
  native: NativeAdd | undefined,
  attachment: Attachment,
  call: Call,
  pick: AddressPick | undefined,
  early: boolean,
): Promise<Attempt> {
  const { runtime, logger } = ctx;
  const allocId = attachment.containerId;
  const chain = native?.network ?? network;
  const picked = pick?.(chain);
  // The rules written (or being written), and for which result.
  let told: CniResult | undefined;
  let writing: Promise<void> | undefined;
  const begin = (result: CniResult, after?: Promise<void>) => {
    told = result;
    writing = (after ?? Promise.resolve()).then(() => native?.rules(result, call));
    // Awaited below; a failure must not count as unhandled meanwhile.
    writing.catch(() => undefined);
  };
  /** The answer's addresses once no other attempt holds them (`AddressPicks.free`). */
  const freed = (result: CniResult) =>
    ctx.picks.free(
      result.ips.map((ip) => ip.address.split('/')[0] ?? ''),
      picked?.holder,
    );
  if (native !== undefined && picked !== undefined && early)
    begin(pickedResult(picked.addresses, attachment));
  let answered = false;
  const onPluginResult = (type: string, result: CniResult) => {
    if (native === undefined || type !== native.mainType || answered) return;
    answered = true;
    if (told === undefined || writing === undefined) begin(result, freed(result));
    else if (!native.sameRules(told, result)) {
      const stale = told;
      logger.warn('the main plugin gave other addresses than picked; writing the rules again', {
        allocId,
        picked: stale.ips.map((ip) => ip.address),
        given: result.ips.map((ip) => ip.address),
      });
      // Its picks go once their rules are gone, before it waits for others' (two setups given
      // each other's picks would otherwise wait for each other).
      const unwritten = writing
        .catch(() => undefined)
        .then(() => native.unwrite(stale, call))
        .finally(() => picked?.done());
      begin(
        result,
        unwritten.then(() => freed(result)),
      );
    }
    const rules = writing as Promise<void>;
    writing = rules.then(() => native.host(result, call));
    writing.catch(() => undefined);
  };
  const unwrite = async () => {
    if (writing === undefined || told === undefined) return;
    // Its failure was (or is being) reported by the attempt; here only its end matters.
    await writing.catch(() => undefined);
    await native?.unwrite(told, call);
  };

  // The picked addresses stay taken until the attempt's rules for them are in or removed: rules
  // for one written early while host-local never reserved it (a failed ADD, another address
  // given) would otherwise still be there when another setup picks it, which would then find its
  // own rules present and not write them, and lose them to this removal.
  try {
    let result: CniResult;
    try {
      ({ result } = await runtime.add(picked?.network ?? chain, attachment, {
        ...call,
        onPluginResult,
      }));
    } catch (error) {
      await unwrite();
      const final =
        !isCniError(error) || FINAL_CNI_CODES.has(error.code) || call.signal?.aborted === true;
      return { ok: false, error, final };
    }
    try {
      await writing;
    } catch (error) {
      // The chain stands without its rules: undo it all.
      logger.warn('writing the allocation’s rules failed; undoing the ADD', {
        allocId,
        error: messageOf(error),
      });
      try {
        await runtime.del(network, attachment, call);
      } catch (delError) {
        logger.warn('DEL after writing the rules failed failed too', {
          allocId,
          error: messageOf(delError),
        });
      }
      await unwrite();
      return { ok: false, error, final: true };
    }
    return { ok: true, result };
  } finally {
    picked?.done();
  }
}

/** Between two attempts: a DEL, so that a half-done attempt leaves nothing, then the wait. */
async function betweenAttempts(
  ctx: ConfiguratorContext,
  network: NetworkConfig,
  attachment: Attachment,
  call: Call,
  attempt: number,
  error: unknown,
): Promise<void> {
  const { runtime, logger } = ctx;
  const { delayMs, jitterMs, random, sleep } = ctx.retry;
  logger.warn('setup attempt failed; retrying', {
    allocId: attachment.containerId,
    network: network.name,
    attempt,
    error: messageOf(error),
  });
  try {
    await runtime.del(network, attachment, call);
  } catch (delError) {
    logger.warn('DEL between setup attempts failed', {
      allocId: attachment.containerId,
      error: messageOf(delError),
    });
  }
  await sleep(delayMs + Math.floor(random() * jitterMs), call.signal);
}

/**
 * ADD with Nomad's retry: up to `retry.attemptsMax` attempts, 1 s + 0–999 ms apart (by default;
 * `retry.random` draws the jitter, `retry.sleep` waits) with a DEL between them. Stops at an
 * error another attempt cannot fix, at the last attempt, or when the signal fires (also after a
 * successful ADD). Throws `setupFailure` of the first attempt's error (of the abort when no
 * attempt failed), counting the attempts begun.
 */
export async function addWithRetry(
  ctx: ConfiguratorContext,
  network: NetworkConfig,
  attachment: Attachment,
  call: Call,
  /** Makes missing shared chains and rules again when a write finds one gone (native-add.ts). */
  heal?: Heal,
  /** The addresses host-local is asked for, picked anew for each attempt (native-pick.ts). */
  pick?: AddressPick,
  /**
   * Whether the rules for picked addresses may be written from the ADD's start: the bridge is
   * there already (a setup made it), so the node routes their subnet to it meanwhile, not out
   * its default route.
   */
  early = false,
): Promise<{ result: CniResult; attempts: number }> {
  // Written beside the chain (native-add.ts): with the ADD when the address was picked and the
  // bridge is up, else once the main plugin answered.
  const native = nativeAdd(ctx, network, attachment, heal);
  let attempts = 0;
  let first: unknown;
  try {
    for (;;) {
      call.signal?.throwIfAborted();
      attempts++;
      const outcome = await attemptAdd(ctx, network, native, attachment, call, pick, early).catch(
        // Removing a failed attempt's rules failed: a failed attempt like any other; the
        // next attempt's DEL, or the sweep after the setup failed, comes after it.
        (error: unknown): Attempt => ({ ok: false, error, final: false }),
      );
      if (outcome.ok) {
        call.signal?.throwIfAborted();
        return { result: outcome.result, attempts };
      }
      first ??= outcome.error;
      if (outcome.final || attempts >= ctx.retry.attemptsMax) throw outcome.error;
      await betweenAttempts(ctx, network, attachment, call, attempts, outcome.error);
    }
  } catch (error) {
    throw setupFailure(first ?? error, {
      allocId: attachment.containerId,
      network: network.name,
      attempts,
    });
  }
}
