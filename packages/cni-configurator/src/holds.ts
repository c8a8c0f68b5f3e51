// Holds and reclaims: how a restored allocation gets back exactly the addresses it had, with
// host-local's reservations gone (a reboot empties its data dir, a tmpfs by default).
//
// - `holdAddresses` (the runner calls it at start, before it admits any setup): for every
//   recorded address of a network that uses host-local, a hold file (ipam.ts) where no
//   reservation is; an address reserved by someone else is reported lost.
// - `keepAsHolds` (a teardown with `keepHolds`, before its DEL): the allocation's own
//   reservations become holds, so that the DEL and the audit leave its addresses held.
// - `reclaimAdd` (a setup with `reclaim`): in the room of the directory (room.ts) as a reclaim,
//   removes the holds and runs the ADD with the addresses asked for in `args.cni.ips` of the
//   plugin that carries the host-local `ipam` (host-local reads requests there, from
//   `runtimeConfig.ips` only with the `ips` capability, and from CNI_ARGS `IP=`, one address only).
//
// Concurrency: see room.ts for the rule between reclaims and new setups of one directory. Hold
// files need no lock: they are created O_EXCL (as host-local creates its own) and removed only by
// their owner's operation, and the runner never runs two operations on one allocation at once.
import { mkdir } from 'node:fs/promises';
import { setImmediate } from 'node:timers/promises';
import { logInfo } from '@allocnet/base';
import type { NetworkConfig } from '@allocnet/cni';
import type { ConfiguratorContext } from './context.js';
import { ConfiguratorError } from './errors.js';
import { inSubnets } from './facts.js';
import type { NetworkFacts } from './facts.js';
import { readReservation, removeReservation, turnIntoHold, writeHold } from './ipam.js';
import { resolveNetwork } from './networks.js';
import type { AllocAttachment, HoldReport, LostAddress, OperationOptions } from './types.js';

type Call = { signal?: AbortSignal };

/** How many addresses `holdAddresses` holds between two turns of the event loop (~2 ms). */
const HOLD_SLICE = 64;

/** Why `address` cannot be held or reclaimed in `facts`' network, or undefined. */
function outOfRange(facts: NetworkFacts, address: string): string | undefined {
  return inSubnets(facts, address)
    ? undefined
    : `it is outside every range of network ${JSON.stringify(facts.name)}'s config`;
}

function heldBy(owner: string): string {
  return `it is reserved for ${JSON.stringify(owner)}`;
}

/** The network an attachment's allocation is set up in now: its name in the catalog, else its snapshot. */
async function currentNetwork(
  ctx: ConfiguratorContext,
  attachment: AllocAttachment,
): Promise<NetworkConfig> {
  const snapshot = await ctx.catalog.current();
  try {
    return resolveNetwork(snapshot, attachment.network.name);
  } catch {
    // The network left the conf dir: its setup will say so; its addresses stay held meanwhile
    // where they were reserved.
    return ctx.snapshotNetwork(attachment);
  }
}

/** Holds every recorded address of `attachments` that no reservation file has (see the top). */
export async function holdAddresses(
  ctx: ConfiguratorContext,
  attachments: readonly AllocAttachment[],
  opts: OperationOptions | undefined,
): Promise<HoldReport> {
  let held = 0;
  let kept = 0;
  const lost: LostAddress[] = [];
  const dirs = new Set<string>();
  let done = 0;
  for (const a of attachments) {
    opts?.signal?.throwIfAborted();
    const facts = ctx.factsOf(await currentNetwork(ctx, a));
    const dir = facts.ipamDir;
    if (dir === undefined) continue;
    // host-local makes the directory with its first ADD; after a reboot it is not there yet.
    if (!dirs.has(dir)) await mkdir(dir, { recursive: true, mode: 0o755 });
    dirs.add(dir);
    for (const address of a.addresses) {
      const where = { allocId: a.allocId, network: facts.name, address };
      const range = outOfRange(facts, address);
      if (range !== undefined) {
        lost.push({ ...where, reason: range });
        continue;
      }
      const found = writeHold(facts.name, dir, address, a);
      if (found === undefined) held++;
      else if (found.allocId === a.allocId) kept++;
      else lost.push({ ...where, reason: heldBy(found.allocId) });
      // The files are read and written synchronously (writeHold): a slice at a time, so that
      // the agent answers meanwhile.
      if (++done % HOLD_SLICE === 0) await setImmediate();
    }
  }
  if (held > 0 || lost.length > 0)
    logInfo(ctx.logger, 'held the recorded addresses', { held, kept, lost: lost.length });
  return { held, kept, lost };
}

/** Before a DEL that must leave the addresses held: the allocation's reservations become holds. */
export async function keepAsHolds(
  ctx: ConfiguratorContext,
  attachment: AllocAttachment,
): Promise<void> {
  const facts = ctx.factsOf(ctx.snapshotNetwork(attachment));
  const dir = facts.ipamDir;
  if (dir === undefined) return;
  await Promise.all(
    attachment.addresses.map(async (address) => {
      const r = await readReservation(facts.name, dir, address);
      if (r !== undefined && r.allocId === attachment.allocId && !r.hold)
        await turnIntoHold(r, attachment.ifName);
    }),
  );
}

/**
 * `network` with `addresses` asked for in `args.cni.ips` of each plugin that carries a host-local
 * `ipam` (bridge hands its own config to its IPAM plugin). Other keys of `args` stay. The bytes
 * (what the CNI cache and the record keep) are the network's own: CHECK and DEL use them.
 */
export function withRequestedIps(
  network: NetworkConfig,
  addresses: readonly string[],
): NetworkConfig {
  const object = (v: unknown): Record<string, unknown> =>
    typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  return {
    ...network,
    plugins: network.plugins.map((p) => {
      if (object(p.raw.ipam).type !== 'host-local') return p;
      const args = object(p.raw.args);
      return {
        ...p,
        raw: { ...p.raw, args: { ...args, cni: { ...object(args.cni), ips: [...addresses] } } },
      };
    }),
  };
}

export interface Reclaim {
  readonly allocId: string;
  /** The network as configured now, and its facts. */
  readonly network: NetworkConfig;
  readonly facts: NetworkFacts;
  /** The recorded addresses, v4 and v6. */
  readonly addresses: readonly string[];
  /** An address the user's own `IP=` CNI arg already asks for (not asked twice). */
  readonly userIp: string | undefined;
}

function lostError(r: Reclaim, address: string, why: string): ConfiguratorError {
  return new ConfiguratorError(
    `setting up ${JSON.stringify(r.allocId)} in network ${JSON.stringify(r.facts.name)} with its recorded address ${address} failed: ${why}`,
    { code: 'address-lost', allocId: r.allocId, network: r.facts.name, address },
  );
}

/**
 * Runs `add` with the network asking for exactly the recorded addresses, in the directory's room
 * as a reclaim, after removing their holds. Throws `address-lost` (nothing run) for an address
 * outside the network's ranges or reserved by another allocation.
 */
export async function reclaimAdd<T>(
  ctx: ConfiguratorContext,
  r: Reclaim,
  call: Call,
  add: (network: NetworkConfig) => Promise<T>,
): Promise<T> {
  const dir = r.facts.ipamDir;
  if (dir === undefined || r.addresses.length === 0) return add(r.network);
  for (const address of r.addresses) {
    const range = outOfRange(r.facts, address);
    if (range !== undefined) throw lostError(r, address, range);
  }
  const leave = await ctx.room(dir).enter('reclaim', call.signal);
  try {
    for (const address of r.addresses) {
      const found = await readReservation(r.facts.name, dir, address);
      if (found === undefined) continue;
      if (found.allocId !== r.allocId) throw lostError(r, address, heldBy(found.allocId));
      // Its hold, or a reservation of its own a crash left: host-local creates the file O_EXCL.
      await removeReservation(found);
    }
    const asked = r.addresses.filter((a) => a !== r.userIp);
    return await add(withRequestedIps(r.network, asked));
  } finally {
    leave();
  }
}
