// Which rule of a GETRULE dump is exactly one of the two accept rules the firewall plugin writes
// for an address (`-s A/32 -j ACCEPT`, `-d A/32 -m conntrack --ctstate RELATED,ESTABLISHED -j
// ACCEPT`; /128 for IPv6), read from the rule's nf_tables expressions as iptables-nft 1.8 writes
// them (docs/iptables.md): a payload load of the address, an equality with it, the conntrack match
// (xt, revision 3), a counter, the accept verdict. Anything else — another match, a comment (rule
// userdata), a mask, another verdict, another encoding — is not one. Pure: a buffer in.
import { netlinkAttributes } from './netlink.js';
import type { NetlinkAttribute } from './netlink.js';
import type { Family } from './validate.js';

/** One accept rule: its address's bytes, which header field, and whether it is the conntrack one. */
export interface AddressAccept {
  readonly address: Buffer;
  readonly direction: 'source' | 'destination';
  readonly established: boolean;
}

// linux/netfilter/nf_tables.h
const NFTA_RULE_TABLE = 1;
const NFTA_RULE_CHAIN = 2;
const NFTA_RULE_HANDLE = 3;
const NFTA_RULE_EXPRESSIONS = 4;
const NFTA_RULE_POSITION = 6;
const RULE_ATTRIBUTES = new Set([
  NFTA_RULE_TABLE,
  NFTA_RULE_CHAIN,
  NFTA_RULE_HANDLE,
  NFTA_RULE_EXPRESSIONS,
  NFTA_RULE_POSITION,
]);
const NFTA_EXPR_NAME = 1;
const NFTA_EXPR_DATA = 2;
const NFT_REG_VERDICT = 0;
const NFT_REG_1 = 1;
const NFT_PAYLOAD_NETWORK_HEADER = 1;
const NFT_CMP_EQ = 0;
const NFTA_DATA_VALUE = 1;
const NFTA_DATA_VERDICT = 2;
const NFTA_VERDICT_CODE = 1;
const NF_ACCEPT = 1;

/** Where the source and destination addresses are in the family's header, and their length. */
const HEADER: Readonly<Record<Family, { source: number; destination: number; length: number }>> = {
  ipv4: { source: 12, destination: 16, length: 4 },
  ipv6: { source: 8, destination: 24, length: 16 },
};

/**
 * xt_conntrack_mtinfo3 for `--ctstate RELATED,ESTABLISHED` alone: all zero but match_flags
 * (XT_CONNTRACK_STATE, at 146) and state_mask (ESTABLISHED|RELATED bits, at 150), host order.
 */
const CONNTRACK_STATE_INFO = (() => {
  const info = Buffer.alloc(168); // 162 bytes, aligned to 8 (XT_ALIGN)
  const le = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
  const u16 = (value: number, at: number) =>
    le ? info.writeUInt16LE(value, at) : info.writeUInt16BE(value, at);
  u16(1, 146);
  u16(0b110, 150);
  return info;
})();

/** The attributes of `buf`, in order; undefined when one is malformed. */
function attributes(buf: Buffer): NetlinkAttribute[] | undefined {
  const list = [...netlinkAttributes(buf)];
  return (list.at(-1)?.next ?? 0) >= buf.length ? list : undefined;
}

/** The attributes of `buf` by type; undefined when malformed or a type comes twice. */
function attributeMap(buf: Buffer | undefined): Map<number, Buffer> | undefined {
  const list = buf === undefined ? undefined : attributes(buf);
  if (list === undefined) return undefined;
  const map = new Map<number, Buffer>();
  for (const { type, value } of list) {
    if (map.has(type)) return undefined;
    map.set(type, value);
  }
  return map;
}

const u32Is = (value: Buffer | undefined, wanted: number) =>
  value?.length === 4 && value.readUInt32BE(0) === wanted;

/** The rule's expressions as (name, data) pairs; undefined when malformed. */
function expressionsOf(body: Buffer): { name: string; data: Buffer | undefined }[] | undefined {
  const rule = attributes(body.subarray(4));
  if (rule === undefined) return undefined;
  let list: Buffer | undefined;
  for (const { type, value } of rule) {
    if (!RULE_ATTRIBUTES.has(type)) return undefined; // userdata: a comment; compat: -p
    if (type === NFTA_RULE_EXPRESSIONS) list = value;
  }
  const elements = list === undefined ? undefined : attributes(list);
  if (elements === undefined) return undefined;
  const out: { name: string; data: Buffer | undefined }[] = [];
  for (const { value } of elements) {
    const expr = attributeMap(value);
    const name = expr?.get(NFTA_EXPR_NAME);
    if (expr === undefined || name === undefined) return undefined;
    out.push({
      name: name.toString('latin1').replace(/\0+$/, ''),
      data: expr.get(NFTA_EXPR_DATA),
    });
  }
  return out;
}

/** The payload load of the source or destination address into register 1. */
function loadedField(
  data: Buffer | undefined,
  family: Family,
): AddressAccept['direction'] | undefined {
  const p = attributeMap(data);
  const h = HEADER[family];
  if (p === undefined || p.size !== 4) return undefined;
  if (!u32Is(p.get(1), NFT_REG_1) || !u32Is(p.get(2), NFT_PAYLOAD_NETWORK_HEADER)) return undefined;
  if (!u32Is(p.get(4), h.length)) return undefined;
  if (u32Is(p.get(3), h.source)) return 'source';
  return u32Is(p.get(3), h.destination) ? 'destination' : undefined;
}

/** The value register 1 is compared equal with. */
function comparedValue(data: Buffer | undefined, length: number): Buffer | undefined {
  const c = attributeMap(data);
  if (c === undefined || c.size !== 3 || !u32Is(c.get(1), NFT_REG_1)) return undefined;
  if (!u32Is(c.get(2), NFT_CMP_EQ)) return undefined;
  const value = attributeMap(c.get(3));
  const bytes = value?.size === 1 ? value.get(NFTA_DATA_VALUE) : undefined;
  return bytes?.length === length ? bytes : undefined;
}

function isStateMatch(data: Buffer | undefined): boolean {
  const m = attributeMap(data);
  return (
    m?.size === 3 &&
    m.get(1)?.toString('latin1').replace(/\0+$/, '') === 'conntrack' &&
    u32Is(m.get(2), 3) &&
    m.get(3)?.equals(CONNTRACK_STATE_INFO) === true
  );
}

function isAcceptVerdict(data: Buffer | undefined): boolean {
  const i = attributeMap(data);
  if (i === undefined || i.size !== 2 || !u32Is(i.get(1), NFT_REG_VERDICT)) return false;
  const verdict = attributeMap(attributeMap(i.get(2))?.get(NFTA_DATA_VERDICT));
  return verdict?.size === 1 && u32Is(verdict.get(NFTA_VERDICT_CODE), NF_ACCEPT);
}

/** The accept rule `body` (a GETRULE answer, from its nfgenmsg) is, or undefined. */
export function addressAcceptOf(body: Buffer, family: Family): AddressAccept | undefined {
  const exprs = expressionsOf(body);
  const names = exprs?.map((e) => e.name).join(' ');
  if (exprs === undefined) return undefined;
  const established = names === 'payload cmp match counter immediate';
  if (!established && names !== 'payload cmp counter immediate') return undefined;
  const [load, cmp, ...rest] = exprs;
  const direction = loadedField(load?.data, family);
  const address = comparedValue(cmp?.data, HEADER[family].length);
  if (direction === undefined || address === undefined) return undefined;
  if (established && (direction !== 'destination' || !isStateMatch(rest[0]?.data)))
    return undefined;
  if (!isAcceptVerdict(rest[rest.length - 1]?.data)) return undefined;
  return { address, direction, established };
}
