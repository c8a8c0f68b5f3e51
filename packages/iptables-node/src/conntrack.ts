// Conntrack over netlink (ctnetlink), for the one thing portmap does to it on ADD: deleting the
// node's UDP entries whose original destination port is a newly mapped host port, so that
// traffic a stale entry would keep sending elsewhere meets the new DNAT rules (portmap 1.1.1,
// `deletePortmapStaleConnections`, which dumps the family's table and deletes each match). Here
// the same: one dump of the family's conntrack table, then one DELETE per match, by its original
// tuple (and zone), on a NETLINK_NETFILTER socket made in the namespace (netlink.ts). An entry
// gone between the dump and its DELETE (ENOENT) is no error.
import {
  NLM_F_ACK,
  NLM_F_DUMP,
  NLM_F_REQUEST,
  NLMSG_DONE,
  NLMSG_ERROR,
  failed,
  netlinkAttributes,
  openNetlinkSocket,
} from './netlink.js';
import type { Family } from './validate.js';

const NFNL_SUBSYS_CTNETLINK = 1;
const IPCTNL_MSG_CT_GET = 1;
const IPCTNL_MSG_CT_DELETE = 2;
const CTA_TUPLE_ORIG = 1;
const CTA_ZONE = 18;
const CTA_TUPLE_PROTO = 2;
const CTA_PROTO_NUM = 1;
const CTA_PROTO_DST_PORT = 3;
const ENOENT = 2;

function find(buf: Buffer, type: number): Buffer | undefined {
  for (const a of netlinkAttributes(buf)) if (a.type === type) return a.value;
  return undefined;
}

/** A ctnetlink message: header, nfgenmsg for `family`, then `body`. */
function message(kind: number, flags: number, seq: number, family: Family, body: Buffer): Buffer {
  const head = Buffer.alloc(20);
  head.writeUInt32LE(20 + body.length, 0);
  head.writeUInt16LE((NFNL_SUBSYS_CTNETLINK << 8) | kind, 4);
  head.writeUInt16LE(flags, 6);
  head.writeUInt32LE(seq, 8);
  head.writeUInt8(family === 'ipv4' ? 2 : 10, 16);
  return Buffer.concat([head, body]);
}

/**
 * Deletes the conntrack entries of `family` in `netns` (a path; default this namespace) whose
 * original tuple has `protocol` (17: UDP) and one of `ports` as its destination port. Resolves
 * how many it deleted.
 */
export async function deleteConntrackByDestinationPort(
  netns: string | undefined,
  family: Family,
  protocol: number,
  ports: readonly number[],
): Promise<number> {
  const wanted = new Set(ports);
  const socket = openNetlinkSocket(netns);
  try {
    const doomed: Buffer[] = [];
    await socket.send(
      'conntrack dump',
      message(IPCTNL_MSG_CT_GET, NLM_F_REQUEST | NLM_F_DUMP, 1, family, Buffer.alloc(0)),
    );
    await socket.answers('conntrack dump', (type, _seq, payload) => {
      if (type === NLMSG_DONE) return true;
      if (type === NLMSG_ERROR) {
        const errno = -payload.readInt32LE(0);
        if (errno === 0) return true;
        throw failed('conntrack dump', errno);
      }
      const attrs = payload.subarray(4);
      const orig = find(attrs, CTA_TUPLE_ORIG);
      const proto = orig === undefined ? undefined : find(orig, CTA_TUPLE_PROTO);
      const num = proto === undefined ? undefined : find(proto, CTA_PROTO_NUM);
      const port = proto === undefined ? undefined : find(proto, CTA_PROTO_DST_PORT);
      if (num?.readUInt8(0) !== protocol || port === undefined || !wanted.has(port.readUInt16BE(0)))
        return false;
      // The original tuple as the kernel gave it, and the zone: what a DELETE names an entry by.
      const parts = [...netlinkAttributes(attrs)]
        .filter((a) => a.type === CTA_TUPLE_ORIG || a.type === CTA_ZONE)
        .map((a) =>
          Buffer.concat([a.whole, Buffer.alloc(((a.whole.length + 3) & ~3) - a.whole.length)]),
        );
      doomed.push(Buffer.concat(parts));
      return false;
    });
    if (doomed.length === 0) return 0;
    const first = 2;
    const last = first + doomed.length - 1;
    const out = Buffer.concat(
      doomed.map((body, i) =>
        message(IPCTNL_MSG_CT_DELETE, NLM_F_REQUEST | NLM_F_ACK, first + i, family, body),
      ),
    );
    if (out.length > 1 << 17) socket.sendBuffer(2 * out.length);
    await socket.send('conntrack delete', out);
    let deleted = 0;
    let error: Error | undefined;
    await socket.answers('conntrack delete', (type, seq, payload) => {
      if (type !== NLMSG_ERROR) return false;
      const errno = -payload.readInt32LE(0);
      if (errno === 0) deleted++;
      else if (errno !== ENOENT) error ??= failed('conntrack delete', errno);
      return seq >= last;
    });
    if (error !== undefined) throw error;
    return deleted;
  } finally {
    socket.close();
  }
}
