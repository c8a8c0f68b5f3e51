import { removalBatch } from './nft-messages.js';
import type { NftOp } from './nft-messages.js';

/** The messages of a batch, read plainly: type, flags, seq, family and each attribute's bytes. */
function messagesOf(bytes: Buffer) {
  const out: { type: number; flags: number; seq: number; family: number; attrs: [number, Buffer][] }[] = [];
  for (let at = 0; at < bytes.length; ) {
    const len = bytes.readUInt32LE(at);
    const attrs: [number, Buffer][] = [];
    for (let a = at + 20; a < at + len; ) {
      const alen = bytes.readUInt16LE(a);
      attrs.push([bytes.readUInt16LE(a + 2), bytes.subarray(a + 4, a + alen)]);
      const padded = (alen + 3) & ~3;
      // Padding is zero.
      expect([...bytes.subarray(a + alen, a + padded)].every((b) => b === 0)).toBe(true);
      a += padded;
    }
    out.push({
      type: bytes.readUInt16LE(at + 4),
      flags: bytes.readUInt16LE(at + 6),
      seq: bytes.readUInt32LE(at + 8),
      family: bytes.readUInt8(at + 16),
      attrs,
    });
    expect(len % 4).toBe(0);
    at += len;
  }
  return out;
} // prettier-ignore

const text = (b: Buffer) => {
  expect(b.at(-1)).toBe(0);
  return b.subarray(0, -1).toString();
};

describe('removalBatch', () => {
  it('writes every change with its table, chain and handle, names of every padding, repeated', () => {
    const chains = ['A', 'AB', 'ABC', 'ABCD', 'CNI-DN-0123456789abcdef01234'];
    const ops: NftOp[] = [];
    for (let round = 0; round < 3; round++)
      for (const chain of chains) {
        ops.push({ kind: 'deleteRule', table: 'nat', chain, handle: BigInt(round * 1000 + chain.length) });
        ops.push({ kind: 'flushChain', table: 'filter', chain });
        ops.push({ kind: 'deleteChain', table: 'mangle', chain });
      } // prettier-ignore
    const { bytes, first, last } = removalBatch('ipv6', 77, ops);
    const messages = messagesOf(bytes);
    expect(messages).toHaveLength(ops.length + 2);
    const [begin, ...rest] = messages;
    const end = rest.pop();
    expect(begin?.type).toBe(0x10);
    expect(begin?.seq).toBe(first);
    expect(begin?.attrs.map(([type, value]) => [type, value.readUInt32BE(0)])).toEqual([[1, 77]]);
    expect(end?.type).toBe(0x11);
    expect(end?.attrs).toEqual([]);
    const read = rest.map((m, i): NftOp => {
      expect(m.family).toBe(10);
      // Only the last change asks for an ack.
      expect(m.flags).toBe(i === ops.length - 1 ? 0x5 : 0x1);
      const [table, chain, handle] = m.attrs;
      if (m.type === ((10 << 8) | 5))
        return { kind: 'deleteChain', table: text(table?.[1] as Buffer) as 'mangle', chain: text(chain?.[1] as Buffer) };
      expect(m.type).toBe((10 << 8) | 8);
      expect([table?.[0], chain?.[0]]).toEqual([1, 2]);
      if (handle === undefined)
        return { kind: 'flushChain', table: text(table?.[1] as Buffer) as 'filter', chain: text(chain?.[1] as Buffer) };
      expect(handle[0]).toBe(3);
      return { kind: 'deleteRule', table: text(table?.[1] as Buffer) as 'nat', chain: text(chain?.[1] as Buffer), handle: handle[1].readBigUInt64BE(0) };
    }); // prettier-ignore
    expect(read).toEqual(ops);
    expect(rest.at(-1)?.seq).toBe(last);
  });
});
