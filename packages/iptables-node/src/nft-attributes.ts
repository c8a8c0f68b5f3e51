// Netlink attributes read in place: where each attribute's value is in its buffer, by type,
// without a buffer or a map per attribute (a reap's read goes through some 200,000 of them).
// Also a nested list's elements, the comment in a rule's user data, and names told by their
// bytes. Pure. nft-rule.ts and nft-messages.ts read nf_tables answers with it.

/** The rule cannot be read back as arguments (its comment and target may still be). */
export class Opaque extends Error {}
export const OPAQUE = new Opaque();

/** Malformed attributes: the message is not one nf_tables sends. */
export class Malformed extends Error {}

/**
 * The attributes of `buf[start, end)`, by type (the first of each; types 1–15, the only ones
 * read here): which are present, and where each one's value starts and ends. One instance per nesting
 * level, reused: a dump of 20,000 rules is read without a buffer or a map per attribute.
 */
export class Attributes {
  readonly from = new Int32Array(16);
  readonly to = new Int32Array(16);
  /** Types present, as bits; bit 16 for any type above 15. */
  present = 0;
  buf: Buffer = Buffer.alloc(0);

  read(buf: Buffer, start: number, end: number): this {
    this.buf = buf;
    let present = 0;
    let at = start;
    while (at < end) {
      if (at + 4 > end) throw new Malformed('a truncated attribute');
      const len = buf.readUInt16LE(at);
      if (len < 4 || at + len > end) throw new Malformed('an attribute longer than its message');
      const type = buf.readUInt16LE(at + 2) & 0x3fff;
      if (type > 15) present |= 1 << 16;
      else if ((present & (1 << type)) === 0) {
        this.from[type] = at + 4;
        this.to[type] = at + len;
        present |= 1 << type;
      }
      at += (len + 3) & ~3;
    }
    this.present = present;
    return this;
  }

  has(type: number): boolean {
    return (this.present & (1 << type)) !== 0;
  }

  /** Whether only the types of `allowed` (bits) are present. */
  onlyOf(allowed: number): boolean {
    return (this.present & ~allowed) === 0;
  }

  length(type: number): number {
    return this.has(type) ? (this.to[type] as number) - (this.from[type] as number) : -1;
  }

  /** A big-endian u32 attribute; undefined when absent or not four bytes. */
  u32(type: number): number | undefined {
    return this.length(type) === 4 ? this.buf.readUInt32BE(this.from[type]) : undefined;
  }

  /** A NUL-terminated string attribute. */
  text(type: number, encoding: BufferEncoding = 'latin1'): string | undefined {
    if (!this.has(type)) return undefined;
    return cString(this.buf, this.from[type] as number, this.to[type] as number, encoding);
  }
}

/** Bits of attribute types, for `Attributes.only`. */
export const bits = (...types: number[]) => types.reduce((b, t) => b | (1 << t), 0);

/** `buf[start, end)` up to its first NUL as text. */
export function cString(buf: Buffer, start: number, end: number, encoding: BufferEncoding): string {
  const nul = buf.indexOf(0, start);
  return buf.toString(encoding, start, nul < 0 || nul > end ? end : nul);
}

/** Where each element of the nested list `buf[start, end)` is: [start, end) pairs. */
export function listElements(buf: Buffer, start: number, end: number): number[] {
  const out: number[] = [];
  for (let at = start; at < end;) {
    if (at + 4 > end) throw new Malformed('a truncated list');
    const len = buf.readUInt16LE(at);
    if (len < 4 || at + len > end) throw new Malformed('a list element longer than its list');
    out.push(at + 4, at + len);
    at += (len + 3) & ~3;
  }
  return out;
}

/** The comment (type 0) in a rule's user data (libnftnl's TLVs: type, length, value), if any. */
export function userComment(buf: Buffer, start: number, end: number): string | undefined {
  for (let at = start; at + 2 <= end;) {
    const type = buf[at] as number;
    const len = buf[at + 1] as number;
    if (at + 2 + len > end) throw new Malformed('a truncated user data');
    if (type === 0) return cString(buf, at + 2, at + 2 + len, 'utf8');
    at += 2 + len;
  }
  return undefined;
}

/** Names by their first byte, with their bytes (NUL-terminated) to compare against. */
export type KnownNames = ReadonlyMap<
  number,
  readonly { readonly name: string; readonly bytes: Buffer }[]
>;

export function knownNames(names: readonly string[]): KnownNames {
  const out = new Map<number, { name: string; bytes: Buffer }[]>();
  for (const name of names) {
    const list = out.get(name.charCodeAt(0)) ?? [];
    list.push({ name, bytes: Buffer.from(`${name}\0`) });
    out.set(name.charCodeAt(0), list);
  }
  return out;
}

/**
 * A string attribute of `a` that is one of `names`, as that name (a few byte compares instead of
 * a string made each time: a reap reads some 20,000 names); else read as text.
 */
export function nameOf(a: Attributes, type: number, names: KnownNames): string | undefined {
  if (!a.has(type)) return undefined;
  const start = a.from[type] as number;
  const end = a.to[type] as number;
  for (const known of names.get(a.buf[start] as number) ?? []) {
    if (end - start !== known.bytes.length) continue;
    let same = true;
    for (let i = 1; same && i < known.bytes.length; i++) same = a.buf[start + i] === known.bytes[i];
    if (same) return known.name;
  }
  return a.text(type);
}
