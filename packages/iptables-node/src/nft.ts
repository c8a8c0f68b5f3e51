// nf_tables over netlink, for what iptables' execs do slowly on a large ruleset: removing
// thousands of rules out of large shared chains (iptables-restore parses each `-D <spec>` and
// compares it with the chain's rules; the kernel does the same removal by rule handle in a
// fraction of the time) and reading the shared chains without the rest (iptables-save dumps and
// prints everything; docs/iptables.md has the figures). These requests are used (nft-messages.ts), on a
// NETLINK_NETFILTER socket made in the namespace's network namespace (netlink.ts):
// - GETGEN: the ruleset generation, which every commit in the namespace moves on by one;
// - a GETCHAIN dump of the family's chains, and a GETRULE dump of one chain: its rules, in the
//   order iptables-save prints them (their handles; nft-read.ts reads them back as arguments);
// - one batch of DELRULE (by handle, or a whole chain) and DELCHAIN messages whose BATCH_BEGIN
//   carries the generation the handles were read at: the kernel applies it all, or nothing and
//   answers ERESTART when anything changed since (a compare-and-swap on the whole ruleset).
// Only for iptables' nf_tables backend (iptables-legacy rules are not nf_tables rules). Each send
// and receive runs on a worker thread (netlink.ts): between them the event loop goes on, and
// another process may change the ruleset; the generation in BATCH_BEGIN makes the kernel refuse
// a commit made from handles read before such a change. One call at a time per link.
import type { IptablesError } from './errors.js';
import { NFTABLES, NLMSG_DONE, NLMSG_ERROR, failed, openNetlinkSocket } from './netlink.js';
import type { NetlinkSocket } from './netlink.js';
import {
  chainOf,
  chainRequest,
  chainsRequest,
  generationOf,
  generationRequest,
  removalBatch,
  ruleHandleOf,
  rulesRequest,
} from './nft-messages.js';
import type { ChainMessage, NftOp } from './nft-messages.js';
import type { Family, Table } from './validate.js';

export type { ChainMessage, NftOp } from './nft-messages.js';

export interface NftLink {
  /** The namespace's ruleset generation now. */
  generation(): Promise<number>;
  /**
   * The handles of the chain's rules, in order; `not-found` when the table is not there (a chain
   * that is not there reads as an empty one: the kernel's dump does not tell them apart, and
   * `chainExists` does). `inspect` sees each rule's message (valid only during the call), by index.
   */
  rules(
    table: Table,
    chain: string,
    inspect?: (index: number, message: Buffer) => void,
  ): Promise<bigint[]>;
  /** Every chain of the family, every table (one GETCHAIN dump). */
  chains(): Promise<ChainMessage[]>;
  /** Whether the chain is there (a GETCHAIN: one message, whatever the size of the ruleset). */
  chainExists(table: Table, chain: string): Promise<boolean>;
  /**
   * Applies `ops` in one transaction if the ruleset is still at `generation`; throws `changed`
   * when it is not (nothing applied). Resolves the generation after the commit when the commit
   * was the only change since (`generation + 1`), else undefined.
   */
  commit(generation: number, ops: readonly NftOp[]): Promise<number | undefined>;
  close(): void;
}

/**
 * Sends a request and reads its answers until `finished` says so; each that is neither an ack
 * nor DONE goes to `onMessage`. An error answer throws: nothing more comes for a GETGEN or a dump
 * after it.
 */
async function request(
  socket: NetlinkSocket,
  what: string,
  out: Buffer,
  onMessage: (body: Buffer) => void,
  finished: (type: number) => boolean,
  dump = false,
): Promise<void> {
  await socket.send(what, out);
  await socket.answers(
    what,
    (type, _seq, payload) => {
      if (type === NLMSG_ERROR) {
        const errno = -payload.readInt32LE(0);
        if (errno !== 0) throw failed(what, errno);
      } else if (type !== NLMSG_DONE) onMessage(payload);
      return finished(type);
    },
    { dump },
  );
}

/**
 * Reads a removal batch's answers: an error for the BEGIN when the generation moved on (nothing
 * follows it), an error for each change that failed, and the last change's ack or error. Throws
 * the first error; nothing went unless every answer is an ack.
 */
async function batchAnswers(socket: NetlinkSocket, first: number, last: number): Promise<void> {
  let error: IptablesError | undefined;
  await socket.answers('batch', (type, seq, payload) => {
    if (type !== NLMSG_ERROR) return false;
    const errno = -payload.readInt32LE(0);
    const refused = errno !== 0;
    if (refused) error ??= failed(seq === first ? 'batch' : `batch change ${seq - first}`, errno);
    return (refused && seq === first) || seq === last;
  });
  if (error !== undefined) throw error;
}

export interface NftLinkOptions {
  /**
   * Requests (GETGEN, the dumps: each send and receive) on the calling thread instead of the
   * worker thread; a commit's batch is still sent on the worker, and its answers read here. The
   * event loop then waits out each dump part: for a one-shot process with nothing else to answer
   * (the CLI's `--local` commands), where a worker's round trip per part and per request cost
   * more than they spared (docs/iptables.md, "Reading the ruleset over netlink"). Default false.
   */
  readonly requestsOnCallingThread?: boolean;
}

/** Opens a link to the nf_tables ruleset of `family` in `netns` (a path; default this one). */
export function openNftLink(family: Family, netns?: string, options?: NftLinkOptions): NftLink {
  const socket = openNetlinkSocket(netns, {
    ...NFTABLES,
    requestsOnCallingThread: options?.requestsOnCallingThread === true,
  });

  const link: NftLink = {
    async generation() {
      let generation: number | undefined;
      await request(
        socket,
        'GETGEN',
        generationRequest(),
        (body) => {
          generation = generationOf(body);
        },
        () => generation !== undefined,
      );
      if (generation === undefined)
        throw failed('GETGEN (no generation in the answer)', 0, 'parse');
      return generation;
    },

    async rules(table, chain, inspect) {
      const handles: bigint[] = [];
      await request(
        socket,
        `GETRULE ${table} ${chain}`,
        rulesRequest(family, table, chain),
        (body) => {
          const handle = ruleHandleOf(body);
          if (handle === undefined) return;
          inspect?.(handles.length, body);
          handles.push(handle);
        },
        (type) => type === NLMSG_DONE || type === NLMSG_ERROR,
        true,
      );
      return handles;
    },

    async chains() {
      const chains: ChainMessage[] = [];
      await request(
        socket,
        'GETCHAIN',
        chainsRequest(family),
        (body) => {
          const chain = chainOf(body);
          if (chain !== undefined) chains.push(chain);
        },
        (type) => type === NLMSG_DONE || type === NLMSG_ERROR,
        true,
      );
      return chains;
    },

    async chainExists(table, chain) {
      const what = `GETCHAIN ${table} ${chain}`;
      try {
        await request(
          socket,
          what,
          chainRequest(family, table, chain),
          () => undefined,
          (type) => type === NLMSG_ERROR,
        );
      } catch (error) {
        if ((error as IptablesError).code === 'not-found') return false;
        throw error;
      }
      return true;
    },

    async commit(generation, ops) {
      if (ops.length === 0) return generation;
      const { bytes, first, last } = removalBatch(family, generation, ops);
      // The kernel takes a batch only whole, in one send: the send buffer must hold it.
      socket.sendBuffer(Math.max(bytes.length * 2, 1 << 20));
      await socket.send('batch', bytes, { batch: true });
      await batchAnswers(socket, first, last);
      const after = await link.generation();
      return after === generation + 1 ? after : undefined;
    },

    close() {
      socket.close();
    },
  };
  return link;
}
