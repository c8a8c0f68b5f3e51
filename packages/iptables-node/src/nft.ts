// nf_tables over netlink, for the one thing iptables-restore does slowly: removing thousands of
// rules out of large shared chains. iptables-restore parses each `-D <spec>` and compares it with
// the chain's rules (~50 µs a line: 4,000 deletes and 2,000 chains take ~250 ms); the kernel does
// the same removal by rule handle in ~25 ms. Three requests are used, on a NETLINK_NETFILTER
// socket made in the namespace's network namespace:
// - GETGEN: the ruleset generation, which every commit in the namespace moves on by one;
// - a GETRULE dump of one chain: its rules' handles, in the order iptables-save prints them;
// - one batch of DELRULE (by handle, or a whole chain) and DELCHAIN messages whose BATCH_BEGIN
//   carries the generation the handles were read at: the kernel applies it all, or nothing and
//   answers ERESTART when anything changed since (a compare-and-swap on the whole ruleset).
// Only for iptables' nf_tables backend (iptables-legacy rules are not nf_tables rules). The calls
// are synchronous (koffi, in the calling thread): the kernel answers each within milliseconds.
import { closeSync, openSync } from 'node:fs';
import { bindLibc } from '@allocnet/libc';
import { IptablesError } from './errors.js';
import type { IptablesErrorCode } from './errors.js';
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

export interface NftLink {
  /** The namespace's ruleset generation now. */
  generation(): number;
  /**
   * The handles of the chain's rules, in order; `not-found` when the chain (or its table) is
   * not there. `inspect` sees each rule's message (valid only during the call), by index.
   */
  rules(table: Table, chain: string, inspect?: (index: number, message: Buffer) => void): bigint[];
  /**
   * Applies `ops` in one transaction if the ruleset is still at `generation`; throws `changed`
   * when it is not (nothing applied). Resolves the generation after the commit when the commit
   * was the only change since (`generation + 1`), else undefined.
   */
  commit(generation: number, ops: readonly NftOp[]): number | undefined;
  close(): void;
}

const AF_NETLINK = 16;
const SOCK_RAW = 3;
const SOCK_CLOEXEC = 0o2000000;
const NETLINK_NETFILTER = 12;
const CLONE_NEWNET = 0x40000000;
const SOL_SOCKET = 1;
const SO_SNDBUFFORCE = 32;
const SO_RCVBUFFORCE = 33;
const SO_RCVTIMEO = 20;
const RECEIVE_TIMEOUT_S = 10;

const NLM_F_REQUEST = 0x1;
const NLM_F_ACK = 0x4;
const NLM_F_DUMP = 0x300;
const NLMSG_ERROR = 2;
const NLMSG_DONE = 3;
const NFNL_MSG_BATCH_BEGIN = 0x10;
const NFNL_MSG_BATCH_END = 0x11;
const NFNL_SUBSYS_NFTABLES = 10;
const NFNL_BATCH_GENID = 1;
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
const NFPROTO: Readonly<Record<Family, number>> = { ipv4: 2, ipv6: 10 };

/** Linux errno values the answers carry, and what they mean here. */
const ERRNO_CODES: ReadonlyMap<number, IptablesErrorCode> = new Map([
  [1, 'permission'], // EPERM
  [2, 'not-found'], // ENOENT
  [16, 'in-use'], // EBUSY
  [17, 'already-exists'], // EEXIST
  [85, 'changed'], // ERESTART: the batch's generation is not the ruleset's
]);

const bound = bindLibc<{
  readonly socket: (domain: number, type: number, protocol: number) => number;
  readonly setns: (fd: number, nstype: number) => number;
  readonly send: (fd: number, buf: Buffer, len: number, flags: number) => number;
  readonly recv: (fd: number, buf: Buffer, len: number, flags: number) => number;
  readonly setsockopt: (
    fd: number,
    level: number,
    name: number,
    value: Buffer,
    len: number,
  ) => number;
  /** `close.async` runs close(2) on a worker thread. */
  readonly close: ((fd: number) => number) & {
    readonly async: (fd: number, done: (error: unknown, result: number) => void) => void;
  };
}>({
  socket: 'int socket(int domain, int type, int protocol)',
  setns: 'int setns(int fd, int nstype)',
  send: 'long send(int fd, const void *buf, size_t len, int flags)',
  recv: 'long recv(int fd, _Out_ void *buf, size_t len, int flags)',
  setsockopt: 'int setsockopt(int fd, int level, int name, const void *value, int len)',
  close: 'int close(int fd)',
});
type Libc = ReturnType<typeof bound>;

function failed(what: string, errno: number, code?: IptablesErrorCode): IptablesError {
  return new IptablesError(`nf_tables ${what} failed (errno ${errno})`, {
    code: code ?? ERRNO_CODES.get(errno) ?? 'unknown',
  });
}

/** The socket, made in `netns` (a path) when given: the calling thread enters it and comes back. */
function openSocket(c: Libc, netns: string | undefined): number {
  if (netns === undefined) {
    const fd = c.socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
    if (fd < 0) throw failed('socket', c.errno());
    return fd;
  }
  const home = openSync('/proc/thread-self/ns/net', 'r');
  try {
    const target = openSync(netns, 'r');
    try {
      if (c.setns(target, CLONE_NEWNET) !== 0) throw failed(`setns ${netns}`, c.errno());
    } finally {
      closeSync(target);
    }
    const fd = c.socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
    const errno = c.errno();
    // Back home before anything else can run in this thread; a thread left in another
    // namespace would make every later socket of the process there.
    if (c.setns(home, CLONE_NEWNET) !== 0)
      throw new Error(
        `nf_tables: could not return to the process's network namespace (errno ${c.errno()})`,
      );
    if (fd < 0) throw failed('socket', errno);
    return fd;
  } finally {
    closeSync(home);
  }
}

/** Netlink messages, written into one growing buffer. */
class Writer {
  private buf = Buffer.alloc(1 << 16);
  length = 0;
  private seq = 0;

  private room(n: number) {
    if (this.length + n <= this.buf.length) return;
    const bigger = Buffer.alloc(Math.max(this.buf.length * 2, this.length + n));
    this.buf.copy(bigger, 0, 0, this.length);
    this.buf = bigger;
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
    this.buf.writeUInt16LE(type, start + 4);
    this.buf.writeUInt16LE(flags, start + 6);
    this.buf.writeUInt32LE(seq, start + 8);
    this.buf.writeUInt32LE(0, start + 12);
    this.buf.writeUInt8(family, start + 16);
    this.buf.writeUInt8(0, start + 17);
    this.buf.writeUInt16BE(resId, start + 18);
    this.length += 20;
    return { start, seq };
  }

  end(start: number) {
    this.buf.writeUInt32LE(this.length - start, start);
  }

  private attr(type: number, size: number): number {
    const padded = (4 + size + 3) & ~3;
    this.room(padded);
    const at = this.length;
    this.buf.fill(0, at, at + padded);
    this.buf.writeUInt16LE(4 + size, at);
    this.buf.writeUInt16LE(type, at + 2);
    this.length += padded;
    return at + 4;
  }

  /** Encoded strings, NUL-terminated: a batch names the same few tables and chains again and again. */
  private readonly encoded = new Map<string, Buffer>();

  string(type: number, value: string) {
    let bytes = this.encoded.get(value);
    if (bytes === undefined) {
      bytes = Buffer.from(`${value}\0`);
      this.encoded.set(value, bytes);
    }
    // The offset first: `attr` may replace the buffer.
    const at = this.attr(type, bytes.length);
    bytes.copy(this.buf, at);
  }

  u32be(type: number, value: number) {
    const at = this.attr(type, 4);
    this.buf.writeUInt32BE(value, at);
  }

  u64be(type: number, value: bigint) {
    const at = this.attr(type, 8);
    this.buf.writeBigUInt64BE(value, at);
  }

  bytes(): Buffer {
    return this.buf.subarray(0, this.length);
  }
}

/** The attributes after a message's nfgenmsg: type -> payload (the first of each type). */
function attributes(body: Buffer): Map<number, Buffer> {
  const found = new Map<number, Buffer>();
  for (let at = 4; at + 4 <= body.length;) {
    const len = body.readUInt16LE(at);
    if (len < 4) break;
    const type = body.readUInt16LE(at + 2) & 0x3fff;
    if (!found.has(type)) found.set(type, body.subarray(at + 4, at + len));
    at += (len + 3) & ~3;
  }
  return found;
}

/** Opens a link to the nf_tables ruleset of `family` in `netns` (a path; default this one). */
export function openNftLink(family: Family, netns?: string): NftLink {
  const c = bound();
  const fd = openSocket(c, netns);
  const proto = NFPROTO[family];
  const inbox = Buffer.alloc(1 << 17);
  let closed = false;
  try {
    // An answer that never comes must not hang the process (the calls block their thread):
    // a receive waits at most RECEIVE_TIMEOUT_S, then fails. The receive buffer holds a failed
    // batch's error answers, one per change.
    const timeout = Buffer.alloc(16);
    timeout.writeBigInt64LE(BigInt(RECEIVE_TIMEOUT_S), 0);
    const rcvbuf = Buffer.alloc(4);
    rcvbuf.writeInt32LE(1 << 22);
    if (
      c.setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, timeout, 16) !== 0 ||
      c.setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, rcvbuf, 4) !== 0
    )
      throw failed('setsockopt', c.errno());
  } catch (error) {
    c.close(fd);
    throw error;
  }

  function send(what: string, out: Buffer) {
    if (c.send(fd, out, out.length, 0) < 0) throw failed(what, c.errno());
  }

  /**
   * Reads answers until `finished` says so; each that is neither an ack nor DONE goes to
   * `onMessage`. An error answer throws: nothing more comes for a GETGEN or a dump after it.
   */
  function receive(
    what: string,
    onMessage: (body: Buffer) => void,
    finished: (type: number) => boolean,
  ) {
    for (;;) {
      const n = c.recv(fd, inbox, inbox.length, 0);
      if (n < 0) throw failed(`${what} (receive)`, c.errno());
      for (let at = 0; at + 16 <= n;) {
        const len = inbox.readUInt32LE(at);
        if (len < 16) break;
        const type = inbox.readUInt16LE(at + 4);
        if (type === NLMSG_ERROR) {
          const errno = -inbox.readInt32LE(at + 16);
          if (errno !== 0) throw failed(what, errno);
        } else if (type !== NLMSG_DONE) onMessage(inbox.subarray(at + 16, at + len));
        if (finished(type)) return;
        at += (len + 3) & ~3;
      }
    }
  }

  const link: NftLink = {
    generation() {
      const w = new Writer();
      const { start } = w.begin((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETGEN, NLM_F_REQUEST, 0, 0);
      w.end(start);
      send('GETGEN', w.bytes());
      let generation: number | undefined;
      receive(
        'GETGEN',
        (body) => {
          generation = attributes(body).get(NFTA_GEN_ID)?.readUInt32BE(0);
        },
        () => generation !== undefined,
      );
      if (generation === undefined)
        throw failed('GETGEN (no generation in the answer)', 0, 'parse');
      return generation;
    },

    rules(table, chain, inspect) {
      const w = new Writer();
      const { start } = w.begin(
        (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETRULE,
        NLM_F_REQUEST | NLM_F_DUMP,
        proto,
        0,
      );
      w.string(NFTA_RULE_TABLE, table);
      w.string(NFTA_RULE_CHAIN, chain);
      w.end(start);
      send(`GETRULE ${table} ${chain}`, w.bytes());
      const handles: bigint[] = [];
      receive(
        `GETRULE ${table} ${chain}`,
        (body) => {
          // The handle attribute comes right after table and chain; no map of them all.
          for (let at = 4; at + 4 <= body.length;) {
            const len = body.readUInt16LE(at);
            if (len < 4) break;
            if ((body.readUInt16LE(at + 2) & 0x3fff) === NFTA_RULE_HANDLE && len >= 12) {
              inspect?.(handles.length, body);
              handles.push(body.readBigUInt64BE(at + 4));
              return;
            }
            at += (len + 3) & ~3;
          }
        },
        (type) => type === NLMSG_DONE || type === NLMSG_ERROR,
      );
      return handles;
    },

    commit(generation, ops) {
      if (ops.length === 0) return generation;
      const w = new Writer();
      const subsys = NFNL_SUBSYS_NFTABLES << 8;
      const batch = w.begin(NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, 0, NFNL_SUBSYS_NFTABLES);
      w.u32be(NFNL_BATCH_GENID, generation);
      w.end(batch.start);
      let last = batch.seq;
      ops.forEach((op, i) => {
        const flags = NLM_F_REQUEST | (i === ops.length - 1 ? NLM_F_ACK : 0);
        if (op.kind === 'deleteChain') {
          const m = w.begin(subsys | NFT_MSG_DELCHAIN, flags, proto, 0);
          w.string(NFTA_CHAIN_TABLE, op.table);
          w.string(NFTA_CHAIN_NAME, op.chain);
          w.end(m.start);
          last = m.seq;
        } else {
          const m = w.begin(subsys | NFT_MSG_DELRULE, flags, proto, 0);
          w.string(NFTA_RULE_TABLE, op.table);
          w.string(NFTA_RULE_CHAIN, op.chain);
          if (op.kind === 'deleteRule') w.u64be(NFTA_RULE_HANDLE, op.handle);
          w.end(m.start);
          last = m.seq;
        }
      });
      const end = w.begin(NFNL_MSG_BATCH_END, NLM_F_REQUEST, 0, NFNL_SUBSYS_NFTABLES);
      w.end(end.start);
      const out = w.bytes();
      // The kernel takes a batch only whole, in one send: the send buffer must hold it.
      const size = Buffer.alloc(4);
      size.writeInt32LE(Math.max(out.length * 2, 1 << 20));
      if (c.setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, size, 4) !== 0)
        throw failed('SO_SNDBUFFORCE', c.errno());
      send('batch', out);
      // Answers: an error for the BEGIN when the generation moved on (nothing follows it), an
      // error for each change that failed, and the last change's ack or error. Nothing went
      // unless every answer is an ack.
      let error: IptablesError | undefined;
      for (;;) {
        const n = c.recv(fd, inbox, inbox.length, 0);
        if (n < 0) throw failed('batch (receive)', c.errno());
        for (let at = 0; at + 16 <= n;) {
          const len = inbox.readUInt32LE(at);
          if (len < 16) break;
          const seq = inbox.readUInt32LE(at + 8);
          if (inbox.readUInt16LE(at + 4) === NLMSG_ERROR) {
            const errno = -inbox.readInt32LE(at + 16);
            const refused = errno !== 0;
            if (refused)
              error ??= failed(
                seq === batch.seq ? 'batch' : `batch change ${seq - batch.seq}`,
                errno,
              );
            if ((refused && seq === batch.seq) || seq === last) {
              if (error !== undefined) throw error;
              const after = link.generation();
              return after === generation + 1 ? after : undefined;
            }
          }
          at += (len + 3) & ~3;
        }
      }
    },

    close() {
      if (closed) return;
      closed = true;
      // After a commit the kernel takes ~10 ms to release the socket: not on this thread.
      c.close.async(fd, () => undefined);
    },
  };
  return link;
}
