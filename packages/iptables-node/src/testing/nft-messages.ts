// nf_tables answers built by hand, for tests of what reads them (nft-rule.ts, nft-read.ts): a
// GETRULE answer's body (from its nfgenmsg on) made of expressions as iptables-nft 1.8.9 writes
// them, and a GETCHAIN answer's. Numbers as linux/netfilter/nf_tables.h has them.

/** An attribute: its type and its value, bytes or nested attributes. */
export type NftAttribute = readonly [type: number, value: Buffer | readonly NftAttribute[]];

/** Attributes as netlink lays them out (each padded to four bytes; nested ones flagged). */
export function encodeAttributes(attributes: readonly NftAttribute[]): Buffer {
  return Buffer.concat(
    attributes.map(([type, value]) => {
      const nested = !Buffer.isBuffer(value);
      const bytes = nested ? encodeAttributes(value) : value;
      const out = Buffer.alloc((4 + bytes.length + 3) & ~3);
      out.writeUInt16LE(4 + bytes.length, 0);
      out.writeUInt16LE(type | (nested ? 0x8000 : 0), 2);
      bytes.copy(out, 4);
      return out;
    }),
  );
}

/** A big-endian u32 value. */
export function be32(value: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(value | 0);
  return b;
}

/** A NUL-terminated string value. */
export function cstring(value: string): Buffer {
  return Buffer.from(`${value}\0`);
}

/** One expression: its name and data. */
export interface NftExpression {
  readonly name: string;
  readonly data: readonly NftAttribute[];
}

const data = (value: Buffer): NftAttribute[] => [[1, value]];

/** Expression builders, register 1 unless said. */
export const expr = {
  /** A payload load: base 1 the network header, 2 the transport header. */
  payload: (base: number, offset: number, length: number, register = 1): NftExpression => ({
    name: 'payload',
    data: [
      [1, be32(register)],
      [2, be32(base)],
      [3, be32(offset)],
      [4, be32(length)],
    ],
  }),
  /** A meta load: key 3 the mark, 16 the layer-4 protocol. */
  meta: (key: number, register = 1): NftExpression => ({
    name: 'meta',
    data: [
      [2, be32(key)],
      [1, be32(register)],
    ],
  }),
  /** A comparison: op 0 equal, 1 not equal. */
  cmp: (op: number, value: Buffer, register = 1): NftExpression => ({
    name: 'cmp',
    data: [
      [1, be32(register)],
      [2, be32(op)],
      [3, data(value)],
    ],
  }),
  /** A mask (xor zero). */
  bitwise: (mask: Buffer, register = 1): NftExpression => ({
    name: 'bitwise',
    data: [
      [1, be32(register)],
      [2, be32(register)],
      [3, be32(mask.length)],
      [6, be32(0)],
      [4, data(mask)],
      [5, data(Buffer.alloc(mask.length))],
    ],
  }),
  match: (name: string, revision: number, info: Buffer): NftExpression => ({
    name: 'match',
    data: [
      [1, cstring(name)],
      [2, be32(revision)],
      [3, info],
    ],
  }),
  target: (name: string, revision: number, info: Buffer): NftExpression => ({
    name: 'target',
    data: [
      [1, cstring(name)],
      [2, be32(revision)],
      [3, info],
    ],
  }),
  /** A verdict: 1 accept, 0 drop, -5 return, -3 jump and -4 goto (with `chain`). */
  verdict: (code: number, chain?: string): NftExpression => ({
    name: 'immediate',
    data: [
      [1, be32(0)],
      [2, [[2, [[1, be32(code)], ...(chain === undefined ? [] : [[2, cstring(chain)] as const])]]]],
    ],
  }),
  counter: (): NftExpression => ({
    name: 'counter',
    data: [
      [1, Buffer.alloc(8)],
      [2, Buffer.alloc(8)],
    ],
  }),
};

/** The comment match's info: the text in 256 bytes. */
export function commentInfo(text: string): Buffer {
  const info = Buffer.alloc(256);
  info.write(text, 'utf8');
  return info;
}

/** A GETRULE answer's body: nfgenmsg, table, chain, handle, expressions, then `extra`. */
export function ruleMessage(rule: {
  readonly table: string;
  readonly chain: string;
  readonly handle: bigint;
  readonly exprs: readonly NftExpression[];
  readonly extra?: readonly NftAttribute[];
}): Buffer {
  const handle = Buffer.alloc(8);
  handle.writeBigUInt64BE(rule.handle);
  return Buffer.concat([
    Buffer.from([2, 0, 0, 0]),
    encodeAttributes([
      [1, cstring(rule.table)],
      [2, cstring(rule.chain)],
      [3, handle],
      [
        4,
        rule.exprs.map((e): NftAttribute => [
          1,
          [
            [1, cstring(e.name)],
            [2, e.data],
          ],
        ]),
      ],
      ...(rule.extra ?? []),
    ]),
  ]);
}

/** A GETCHAIN answer's body; a base chain has a hook and a policy (0 drop, 1 accept). */
export function chainMessage(chain: {
  readonly table: string;
  readonly name: string;
  readonly hook?: number;
  readonly policy?: number;
}): Buffer {
  return Buffer.concat([
    Buffer.from([2, 0, 0, 0]),
    encodeAttributes([
      [1, cstring(chain.table)],
      [3, cstring(chain.name)],
      ...(chain.hook === undefined
        ? []
        : ([
            [
              4,
              [
                [1, be32(chain.hook)],
                [2, be32(-100)],
              ],
            ],
            [5, be32(chain.policy ?? 1)],
          ] as const)),
    ]),
  ]);
}
