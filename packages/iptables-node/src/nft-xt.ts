// The xt matches and targets iptables-nft keeps as xt blobs (their info laid out as the kernel's
// struct, host byte order) read into the arguments iptables-save prints for them, and the address
// formats it prints; nft-rule.ts reads the rest of a rule. A blob of another shape throws `OPAQUE`.
// Pure.
import { OPAQUE } from './nft-attributes.js';
import type { Family } from './validate.js';

/** Where the family's header holds the source and destination addresses, and their length. */
export const HEADER: Readonly<
  Record<Family, { source: number; destination: number; length: number }>
> = {
  ipv4: { source: 12, destination: 16, length: 4 },
  ipv6: { source: 8, destination: 24, length: 16 },
};

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
export const hostU16 = (b: Buffer, at: number) =>
  LITTLE_ENDIAN ? b.readUInt16LE(at) : b.readUInt16BE(at);
export const hostU32 = (b: Buffer, at: number) =>
  LITTLE_ENDIAN ? b.readUInt32LE(at) : b.readUInt32BE(at);

/** An IPv4 address's four bytes (from `at`) as dotted text. */
export function formatIPv4(bytes: Buffer, at = 0): string {
  return `${bytes[at]}.${bytes[at + 1]}.${bytes[at + 2]}.${bytes[at + 3]}`;
}

/** As glibc's inet_ntop prints it (iptables uses it): RFC 5952, and IPv4-mapped/compatible. */
export function formatIPv6(bytes: Buffer): string {
  const words: number[] = [];
  for (let i = 0; i < 16; i += 2) words.push(bytes.readUInt16BE(i));
  // The longest run of two or more zero words (the first of equal ones) becomes "::".
  let best = { base: -1, len: 0 };
  let cur = { base: -1, len: 0 };
  for (let i = 0; i < 8; i++) {
    if (words[i] === 0) {
      cur = cur.base < 0 ? { base: i, len: 1 } : { base: cur.base, len: cur.len + 1 };
      if (cur.len > best.len) best = cur;
    } else cur = { base: -1, len: 0 };
  }
  if (best.len < 2) best = { base: -1, len: 0 };
  let out = '';
  for (let i = 0; i < 8; i++) {
    if (best.base >= 0 && i >= best.base && i < best.base + best.len) {
      if (i === best.base) out += ':';
      continue;
    }
    if (i !== 0) out += ':';
    if (i === 6 && best.base === 0 && (best.len === 6 || (best.len === 5 && words[5] === 0xffff))) {
      out += formatIPv4(bytes.subarray(12, 16));
      break;
    }
    out += (words[i] as number).toString(16);
  }
  if (best.base >= 0 && best.base + best.len === 8) out += ':';
  return out;
}

/** The prefix length of a contiguous mask; undefined for any other. */
export function prefixOf(mask: Buffer): number | undefined {
  let bits = 0;
  let i = 0;
  for (; i < mask.length && mask[i] === 0xff; i++) bits += 8;
  if (i < mask.length) {
    const byte = mask[i] as number;
    const ones = [0, 0x80, 0xc0, 0xe0, 0xf0, 0xf8, 0xfc, 0xfe].indexOf(byte);
    if (ones < 0) return undefined;
    bits += ones;
    for (i++; i < mask.length; i++) if (mask[i] !== 0) return undefined;
  }
  return bits;
}

/** multiport revision 1 (xt_multiport_v1: flags, count, ports[15], pflags[15], invert). */
function multiport(info: Buffer): string[] {
  if (info.length < 48) throw OPAQUE;
  const flags = info[0] as number;
  const count = info[1] as number;
  const option = ['--sports', '--dports', '--ports'][flags];
  if (option === undefined || count < 1 || count > 15) throw OPAQUE;
  const ports: string[] = [];
  for (let i = 0; i < count; i++) {
    let one = String(hostU16(info, 2 + 2 * i));
    if (info[32 + i] !== 0) {
      i++;
      if (i >= count) throw OPAQUE;
      one += `:${hostU16(info, 2 + 2 * i)}`;
    }
    ports.push(one);
  }
  const invert = info[47] !== 0;
  return ['-m', 'multiport', ...(invert ? ['!'] : []), option, ports.join(',')];
}

/** conntrack revision 3 with `--ctstate` alone: its states in iptables' order. */
const CT_STATES: readonly [number, string][] = [
  [1, 'INVALID'],
  [8, 'NEW'],
  [4, 'RELATED'],
  [2, 'ESTABLISHED'],
];
function conntrack(info: Buffer): string[] {
  // xt_conntrack_mtinfo3: match_flags at 146, invert_flags at 148, state_mask at 150.
  if (info.length < 162) throw OPAQUE;
  const flags = hostU16(info, 146);
  const invert = hostU16(info, 148);
  const states = hostU16(info, 150);
  for (let i = 0; i < info.length; i++) if ((i < 146 || i >= 152) && info[i] !== 0) throw OPAQUE;
  if (flags !== 1 || (invert & ~1) !== 0 || states === 0 || (states & ~0b1111) !== 0) throw OPAQUE;
  const names = CT_STATES.filter(([bit]) => (states & bit) !== 0).map(([, name]) => name);
  return ['-m', 'conntrack', ...(invert === 1 ? ['!'] : []), '--ctstate', names.join(',')];
}

const ADDRESS_TYPES = [
  'UNSPEC', 'UNICAST', 'LOCAL', 'BROADCAST', 'ANYCAST', 'MULTICAST',
  'BLACKHOLE', 'UNREACHABLE', 'PROHIBIT', 'THROW', 'NAT', 'XRESOLVE',
]; // prettier-ignore
/** addrtype revision 1 (xt_addrtype_info_v1: source, dest, flags). */
function addrtype(info: Buffer): string[] {
  if (info.length < 8) throw OPAQUE;
  const source = hostU16(info, 0);
  const dest = hostU16(info, 2);
  const flags = hostU32(info, 4);
  const most = 1 << ADDRESS_TYPES.length;
  if ((flags & ~0b1111) !== 0 || source >= most || dest >= most) throw OPAQUE;
  const types = (mask: number) => ADDRESS_TYPES.filter((_, i) => (mask & (1 << i)) !== 0).join(',');
  const out = ['-m', 'addrtype'];
  if (source !== 0) out.push(...((flags & 1) !== 0 ? ['!'] : []), '--src-type', types(source));
  if (dest !== 0) out.push(...((flags & 2) !== 0 ? ['!'] : []), '--dst-type', types(dest));
  if ((flags & 4) !== 0) out.push('--limit-iface-in');
  if ((flags & 8) !== 0) out.push('--limit-iface-out');
  return out;
}

/**
 * An xt match's info read into arguments, the last one remembered: a chain's rules repeat the same
 * info (every firewall accept's conntrack match), and a process's first reap reads each of its
 * thousands of rules before the compiler has made this code fast. The arguments are shared,
 * never changed.
 */
class LastInfo {
  private info: Buffer | undefined;
  private args: string[] = [];

  constructor(private readonly readInfo: (info: Buffer) => string[]) {}

  read(info: Buffer): string[] {
    if (this.info?.equals(info) !== true) {
      this.args = this.readInfo(info);
      this.info = Buffer.from(info);
    }
    return this.args;
  }
}
export const MULTIPORT = new LastInfo(multiport);
export const CONNTRACK = new LastInfo(conntrack);
export const ADDRTYPE = new LastInfo(addrtype);

/** DNAT revision 2 (nf_nat_range2) to one address and at most one port. */
export function dnat(family: Family, info: Buffer): string[] {
  if (info.length < 42) throw OPAQUE;
  const flags = hostU32(info, 0);
  // NF_NAT_RANGE_MAP_IPS, with NF_NAT_RANGE_PROTO_SPECIFIED or not; nothing else.
  if (flags !== 1 && flags !== 3) throw OPAQUE;
  const length = HEADER[family].length;
  const min = info.subarray(4, 4 + length);
  if (!min.equals(info.subarray(20, 20 + length))) throw OPAQUE;
  const host = family === 'ipv4' ? formatIPv4(min) : formatIPv6(min);
  if (flags === 1) {
    if (family === 'ipv6') throw OPAQUE;
    return ['-j', 'DNAT', '--to-destination', host];
  }
  const minPort = info.readUInt16BE(36);
  if (minPort !== info.readUInt16BE(38)) throw OPAQUE;
  const to = family === 'ipv4' ? `${host}:${minPort}` : `[${host}]:${minPort}`;
  return ['-j', 'DNAT', '--to-destination', to];
}

/** MASQUERADE revision 0, bare: IPv4's compat range one range with nothing in it, IPv6's nothing. */
export function masquerade(family: Family, info: Buffer): string[] {
  const rest = family === 'ipv4' ? info.subarray(4) : info;
  if ((family === 'ipv4' && hostU32(info, 0) !== 1) || rest.some((b) => b !== 0)) throw OPAQUE;
  return ['-j', 'MASQUERADE'];
}

/** MARK revision 2 (xt_mark_tginfo2: mark, mask), as `--set-xmark` prints it. */
export function mark(info: Buffer): string[] {
  if (info.length < 8) throw OPAQUE;
  const value = hostU32(info, 0).toString(16);
  const mask = hostU32(info, 4).toString(16);
  return ['-j', 'MARK', '--set-xmark', `0x${value}/0x${mask}`];
}
