// A teardown's removals over nf_tables netlink (nft.ts does the netlink), each one dump of a
// chain or two and one transaction by rule handle, guarded by the ruleset's generation:
// `removeJumped` (a per-allocation chain and the jumps to it) and `removeAccepts` (the firewall's
// accepts of some addresses, each rule read back as iptables-save prints it: nft-accept.ts).
import { IptablesError } from './errors.js';
import type { HandlesOptions } from './handles.js';
import { addressAcceptOf } from './nft-accept.js';
import { formatIPv4, formatIPv6 } from './nft-rule.js';
import type { NftLink, NftOp } from './nft.js';
import type { AcceptRemoval, AcceptsRemoved, JumpedChain } from './types.js';
import { checkChain, checkTable } from './validate.js';
import type { Family } from './validate.js';

/** How many times a removal reads and commits when another writer commits in between. */
const TRIES = 4;

/** A read-and-commit's outcome: done, the ruleset moved on before the commit, or give up. */
type Once<T> = T | 'changed' | { readonly giveUp: string };

/** Commits `ops` at `generation`; false when the ruleset moved on since (nothing applied). */
async function committed(link: NftLink, generation: number, ops: readonly NftOp[]) {
  try {
    await link.commit(generation, ops);
    return true;
  } catch (error) {
    if (error instanceof IptablesError && error.code === 'changed') return false;
    throw error;
  }
}

/**
 * Runs `once` on a link of the family's ruleset until it is not `changed`, at most `TRIES`
 * times: undefined when the link cannot be opened, when `once` gives up, or when every try met a
 * ruleset that changed between its read and its commit (concurrent teardowns each commit; the
 * caller then removes by spec). A failed read or commit throws.
 */
async function tried<T>(
  options: Pick<HandlesOptions, 'family' | 'netns' | 'nft' | 'logger'>,
  what: string,
  once: (link: NftLink) => Promise<Once<T>>,
): Promise<T | undefined> {
  const { family, netns, nft, logger } = options;
  let link: NftLink;
  try {
    if (nft === false) return undefined;
    link = nft(family, netns);
  } catch (error) {
    logger.debug(`nf_tables: no link; removing ${what} by spec`, {
      family,
      error: error instanceof Error ? error.message : String(error),
    });
    return undefined;
  }
  try {
    for (let i = 0; i < TRIES; i++) {
      const outcome = await once(link);
      if (outcome === 'changed') continue;
      if (typeof outcome === 'object' && outcome !== null && 'giveUp' in outcome) {
        logger.debug(`nf_tables: ${outcome.giveUp}; removing ${what} by spec`, { family });
        return undefined;
      }
      return outcome;
    }
    logger.debug(`nf_tables: the ruleset changed under every try; removing ${what} by spec`, {
      family,
      tries: TRIES,
    });
    return undefined;
  } finally {
    link.close();
  }
}

/**
 * One read-and-commit of `removeJumped`: the jumps found by the target chain's name (with its
 * NUL: the verdict's chain attribute, not a longer name) in `from`'s rule messages.
 */
async function removeJumpedOnce(
  link: NftLink,
  targets: readonly JumpedChain[],
): Promise<Once<string[]>> {
  const generation = await link.generation();
  const ops: NftOp[] = [];
  const removed: JumpedChain[] = [];
  for (const t of targets) {
    const table = checkTable(t.table);
    const from = checkChain(t.from);
    const needle = Buffer.from(`${checkChain(t.chain)}\0`);
    const hits: number[] = [];
    let handles: bigint[];
    try {
      handles = await link.rules(table, from, (index, message) => {
        if (message.includes(needle)) hits.push(index);
      });
    } catch (error) {
      // No such table: no jump either.
      if (error instanceof IptablesError && error.code === 'not-found') continue;
      throw error;
    }
    for (const i of hits) {
      const handle = handles[i];
      if (handle !== undefined) ops.push({ kind: 'deleteRule', table, chain: from, handle });
    }
    if (hits.length > 0) removed.push(t);
  }
  for (const t of removed) ops.push({ kind: 'flushChain', table: t.table, chain: t.chain });
  for (const t of removed) ops.push({ kind: 'deleteChain', table: t.table, chain: t.chain });
  if (ops.length === 0) return [];
  return (await committed(link, generation, ops)) ? removed.map((t) => t.chain) : 'changed';
}

/** `Iptables.removeJumped` once the backend is known to be nf_tables (see there). */
export function removeJumpedByLink(
  options: Pick<HandlesOptions, 'family' | 'netns' | 'nft' | 'logger'>,
  targets: readonly JumpedChain[],
): Promise<readonly string[] | undefined> {
  return tried(options, 'the jumps', (link) => removeJumpedOnce(link, targets));
}

/**
 * One read-and-commit of `removeAccepts`: the first rule of each wanted accept, found among the
 * rules holding an address's bytes; it gives up when one of those is not an accept rule at all.
 * The others that hold the bytes (another copy, another accept of the address) are `left`.
 */
async function removeAcceptsOnce(
  link: NftLink,
  family: Family,
  removal: AcceptRemoval,
): Promise<Once<AcceptsRemoved>> {
  const table = checkTable(removal.table);
  const chain = checkChain(removal.chain);
  const generation = await link.generation();
  const key = (address: string, direction: string, established: boolean) =>
    `${address} ${direction} ${established}`;
  const wanted = new Set(
    removal.addresses.flatMap((bytes) => {
      const a = family === 'ipv4' ? formatIPv4(bytes) : formatIPv6(bytes);
      return [key(a, 'destination', true), key(a, 'source', false)];
    }),
  );
  const found: number[] = [];
  const strangers: number[] = [];
  let holding = 0;
  let handles: bigint[];
  try {
    handles = await link.rules(table, chain, (index, message) => {
      if (!removal.addresses.some((a) => message.includes(a))) return;
      holding++;
      const accept = addressAcceptOf(message, family);
      if (accept === undefined) strangers.push(index);
      else if (wanted.delete(key(accept.address, accept.direction, accept.established)))
        found.push(index);
    });
  } catch (error) {
    // No such table: no rule either.
    if (error instanceof IptablesError && error.code === 'not-found')
      return { removed: 0, left: 0 };
    throw error;
  }
  if (strangers.length > 0)
    return {
      giveUp: `rule ${(strangers[0] ?? 0) + 1} of ${chain} holds an address and is not an accept`,
    };
  const ops = found.flatMap((i): NftOp[] => {
    const handle = handles[i];
    return handle === undefined ? [] : [{ kind: 'deleteRule', table, chain, handle }];
  });
  const left = holding - ops.length;
  if (ops.length === 0) return { removed: 0, left };
  return (await committed(link, generation, ops)) ? { removed: ops.length, left } : 'changed';
}

/** `Iptables.removeAccepts` once the backend is known to be nf_tables (see there). */
export function removeAcceptsByLink(
  options: Pick<HandlesOptions, 'family' | 'netns' | 'nft' | 'logger'>,
  removal: AcceptRemoval,
): Promise<AcceptsRemoved | undefined> {
  return tried(options, 'the accepts', (link) => removeAcceptsOnce(link, options.family, removal));
}
