// The nf_tables messages the netlink link (nft.ts) sends and reads: GETGEN, a GETRULE dump of one
// chain, and a removal batch (DELRULE by handle or whole chain, DELCHAIN) whose BATCH_BEGIN
// carries the generation the handles were read at. Pure: buffers in, buffers out.
import { NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST } from './netlink.js';
import { Attributes, Malformed } from './nft-attributes.js';
import type { Family, Table } from './validate.js';

/** One change of a removal batch. */
export type NftOp =
  | {
      readonly kind: 'deleteRule';
      readonly table: Table;
      readonly chain: string;
      readonly handle: bigint;
    }
  | { readonly kind: 'flushChain'; readonly table: Table; readonly chain: string }
  | { readonly kind: 'deleteChain'; readonly table: Table; readonly chain: string };

const NFNL_MSG_BATCH_BEGIN = 0x10;
const NFNL_MSG_BATCH_END = 0x11;
const NFNL_SUBSYS_NFTABLES = 10;
const NFT = NFNL_SUBSYS_NFTABLES << 8;
const NFNL_BATCH_GENID = 1;
const NFT_MSG_GETCHAIN = 4;
const NFT_MSG_DELCHAIN = 5;
const NFT_MSG_GETRULE = 7;
const NFT_MSG_DELRULE = 8;
const NFT_MSG_GETGEN = 16;
const NFTA_GEN_ID = 1;
const NFTA_RULE_TABLE = 1;
const NFTA_RULE_CHAIN = 2;
const NFTA_RULE_HANDLE = 3;
const NFTA_CHAIN_TABLE = 1;
const NFTA_CHAIN_NAME = 3;
const NFTA_CHAIN_HOOK = 4;
const NFTA_CHAIN_POLICY = 5;
const NFTA_HOOK_HOOKNUM = 1;
const NFPROTO: Readonly<Record<Family, number>> = { ipv4: 2, ipv6: 10 };

/**
 * Netlink messages, written into one growing buffer. Only forward, into bytes `Buffer.alloc`
 * zeroed: padding and zero fields need no writing. Numbers go through a DataView, whose setters
 * are the engine's own (Buffer's are JavaScript with checks: a batch writes some 60,000 fields,
 * most of them before the code is compiled).
 */
class Writer {
  private buf = Buffer.alloc(1 << 16);
  private view = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.length);
  length = 0;
  private seq = 0;

  private room(n: number) {
    if (this.length + n <= this.buf.length) return;
    const bigger = Buffer.alloc(Math.max(this.buf.length * 2, this.length + n));
    bigger.set(this.buf.subarray(0, this.length));
    this.buf = bigger;
    this.view = new DataView(bigger.buffer, bigger.byteOffset, bigger.length);
  }

  /** Starts a message (nlmsghdr + nfgenmsg); resolves its start and sequence number. */
  begin(
    type: number,
    flags: number,
    family: number,
    resId: number,
  ): { start: number; seq: number } {
    this.room(20);
    const start = this.length;
    const seq = ++this.seq;
    const v = this.view;
    v.setUint16(start + 4, type, true);
    v.setUint16(start + 6, flags, true);
    v.setUint32(start + 8, seq, true);
    v.setUint8(start + 16, family);
    v.setUint16(start + 18, resId);
    this.length += 20;
    return { start, seq };
  }

  end(start: number) {
    this.view.setUint32(start, this.length - start, true);
  }

  private attr(type: number, size: number): number {
    const padded = (4 + size + 3) & ~3;
    this.room(padded);
    const at = this.length;
    this.view.setUint16(at, 4 + size, true);
    this.view.setUint16(at + 2, type, true);
    this.length += padded;
    return at + 4;
  }

  /**
   * A NUL-terminated string attribute, written in place: a batch names thousands of chains, and
   * a `Buffer` made for each name was a fifth of a cold reap's encoding.
   */
  string(type: number, value: string) {
    // Room for the header, the longest UTF-8 the value could take, its NUL and the padding.
    this.room(4 + value.length * 3 + 4);
    const at = this.length;
    const n = this.buf.write(value, at + 4, 'utf8');
    this.view.setUint16(at, 4 + n + 1, true);
    this.view.setUint16(at + 2, type, true);
    this.length += (4 + n + 1 + 3) & ~3;
  }

  u32be(type: number, value: number) {
    this.view.setUint32(this.attr(type, 4), value);
  }

  u64be(type: number, value: bigint) {
    this.view.setBigUint64(this.attr(type, 8), value);
  }

  bytes(): Buffer {
    return this.buf.subarray(0, this.length);
  }
}

/** GETGEN: the ruleset generation, which every commit in the namespace moves on by one. */
export function generationRequest(): Buffer {
  const w = new Writer();
  const { start } = w.begin(NFT | NFT_MSG_GETGEN, NLM_F_REQUEST, 0, 0);
  w.end(start);
  return w.bytes();
}

/** The generation a GETGEN answer carries. */
export function generationOf(body: Buffer): number | undefined {
  try {
    return GENERATION.read(body, 4, body.length).u32(NFTA_GEN_ID);
  } catch (error) {
    // A malformed answer carries no generation: the caller says so.
    if (error instanceof Malformed) return undefined;
    throw error;
  }
}
const GENERATION = new Attributes();

/**
 * A GETCHAIN of one chain (no dump), acked: its NEWCHAIN message and the ack when it is there,
 * ENOENT when it (or its table) is not. A GETRULE dump cannot tell: the kernel answers a dump of
 * a chain that is not there as one of an empty chain.
 */
export function chainRequest(family: Family, table: Table, chain: string): Buffer {
  const w = new Writer();
  const { start } = w.begin(NFT | NFT_MSG_GETCHAIN, NLM_F_REQUEST | NLM_F_ACK, NFPROTO[family], 0);
  w.string(NFTA_CHAIN_TABLE, table);
  w.string(NFTA_CHAIN_NAME, chain);
  w.end(start);
  return w.bytes();
}

/** A GETCHAIN dump of every chain of the family, every table. */
export function chainsRequest(family: Family): Buffer {
  const w = new Writer();
  const { start } = w.begin(NFT | NFT_MSG_GETCHAIN, NLM_F_REQUEST | NLM_F_DUMP, NFPROTO[family], 0);
  w.end(start);
  return w.bytes();
}

/** One chain of a GETCHAIN dump: its table, name, and for a base chain its hook and policy. */
export interface ChainMessage {
  readonly table: string;
  readonly name: string;
  /** The base chain's hook (NF_INET_PRE_ROUTING 0 … POST_ROUTING 4); undefined for a user chain. */
  readonly hook: number | undefined;
  /** The base chain's policy; undefined for a user chain. */
  readonly policy: 'ACCEPT' | 'DROP' | undefined;
}

/** A chain of a GETCHAIN answer; undefined when it lacks its table or name. */
export function chainOf(body: Buffer): ChainMessage | undefined {
  const a = CHAIN.read(body, 4, body.length);
  const table = a.text(NFTA_CHAIN_TABLE);
  const name = a.text(NFTA_CHAIN_NAME, 'utf8');
  if (table === undefined || name === undefined) return undefined;
  if (!a.has(NFTA_CHAIN_HOOK)) return { table, name, hook: undefined, policy: undefined };
  const hook = HOOK.read(body, a.from[NFTA_CHAIN_HOOK] as number, a.to[NFTA_CHAIN_HOOK] as number);
  return {
    table,
    name,
    hook: hook.u32(NFTA_HOOK_HOOKNUM),
    policy: a.u32(NFTA_CHAIN_POLICY) === 0 ? 'DROP' : 'ACCEPT',
  };
}
const CHAIN = new Attributes();
const HOOK = new Attributes();

/** A GETRULE dump of one chain: its rules, in the order iptables-save prints them. */
export function rulesRequest(family: Family, table: Table, chain: string): Buffer {
  const w = new Writer();
  const { start } = w.begin(NFT | NFT_MSG_GETRULE, NLM_F_REQUEST | NLM_F_DUMP, NFPROTO[family], 0);
  w.string(NFTA_RULE_TABLE, table);
  w.string(NFTA_RULE_CHAIN, chain);
  w.end(start);
  return w.bytes();
}

/** The handle of a rule of a GETRULE dump. */
export function ruleHandleOf(body: Buffer): bigint | undefined {
  // The handle attribute comes right after table and chain; no map of them all.
  for (let at = 4; at + 4 <= body.length;) {
    const len = body.readUInt16LE(at);
    if (len < 4) break;
    if ((body.readUInt16LE(at + 2) & 0x3fff) === NFTA_RULE_HANDLE && len >= 12)
      return body.readBigUInt64BE(at + 4);
    at += (len + 3) & ~3;
  }
  return undefined;
}

/**
 * The removal batch: BATCH_BEGIN with `generation`, a message per op (the last asks for an ack),
 * BATCH_END. `first` is BATCH_BEGIN's sequence number, `last` the last op's.
 */
export function removalBatch(
  family: Family,
  generation: number,
  ops: readonly NftOp[],
): { bytes: Buffer; first: number; last: number } {
  const proto = NFPROTO[family];
  const w = new Writer();
  const batch = w.begin(NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, 0, NFNL_SUBSYS_NFTABLES);
  w.u32be(NFNL_BATCH_GENID, generation);
  w.end(batch.start);
  let last = batch.seq;
  ops.forEach((op, i) => {
    const flags = NLM_F_REQUEST | (i === ops.length - 1 ? NLM_F_ACK : 0);
    if (op.kind === 'deleteChain') {
      const m = w.begin(NFT | NFT_MSG_DELCHAIN, flags, proto, 0);
      w.string(NFTA_CHAIN_TABLE, op.table);
      w.string(NFTA_CHAIN_NAME, op.chain);
      w.end(m.start);
      last = m.seq;
    } else {
      const m = w.begin(NFT | NFT_MSG_DELRULE, flags, proto, 0);
      w.string(NFTA_RULE_TABLE, op.table);
      w.string(NFTA_RULE_CHAIN, op.chain);
      if (op.kind === 'deleteRule') w.u64be(NFTA_RULE_HANDLE, op.handle);
      w.end(m.start);
      last = m.seq;
    }
  });
  const end = w.begin(NFNL_MSG_BATCH_END, NLM_F_REQUEST, 0, NFNL_SUBSYS_NFTABLES);
  w.end(end.start);
  return { bytes: w.bytes(), first: batch.seq, last };
}
