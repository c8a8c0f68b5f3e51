// What the native CHECK (native-check.ts) reads through rtnetlink: one namespace's links,
// addresses and routes (three dumps on a socket made in it: a netlink socket stays bound to the
// namespace it was made in), and links of this process's namespace by name (the kernel's lookup
// by name: no dump of the node's thousands of veths per CHECK).
//
// Concurrency: each call opens its own socket and closes it; calls run in parallel freely.
import {
  NETLINK_ROUTE,
  NLMSG_DONE,
  NLMSG_ERROR,
  NLM_F_DUMP,
  NLM_F_REQUEST,
  openNetlinkSocket,
} from '@allocnet/iptables-node';
import type { NetlinkSocket } from '@allocnet/iptables-node';
import {
  RTM_GETADDR,
  RTM_GETLINK,
  RTM_GETROUTE,
  RTM_NEWADDR,
  RTM_NEWLINK,
  RTM_NEWROUTE,
  decodeAddress,
  decodeLink,
  decodeRoute,
  dumpRequest,
  linkByNameRequest,
} from './rtnetlink.js';
import type { NetAddress, NetLink, NetRoute } from './rtnetlink.js';

/** Answers of a few kilobytes, built by the kernel in microseconds: read on the calling thread. */
const ROUTE = { protocol: NETLINK_ROUTE, subsystem: 'rtnetlink', onCallingThread: true };
const ENODEV = 19;

/** A namespace's links, addresses and routes (every family, every table). */
export interface NamespaceState {
  readonly links: readonly NetLink[];
  readonly addresses: readonly NetAddress[];
  readonly routes: readonly NetRoute[];
}

/** The seam the native CHECK reads through; `createRouteReader()` is the real one. */
export interface RouteReader {
  /** The state of the namespace at `netns` (a path). */
  namespace(netns: string): Promise<NamespaceState>;
  /** Links of the node by name; a name with no link is absent from the map. */
  hostLinks(names: readonly string[]): Promise<ReadonlyMap<string, NetLink>>;
}

export interface RouteReaderOptions {
  /**
   * The node's namespace (a path): where the plugins run, and so where the bridge and the host
   * veths are. Default this process's (the agent runs in the node's); tests give their node
   * namespace, as they give it to iptables and the plugins' exec.
   */
  readonly netns?: string;
}

function refusal(what: string, errno: number): Error {
  return new Error(`rtnetlink ${what} failed (errno ${errno})`);
}

/** One dump: every message of `type` until NLMSG_DONE, decoded. */
async function dump<T>(
  socket: NetlinkSocket,
  seq: number,
  get: number,
  type: number,
  decode: (payload: Buffer) => T | undefined,
): Promise<T[]> {
  const found: T[] = [];
  const what = `dump ${get}`;
  await socket.send(what, dumpRequest(get, seq, NLM_F_REQUEST | NLM_F_DUMP));
  let errno = 0;
  await socket.answers(what, (answer, answerSeq, payload) => {
    if (answerSeq !== seq) return false;
    if (answer === NLMSG_ERROR) {
      errno = -payload.readInt32LE(0);
      return true;
    }
    if (answer === NLMSG_DONE) return true;
    if (answer === type) {
      const decoded = decode(payload);
      if (decoded !== undefined) found.push(decoded);
    }
    return false;
  });
  if (errno !== 0) throw refusal(what, errno);
  return found;
}

/** Reads through real netlink sockets. */
export function createRouteReader(options: RouteReaderOptions = {}): RouteReader {
  return {
    async namespace(netns) {
      const socket = openNetlinkSocket(netns, ROUTE);
      try {
        const links = await dump(socket, 1, RTM_GETLINK, RTM_NEWLINK, decodeLink);
        const addresses = await dump(socket, 2, RTM_GETADDR, RTM_NEWADDR, decodeAddress);
        const routes = await dump(socket, 3, RTM_GETROUTE, RTM_NEWROUTE, decodeRoute);
        return { links, addresses, routes };
      } finally {
        socket.close();
      }
    },

    async hostLinks(names) {
      const found = new Map<string, NetLink>();
      if (names.length === 0) return found;
      const socket = openNetlinkSocket(options.netns, ROUTE);
      try {
        let seq = 0;
        for (const name of names) {
          const what = `link ${JSON.stringify(name)}`;
          await socket.send(what, linkByNameRequest(++seq, NLM_F_REQUEST, name));
          let errno = 0;
          await socket.answers(what, (answer, answerSeq, payload) => {
            if (answerSeq !== seq) return false;
            if (answer === NLMSG_ERROR) errno = -payload.readInt32LE(0);
            else if (answer === RTM_NEWLINK) found.set(name, decodeLink(payload));
            else return false;
            return true;
          });
          if (errno !== 0 && errno !== ENODEV) throw refusal(what, errno);
        }
        return found;
      } finally {
        socket.close();
      }
    },
  };
}
