// rtnetlink for the native CHECK (native-check.ts): the requests it sends and the answers it
// decodes, as plain objects. Pure: no socket here (see route-reader.ts), so the decoding is
// tested with made-up messages. Layouts are Linux's uapi (linux/rtnetlink.h, if_link.h,
// if_addr.h); numbers are in the host's byte order (little-endian on every machine this runs on).
import ipaddr from 'ipaddr.js';
import { netlinkAttributes } from '@allocnet/iptables-node';

export const RTM_NEWLINK = 16;
export const RTM_GETLINK = 18;
export const RTM_NEWADDR = 20;
export const RTM_GETADDR = 22;
export const RTM_NEWROUTE = 24;
export const RTM_GETROUTE = 26;

const AF_UNSPEC = 0;
const AF_INET = 2;
const AF_INET6 = 10;

const IFLA_ADDRESS = 1;
const IFLA_IFNAME = 3;
const IFLA_LINK = 5;
const IFLA_MASTER = 10;
const IFLA_LINKINFO = 18;
const IFLA_INFO_KIND = 1;
const IFA_ADDRESS = 1;
const IFA_LOCAL = 2;
const RTA_DST = 1;
const RTA_GATEWAY = 5;

export const IFF_UP = 0x1;
export const IFF_PROMISC = 0x100;
export const RT_TABLE_MAIN = 254;
export const RTM_F_CLONED = 0x200;

const HEADER = 16;
const IFINFOMSG = 16;
const IFADDRMSG = 8;
const RTMSG = 12;

/** A link as RTM_NEWLINK describes it: what bridge's and loopback's CHECK look at. */
export interface NetLink {
  readonly index: number;
  readonly name: string;
  /** `ifi_flags` (IFF_UP, IFF_PROMISC…). */
  readonly flags: number;
  /** IFLA_INFO_KIND (`bridge`, `veth`…); undefined for a link without one (`lo`). */
  readonly kind: string | undefined;
  /** IFLA_MASTER: the bridge it is enslaved to. */
  readonly master: number | undefined;
  /** IFLA_LINK: a veth's peer, by its index in the peer's namespace. */
  readonly peer: number | undefined;
  /** IFLA_ADDRESS as Go prints a hardware address: lower-case hex, colons. */
  readonly mac: string | undefined;
}

/** An address as vishvananda/netlink reads it (a peer address keeps the local one whole). */
export interface NetAddress {
  readonly index: number;
  readonly family: 'ipv4' | 'ipv6';
  /** ipaddr.js's canonical text. */
  readonly ip: string;
  readonly prefixLength: number;
}

export interface NetRoute {
  readonly family: 'ipv4' | 'ipv6';
  /** `rtm_table`, as the plugins read it (a table above 255 shows as RT_TABLE_COMPAT, 252). */
  readonly table: number;
  readonly flags: number;
  /** undefined for a default route (no RTA_DST). */
  readonly dst: { readonly ip: string; readonly prefixLength: number } | undefined;
  readonly gateway: string | undefined;
}

/** One request: the header, `body`, then `attrs` (type, value). */
export function request(
  type: number,
  flags: number,
  seq: number,
  body: Buffer,
  attrs: readonly (readonly [number, Buffer])[] = [],
): Buffer {
  const parts = [body];
  for (const [attrType, value] of attrs) {
    const attr = Buffer.alloc((4 + value.length + 3) & ~3);
    attr.writeUInt16LE(4 + value.length, 0);
    attr.writeUInt16LE(attrType, 2);
    value.copy(attr, 4);
    parts.push(attr);
  }
  const payload = Buffer.concat(parts);
  const header = Buffer.alloc(HEADER);
  header.writeUInt32LE(HEADER + payload.length, 0);
  header.writeUInt16LE(type, 4);
  header.writeUInt16LE(flags, 6);
  header.writeUInt32LE(seq, 8);
  return Buffer.concat([header, payload]);
}

/** RTM_GETLINK of one link by name (the kernel's lookup by name, not a dump). */
export function linkByNameRequest(seq: number, flags: number, name: string): Buffer {
  return request(RTM_GETLINK, flags, seq, Buffer.alloc(IFINFOMSG), [
    [IFLA_IFNAME, Buffer.from(`${name}\0`)],
  ]);
}

/** A dump of every link, address or route of the namespace, every family. */
export function dumpRequest(type: number, seq: number, flags: number): Buffer {
  const body = Buffer.alloc(
    type === RTM_GETLINK ? IFINFOMSG : type === RTM_GETADDR ? IFADDRMSG : RTMSG,
  );
  body.writeUInt8(AF_UNSPEC, 0);
  return request(type, flags, seq, body);
}

/** Each attribute of `buf` from `at` on, the first of each type: its value by type. */
function attributes(buf: Buffer, at: number): Map<number, Buffer> {
  const found = new Map<number, Buffer>();
  for (const a of netlinkAttributes(buf, at)) if (!found.has(a.type)) found.set(a.type, a.value);
  return found;
}

function text(value: Buffer | undefined): string | undefined {
  if (value === undefined) return undefined;
  const end = value.indexOf(0);
  return value.toString('utf8', 0, end < 0 ? value.length : end);
}

function u32(value: Buffer | undefined): number | undefined {
  return value !== undefined && value.length >= 4 ? value.readUInt32LE(0) : undefined;
}

function ipOf(value: Buffer): string {
  return ipaddr.fromByteArray([...value]).toString();
}

/** An RTM_NEWLINK payload (after the netlink header). */
export function decodeLink(payload: Buffer): NetLink {
  const attrs = attributes(payload, IFINFOMSG);
  const info = attrs.get(IFLA_LINKINFO);
  const mac = attrs.get(IFLA_ADDRESS);
  const master = u32(attrs.get(IFLA_MASTER));
  return {
    index: payload.readInt32LE(4),
    name: text(attrs.get(IFLA_IFNAME)) ?? '',
    flags: payload.readUInt32LE(8),
    kind: info === undefined ? undefined : text(attributes(info, 0).get(IFLA_INFO_KIND)),
    // IFLA_MASTER 0 is "no master" (a link set nomaster may still carry it).
    master: master === 0 ? undefined : master,
    peer: u32(attrs.get(IFLA_LINK)),
    mac:
      mac === undefined
        ? undefined
        : [...mac].map((b) => b.toString(16).padStart(2, '0')).join(':'),
  };
}

function familyOf(family: number): 'ipv4' | 'ipv6' | undefined {
  return family === AF_INET ? 'ipv4' : family === AF_INET6 ? 'ipv6' : undefined;
}

/**
 * An RTM_NEWADDR payload; undefined for a family other than IPv4 and IPv6. As vishvananda/netlink
 * (what the plugins use): IFA_LOCAL, when present and not the IPv4 IFA_ADDRESS, is the address,
 * with a full prefix (the prefix is the peer's); otherwise IFA_ADDRESS with `ifa_prefixlen`.
 */
export function decodeAddress(payload: Buffer): NetAddress | undefined {
  const family = familyOf(payload.readUInt8(0));
  if (family === undefined) return undefined;
  const prefixLength = payload.readUInt8(1);
  const attrs = attributes(payload, IFADDRMSG);
  const address = attrs.get(IFA_ADDRESS);
  const local = attrs.get(IFA_LOCAL);
  const index = payload.readUInt32LE(4);
  if (local !== undefined && !(family === 'ipv4' && address !== undefined && local.equals(address)))
    return { index, family, ip: ipOf(local), prefixLength: local.length * 8 };
  if (address === undefined) return undefined;
  return { index, family, ip: ipOf(address), prefixLength };
}

/** An RTM_NEWROUTE payload; undefined for a family other than IPv4 and IPv6. */
export function decodeRoute(payload: Buffer): NetRoute | undefined {
  const family = familyOf(payload.readUInt8(0));
  if (family === undefined) return undefined;
  const attrs = attributes(payload, RTMSG);
  const dst = attrs.get(RTA_DST);
  const gateway = attrs.get(RTA_GATEWAY);
  return {
    family,
    table: payload.readUInt8(4),
    flags: payload.readUInt32LE(8),
    dst: dst === undefined ? undefined : { ip: ipOf(dst), prefixLength: payload.readUInt8(1) },
    gateway: gateway === undefined ? undefined : ipOf(gateway),
  };
}
