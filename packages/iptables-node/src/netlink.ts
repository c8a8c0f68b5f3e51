// Socket I/O of the netlink link (nft.ts): a NETLINK_NETFILTER socket made in a network
// namespace, sending one buffer of messages and reading the answers. The same socket speaks
// NETLINK_ROUTE for the configurator's native CHECK (links, addresses and routes of a namespace). The socket is made in the
// calling thread (@allocnet/libc's `inNetworkNamespace`: microseconds); every send and receive runs on a worker
// thread (koffi's `.async`), because the kernel does its work in them: a send of a removal batch
// is the whole nf_tables transaction (tens of milliseconds for thousands of rules), a receive of
// a dump builds the messages it returns. The event loop goes on meanwhile (issue 28). A receive
// waits at most RECEIVE_TIMEOUT_S, so an answer that never comes cannot hang the call. A socket
// may be made to run its calls, or its requests alone, on the calling thread (`SocketKind`).
//
// errno is per thread, and koffi reads it in the thread that made the call: after a call on a
// worker thread it is not known here (docs/iptables.md), and a failed send or receive says so.
import { messageOf } from '@allocnet/base';
import { SetnsError, bindLibc, inNetworkNamespace } from '@allocnet/libc';
import { IptablesError } from './errors.js';
import type { IptablesErrorCode } from './errors.js';

const AF_NETLINK = 16;
const SOCK_RAW = 3;
const SOCK_CLOEXEC = 0o2000000;
const NETLINK_NETFILTER = 12;
/** rtnetlink: links, addresses, routes. */
export const NETLINK_ROUTE = 0;
const SOL_SOCKET = 1;
const SO_SNDBUFFORCE = 32;
const SO_RCVBUFFORCE = 33;
const SO_RCVTIMEO = 20;
const RECEIVE_TIMEOUT_S = 10;
/** recv(2) without waiting: on the calling thread, an answer that is not queued is an error. */
const MSG_DONTWAIT = 0x40;

export const NLM_F_REQUEST = 0x1;
export const NLM_F_ACK = 0x4;
export const NLM_F_DUMP = 0x300;
export const NLMSG_ERROR = 2;
export const NLMSG_DONE = 3;

/** One netlink attribute: its type without the flag bits, its value, its whole bytes, and where the next one starts. */
export interface NetlinkAttribute {
  readonly type: number;
  readonly value: Buffer;
  readonly whole: Buffer;
  readonly next: number;
}

/**
 * The netlink attributes of `buf` from `at` on (each padded to 4 bytes), in order; it stops at
 * the first malformed one, so a reader that must see them all checks that the last one's `next`
 * reaches the end.
 */
export function* netlinkAttributes(buf: Buffer, at = 0): Generator<NetlinkAttribute> {
  while (at + 4 <= buf.length) {
    const len = buf.readUInt16LE(at);
    if (len < 4 || at + len > buf.length) return;
    const next = at + ((len + 3) & ~3);
    yield {
      type: buf.readUInt16LE(at + 2) & 0x3fff,
      value: buf.subarray(at + 4, at + len),
      whole: buf.subarray(at, at + len),
      next,
    };
    at = next;
  }
}

/** Linux errno values the answers carry, and what they mean here. */
const ERRNO_CODES: ReadonlyMap<number, IptablesErrorCode> = new Map([
  [1, 'permission'], // EPERM
  [2, 'not-found'], // ENOENT
  [16, 'in-use'], // EBUSY
  [17, 'already-exists'], // EEXIST
  [85, 'changed'], // ERESTART: the batch's generation is not the ruleset's
]);

/** A bound function and its `.async` form: the call on a worker thread, with a callback. */
type WithAsync<A extends unknown[]> = ((...args: A) => number) & {
  readonly async: (...args: [...A, (error: unknown, result: number) => void]) => void;
};

const bound = bindLibc<{
  readonly socket: (domain: number, type: number, protocol: number) => number;
  readonly send: WithAsync<[fd: number, buf: Buffer, len: number, flags: number]>;
  readonly recv: WithAsync<[fd: number, buf: Buffer, len: number, flags: number]>;
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
  send: 'long send(int fd, const void *buf, size_t len, int flags)',
  recv: 'long recv(int fd, _Out_ void *buf, size_t len, int flags)',
  setsockopt: 'int setsockopt(int fd, int level, int name, const void *value, int len)',
  close: 'int close(int fd)',
});
type Libc = ReturnType<typeof bound>;

/**
 * The error for a failed call or a refusing answer; `code` by the errno unless given. `errno`
 * undefined: a call on a worker thread, whose errno is not known here.
 */
export function failed(
  what: string,
  errno: number | undefined,
  code?: IptablesErrorCode,
  subsystem = 'nf_tables',
): IptablesError {
  const why = errno === undefined ? 'errno not known: it ran on a worker thread' : `errno ${errno}`;
  return new IptablesError(`${subsystem} ${what} failed (${why})`, {
    code: code ?? (errno === undefined ? undefined : ERRNO_CODES.get(errno)) ?? 'unknown',
  });
}

/** A call on a worker thread (koffi's `.async`), resolving its result. */
function onWorker<A extends unknown[]>(fn: WithAsync<A>, ...args: A): Promise<number> {
  return new Promise((resolve, reject) => {
    fn.async(...args, (error, result) => {
      if (error === null || error === undefined) resolve(result);
      else reject(error instanceof Error ? error : new Error(messageOf(error)));
    });
  });
}

/**
 * The socket, made in `netns` (a path) when given: the calling thread enters it and comes back.
 * A netlink socket stays bound to the namespace it was made in.
 */
function openSocket(c: Libc, netns: string | undefined, kind: SocketKind): number {
  const { protocol, subsystem } = kind;
  const make = () => {
    const fd = c.socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol);
    return { fd, errno: fd < 0 ? c.errno() : 0 };
  };
  let made: { fd: number; errno: number };
  try {
    made = netns === undefined ? make() : inNetworkNamespace(netns, make);
  } catch (error) {
    if (error instanceof SetnsError)
      throw failed(`setns ${netns}`, error.errno, undefined, subsystem);
    throw error;
  }
  if (made.fd < 0) throw failed('socket', made.errno, undefined, subsystem);
  return made.fd;
}

/**
 * Which netlink family a socket speaks, the name its errors start with, and whether its sends
 * and receives run on the calling thread: for small answers the kernel builds in microseconds (a
 * worker thread's round trip would cost more than the call), or, requests alone, in a process with
 * nothing else to answer (the CLI), where the event loop may wait out a dump. Such a receive never
 * waits for an answer: one with nothing queued fails (errno 11, EAGAIN); the kernel queues a
 * request's answer, and the next part of a dump, before the send or the receive returns.
 */
export interface SocketKind {
  readonly protocol: number;
  readonly subsystem: string;
  readonly onCallingThread?: boolean;
  /**
   * Requests (their sends and every receive) on the calling thread, but a batch's send, where
   * nf_tables does a whole transaction's work, on the worker thread. Implied by `onCallingThread`.
   */
  readonly requestsOnCallingThread?: boolean;
}

export const NFTABLES: SocketKind = { protocol: NETLINK_NETFILTER, subsystem: 'nf_tables' };

/** A netlink socket in one namespace (`NETLINK_NETFILTER` unless asked otherwise). */
export interface NetlinkSocket {
  /**
   * Sends `out` (one or more messages) in one send; `what` names it in an error. `batch`: an
   * nf_tables batch (a transaction), sent on the worker thread even by a socket whose requests
   * run on the calling thread.
   */
  send(what: string, out: Buffer, options?: { readonly batch?: boolean }): Promise<void>;
  /**
   * Reads answers until `visit` returns true: each message's type, sequence number and what
   * follows its header (for NLMSG_ERROR, the negated errno first: 0 is an ack). The payload is
   * valid only during the call. One call at a time per socket.
   */
  answers(
    what: string,
    visit: (type: number, seq: number, payload: Buffer) => boolean,
    options?: {
      /**
       * The answers are a dump's, which ends with NLMSG_DONE (or an error): on a worker thread,
       * each part's successor is received while it is read.
       */
      readonly dump?: boolean;
    },
  ): Promise<void>;
  /** Makes the send buffer hold at least `bytes` (the kernel takes a batch only whole). */
  sendBuffer(bytes: number): void;
  close(): void;
}

/** Whether the first `n` bytes of `part` hold a message that ends a dump (DONE or an error). */
function endsDump(part: Buffer, n: number): boolean {
  for (let at = 0; at + 16 <= n;) {
    const len = part.readUInt32LE(at);
    if (len < 16) return true; // not read further: nothing is asked for ahead
    const type = part.readUInt16LE(at + 4);
    if (type === NLMSG_DONE || type === NLMSG_ERROR) return true;
    at += (len + 3) & ~3;
  }
  return false;
}

/**
 * Opens the socket in `netns` (a path; default this one), its receive timeout and buffer set;
 * `kind` its netlink family (default NETLINK_NETFILTER, errors naming nf_tables).
 */
export function openNetlinkSocket(
  netns: string | undefined,
  kind: SocketKind = NFTABLES,
): NetlinkSocket {
  const { subsystem } = kind;
  const c = bound();
  const fd = openSocket(c, netns, kind);
  // Two: a dump's next part is received into one while the other is read.
  const inboxes = [Buffer.alloc(1 << 17), Buffer.alloc(1 << 17)];
  let closed = false;
  const option = (name: number, value: Buffer) =>
    c.setsockopt(fd, SOL_SOCKET, name, value, value.length) === 0;
  try {
    // The receive buffer holds a failed batch's error answers, one per change.
    const timeout = Buffer.alloc(16);
    timeout.writeBigInt64LE(BigInt(RECEIVE_TIMEOUT_S), 0);
    const rcvbuf = Buffer.alloc(4);
    rcvbuf.writeInt32LE(1 << 22);
    if (!option(SO_RCVTIMEO, timeout) || !option(SO_RCVBUFFORCE, rcvbuf))
      throw failed('setsockopt', c.errno(), undefined, subsystem);
  } catch (error) {
    c.close(fd);
    throw error;
  }

  const here = kind.onCallingThread === true;
  const receiveHere = here || kind.requestsOnCallingThread === true;
  return {
    async send(what, out, options) {
      const sendHere = here || (receiveHere && options?.batch !== true);
      const sent = sendHere
        ? c.send(fd, out, out.length, 0)
        : await onWorker(c.send, fd, out, out.length, 0);
      if (sent < 0) throw failed(what, sendHere ? c.errno() : undefined, undefined, subsystem);
    },

    async answers(what, visit, options) {
      const receive = async (into: Buffer) => {
        // On the calling thread never wait: the kernel queues a request's answer (and the next
        // part of a dump) before send or the previous receive returns.
        const n = receiveHere
          ? c.recv(fd, into, into.length, MSG_DONTWAIT)
          : await onWorker(c.recv, fd, into, into.length, 0);
        if (n < 0)
          throw failed(
            `${what} (receive)`,
            receiveHere ? c.errno() : undefined,
            undefined,
            subsystem,
          );
        return n;
      };
      // A dump's next part is asked for before this one is read, when this one does not end it:
      // the kernel builds it on the worker thread meanwhile (docs/iptables.md).
      const ahead = options?.dump === true && !receiveHere;
      let inbox = inboxes[0] as Buffer;
      let next: Promise<number> | undefined = receive(inbox);
      try {
        for (;;) {
          const part = inbox;
          const n = await next;
          next = undefined;
          if (ahead && !endsDump(part, n)) {
            inbox = inbox === inboxes[0] ? (inboxes[1] as Buffer) : (inboxes[0] as Buffer);
            next = receive(inbox);
          }
          for (let at = 0; at + 16 <= n;) {
            const len = part.readUInt32LE(at);
            if (len < 16) break;
            const type = part.readUInt16LE(at + 4);
            const seq = part.readUInt32LE(at + 8);
            if (visit(type, seq, part.subarray(at + 16, at + len))) return;
            at += (len + 3) & ~3;
          }
          next ??= receive(inbox);
        }
      } finally {
        // A visit that threw, or stopped early: the part asked for ahead is still read, so
        // that it is not taken for the answer to the next request.
        if (next !== undefined) await next.catch(() => undefined);
      }
    },

    sendBuffer(bytes) {
      const size = Buffer.alloc(4);
      size.writeInt32LE(bytes);
      if (!option(SO_SNDBUFFORCE, size))
        throw failed('SO_SNDBUFFORCE', c.errno(), undefined, subsystem);
    },

    close() {
      if (closed) return;
      closed = true;
      if (here) c.close(fd);
      // The kernel takes a while to release the socket after a commit: not on this thread.
      else c.close.async(fd, () => undefined);
    },
  };
}
