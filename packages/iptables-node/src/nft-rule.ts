// A rule of a GETRULE dump read back as the arguments iptables-save prints for it (after `-A
// <chain>`), for the expressions iptables-nft 1.8.9 writes for the rules the CNI plugins and
// allocnet write (docs/iptables.md, "Reading the ruleset over netlink"): addresses (`-s`, `-d`,
// with their prefix, `!`), `-p tcp|udp`, `-m tcp|udp --sport|--dport` (a transport payload), `-m
// mark`, the xt matches comment, multiport, conntrack (`--ctstate` alone) and addrtype, the
// verdicts and jumps, and the xt targets MASQUERADE (bare), MARK (`--set-xmark`) and DNAT (one
// address, one port). A rule with anything else is `opaque`: only its comment and its target are
// read. Pure: a buffer in, and what iptables-save would print is the test (nft-read's
// integration tests compare the two on the real kernel).
import {
  Attributes,
  Malformed,
  OPAQUE,
  Opaque,
  bits,
  cString,
  knownNames,
  listElements,
  nameOf,
  userComment,
} from './nft-attributes.js';
import {
  ADDRTYPE,
  CONNTRACK,
  HEADER,
  MULTIPORT,
  dnat,
  formatIPv4,
  formatIPv6,
  hostU32,
  mark,
  masquerade,
  prefixOf,
} from './nft-xt.js';
import type { Family } from './validate.js';

export { Malformed } from './nft-attributes.js';
export { formatIPv4, formatIPv6 } from './nft-xt.js';

/** A rule read back: its handle, and its arguments or, when they cannot be told, what it shows. */
export interface ReadBackRule {
  readonly handle: bigint;
  /** iptables-save's arguments after `-A <chain>`; undefined when the rule is opaque. */
  readonly spec: string[] | undefined;
  /** The first comment's text (an xt comment match, or the rule's user data), if any. */
  readonly comment: string | undefined;
  /** What the rule jumps or goes to (a chain, `ACCEPT`, an xt target's name), if anything. */
  readonly target: string | undefined;
  /** Where in `spec` its `-j` or `-g` is; undefined when it has none (or is opaque). */
  readonly targetAt?: number | undefined;
}

// linux/netfilter/nf_tables.h
const RULE_TABLE = 1;
const RULE_CHAIN = 2;
const RULE_HANDLE = 3;
const RULE_EXPRESSIONS = 4;
const RULE_POSITION = 6;
const RULE_USERDATA = 7;
const EXPR_NAME = 1;
const EXPR_DATA = 2;
const DATA_VALUE = 1;
const DATA_VERDICT = 2;
const VERDICT_CODE = 1;
const VERDICT_CHAIN = 2;
const PAYLOAD_NETWORK = 1;
const PAYLOAD_TRANSPORT = 2;
const META_MARK = 3;
const META_L4PROTO = 16;
const CMP_EQ = 0;
const CMP_NEQ = 1;
const KNOWN_RULE_ATTRIBUTES =
  (1 << RULE_TABLE) |
  (1 << RULE_CHAIN) |
  (1 << RULE_HANDLE) |
  (1 << RULE_EXPRESSIONS) |
  (1 << RULE_POSITION);

/** Verdict codes (int32): NF_DROP, NF_ACCEPT, NFT_RETURN, NFT_GOTO, NFT_JUMP. */
const VERDICTS = new Map<number, string>([
  [0, 'DROP'],
  [1, 'ACCEPT'],
  [-5, 'RETURN'],
]);
const NFT_JUMP = -3;
const NFT_GOTO = -4;

const PROTOCOLS = new Map<number, string>([
  [6, 'tcp'],
  [17, 'udp'],
]);

/** `a`, when only the types of `allowed` (bits) are in it; else the expression is not read here. */
function only(a: Attributes, allowed: number): Attributes {
  if (!a.onlyOf(allowed)) throw OPAQUE;
  return a;
}

// One per nesting level: rule, expression, expression data, nested data, verdict.
const RULE = new Attributes();
const EXPR = new Attributes();
const DATA = new Attributes();
const NESTED = new Attributes();
const VERDICT = new Attributes();

const DATA_VALUE_ONLY = 1 << DATA_VALUE;
const DATA_VERDICT_ONLY = 1 << DATA_VERDICT;
const VERDICT_ATTRIBUTES = (1 << VERDICT_CODE) | (1 << VERDICT_CHAIN);

/** The value of a data attribute (NFTA_DATA_VALUE inside `type` of `a`), as [start, end). */
function dataValue(a: Attributes, type: number): { start: number; end: number } {
  if (!a.has(type)) throw OPAQUE;
  const d = only(NESTED.read(a.buf, a.from[type] as number, a.to[type] as number), DATA_VALUE_ONLY);
  if (!d.has(DATA_VALUE)) throw OPAQUE;
  return { start: d.from[DATA_VALUE] as number, end: d.to[DATA_VALUE] as number };
}

/** What a load (payload or meta) put in a register, and the mask applied to it since. */
interface Loaded {
  readonly register: number;
  readonly base?: number;
  readonly offset?: number;
  readonly length?: number;
  readonly meta?: number;
  mask?: Buffer;
}

/** What a rule's expressions say, in the pieces iptables-save prints in its own order. */
class Reading {
  source: string[] | undefined;
  destination: string[] | undefined;
  protocol: string | undefined;
  protocolNegated = false;
  readonly matches: string[][] = [];
  /** The last port match (tcp or udp), and whether it has its destination port yet. */
  portMatch: { readonly options: string[]; hasDestination: boolean } | undefined;
  target: string[] | undefined;
  loaded: Loaded | undefined;
  comment: string | undefined;
  targetName: string | undefined;

  constructor(readonly family: Family) {}

  spec(): string[] {
    if (this.loaded !== undefined) throw OPAQUE; // a load nothing compared
    // Word by word: a spread is a call of its own, and a reap reads back thousands of rules in a
    // process whose code is not compiled yet (docs/iptables.md).
    const spec: string[] = [];
    const add = (words: readonly string[] | undefined) => {
      if (words !== undefined) for (let i = 0; i < words.length; i++) spec.push(words[i] as string);
    };
    add(this.source);
    add(this.destination);
    if (this.protocol !== undefined) {
      if (this.protocolNegated) spec.push('!');
      spec.push('-p', this.protocol);
    }
    for (const m of this.matches) add(m);
    add(this.target);
    return spec;
  }
}

const PAYLOAD_ATTRIBUTES = bits(1, 2, 3, 4); // DREG, BASE, OFFSET, LEN
const META_ATTRIBUTES = bits(1, 2); // DREG, KEY (SREG: a set, not a match)
const BITWISE_ATTRIBUTES = bits(1, 2, 3, 4, 5, 6); // SREG, DREG, LEN, MASK, XOR, OP
const CMP_ATTRIBUTES = bits(1, 2, 3); // SREG, OP, DATA
const XT_ATTRIBUTES = bits(1, 2, 3); // NAME, REV, INFO
const IMMEDIATE_ATTRIBUTES = bits(1, 2); // DREG, DATA

function payload(r: Reading, a: Attributes) {
  only(a, PAYLOAD_ATTRIBUTES);
  const register = a.u32(1);
  const base = a.u32(2);
  const offset = a.u32(3);
  const length = a.u32(4);
  if (register === undefined || base === undefined || offset === undefined || !length) throw OPAQUE;
  r.loaded = { register, base, offset, length };
}

function meta(r: Reading, a: Attributes) {
  only(a, META_ATTRIBUTES);
  const register = a.u32(1);
  const key = a.u32(2);
  if (register === undefined || key === undefined) throw OPAQUE;
  r.loaded = { register, meta: key };
}

function bitwise(r: Reading, a: Attributes) {
  only(a, BITWISE_ATTRIBUTES);
  const loaded = r.loaded;
  if (loaded === undefined || loaded.mask !== undefined) throw OPAQUE;
  if (a.u32(1) !== loaded.register || a.u32(2) !== loaded.register) throw OPAQUE;
  if ((a.u32(6) ?? 0) !== 0) throw OPAQUE; // a shift, not a mask
  const length = a.u32(3);
  const mask = dataValue(a, 4);
  const xor = dataValue(a, 5);
  if (length !== mask.end - mask.start || length !== xor.end - xor.start) throw OPAQUE;
  for (let i = xor.start; i < xor.end; i++) if (a.buf[i] !== 0) throw OPAQUE;
  loaded.mask = Buffer.from(a.buf.subarray(mask.start, mask.end));
}

/** `-s`/`-d` from a network-header load compared with an address. */
function address(
  r: Reading,
  loaded: Loaded,
  negated: boolean,
  buf: Buffer,
  value: { start: number; end: number },
) {
  const h = HEADER[r.family];
  const which =
    loaded.offset === h.source
      ? 'source'
      : loaded.offset === h.destination
        ? 'destination'
        : undefined;
  const length = loaded.length as number;
  const { start, end } = value;
  if (which === undefined || length > h.length || end - start !== length || r[which] !== undefined)
    throw OPAQUE;
  const mask = loaded.mask;
  const prefix = mask === undefined ? length * 8 : prefixOf(mask);
  if (prefix === undefined || (mask !== undefined && mask.length !== length)) throw OPAQUE;
  let host: string;
  // A whole IPv4 address is printed from the message: no buffer of its own.
  if (r.family === 'ipv4' && length === 4) host = formatIPv4(buf, start);
  else {
    // The bytes past a masked load's length are zero.
    const full = Buffer.alloc(h.length);
    buf.copy(full, 0, start, end);
    host = r.family === 'ipv4' ? formatIPv4(full) : formatIPv6(full);
  }
  const flag = which === 'source' ? '-s' : '-d';
  r[which] = negated ? ['!', flag, `${host}/${prefix}`] : [flag, `${host}/${prefix}`];
}

/** `-m tcp|udp [!] --sport|--dport N` from a transport-header load compared with a port. */
function port(r: Reading, loaded: Loaded, negated: boolean, value: Buffer) {
  if (loaded.mask !== undefined || loaded.length !== 2 || value.length !== 2) throw OPAQUE;
  if (r.protocol === undefined || r.protocolNegated) throw OPAQUE;
  const destination = loaded.offset === 2;
  if (!destination && loaded.offset !== 0) throw OPAQUE;
  const option = [
    ...(negated ? ['!'] : []),
    destination ? '--dport' : '--sport',
    String(value.readUInt16BE(0)),
  ];
  const last = r.portMatch;
  // One tcp match holds both ports, the source's printed first.
  if (
    last !== undefined &&
    r.matches.at(-1) === last.options &&
    !last.hasDestination &&
    destination
  ) {
    last.options.push(...option);
    last.hasDestination = true;
    return;
  }
  const options = ['-m', r.protocol, ...option];
  r.matches.push(options);
  r.portMatch = { options, hasDestination: destination };
}

function cmp(r: Reading, a: Attributes) {
  only(a, CMP_ATTRIBUTES);
  const loaded = r.loaded;
  r.loaded = undefined;
  if (loaded === undefined || a.u32(1) !== loaded.register) throw OPAQUE;
  const op = a.u32(2);
  if (op !== CMP_EQ && op !== CMP_NEQ) throw OPAQUE;
  const negated = op === CMP_NEQ;
  const at = dataValue(a, 3);
  if (loaded.base === PAYLOAD_NETWORK) {
    address(r, loaded, negated, a.buf, at);
    return;
  }
  const value = a.buf.subarray(at.start, at.end);
  if (loaded.base === PAYLOAD_TRANSPORT) {
    port(r, loaded, negated, value);
    return;
  }
  if (loaded.meta === META_L4PROTO) {
    const name = value.length === 1 ? PROTOCOLS.get(value[0] as number) : undefined;
    if (name === undefined || loaded.mask !== undefined || r.protocol !== undefined) throw OPAQUE;
    r.protocol = name;
    r.protocolNegated = negated;
    return;
  }
  if (loaded.meta === META_MARK && value.length === 4) {
    const mark = hostU32(value, 0);
    const mask =
      loaded.mask === undefined
        ? 0xffffffff
        : loaded.mask.length === 4
          ? hostU32(loaded.mask, 0)
          : undefined;
    if (mask === undefined) throw OPAQUE;
    const hex = (n: number) => `0x${n.toString(16)}`;
    const shown = mask === 0xffffffff ? hex(mark) : `${hex(mark)}/${hex(mask)}`;
    r.matches.push(['-m', 'mark', ...(negated ? ['!'] : []), '--mark', shown]);
    return;
  }
  throw OPAQUE;
}

/** An xt match's or target's name and revision; its info is `a`'s attribute 3. */
function xt(a: Attributes): { name: string; revision: number } {
  only(a, XT_ATTRIBUTES);
  const name = nameOf(a, 1, XT_NAMES);
  const revision = a.u32(2);
  if (name === undefined || revision === undefined || !a.has(3)) throw OPAQUE;
  return { name, revision };
}

/** The xt info (attribute 3) as its own buffer view. */
const infoOf = (a: Attributes) => a.buf.subarray(a.from[3], a.to[3]);

/** The comment of an xt comment match (`a` read, revision 0). */
const commentOf = (a: Attributes) => cString(a.buf, a.from[3] as number, a.to[3] as number, 'utf8');

function match(r: Reading, a: Attributes) {
  const { name, revision } = xt(a);
  if (name === 'comment' && revision === 0) {
    const comment = commentOf(a);
    r.comment ??= comment;
    r.matches.push(['-m', 'comment', '--comment', comment]);
  } else if (name === 'multiport' && revision === 1) r.matches.push(MULTIPORT.read(infoOf(a)));
  else if (name === 'conntrack' && revision === 3) r.matches.push(CONNTRACK.read(infoOf(a)));
  else if (name === 'addrtype' && revision === 1) r.matches.push(ADDRTYPE.read(infoOf(a)));
  else throw OPAQUE;
}

function target(r: Reading, a: Attributes) {
  const { name, revision } = xt(a);
  r.targetName ??= name;
  if (r.target !== undefined) throw OPAQUE;
  const info = infoOf(a);
  if (name === 'MASQUERADE' && revision === 0) r.target = masquerade(r.family, info);
  else if (name === 'MARK' && revision === 2) r.target = mark(info);
  else if (name === 'DNAT' && revision === 2) r.target = dnat(r.family, info);
  else throw OPAQUE;
}

function immediate(r: Reading, a: Attributes) {
  only(a, IMMEDIATE_ATTRIBUTES);
  if (a.u32(1) !== 0 || !a.has(2)) throw OPAQUE; // not the verdict register
  const data = only(NESTED.read(a.buf, a.from[2] as number, a.to[2] as number), DATA_VERDICT_ONLY);
  if (!data.has(DATA_VERDICT)) throw OPAQUE;
  const v = VERDICT.read(a.buf, data.from[DATA_VERDICT] as number, data.to[DATA_VERDICT] as number);
  only(v, VERDICT_ATTRIBUTES);
  if (v.length(VERDICT_CODE) !== 4) throw OPAQUE;
  const n = a.buf.readInt32BE(v.from[VERDICT_CODE]);
  const name = n === NFT_JUMP || n === NFT_GOTO ? v.text(VERDICT_CHAIN) : VERDICTS.get(n);
  if (name === undefined) throw OPAQUE;
  r.targetName ??= name;
  if (r.target !== undefined) throw OPAQUE;
  r.target = [n === NFT_GOTO ? '-g' : '-j', name];
}

/** The expression names and the xt matches' and targets' names read here. */
const EXPRESSION_NAMES = knownNames(
  'payload meta bitwise cmp match immediate target counter'.split(' '),
);
const XT_NAMES = knownNames('comment multiport conntrack addrtype MASQUERADE MARK DNAT'.split(' '));

/** Reads expression `i` of `exprs` into `EXPR` and its data into `DATA`; resolves its name. */
function expressionAt(buf: Buffer, exprs: readonly number[], i: number): string | undefined {
  EXPR.read(buf, exprs[i] as number, exprs[i + 1] as number);
  const name = nameOf(EXPR, EXPR_NAME, EXPRESSION_NAMES);
  if (EXPR.has(EXPR_DATA))
    DATA.read(buf, EXPR.from[EXPR_DATA] as number, EXPR.to[EXPR_DATA] as number);
  else DATA.read(buf, 0, 0);
  return name;
}

/** Comment and target of the expressions from `i` on, which a read-back did not get to. */
function glance(r: Reading, buf: Buffer, exprs: readonly number[], i: number) {
  for (; i < exprs.length; i += 2) {
    const name = expressionAt(buf, exprs, i);
    try {
      if (name === 'match') {
        if (xt(DATA).name === 'comment') r.comment ??= commentOf(DATA);
      } else if (name === 'target') r.targetName ??= xt(DATA).name;
      else if (name === 'immediate') {
        r.target = undefined;
        immediate(r, DATA);
      }
    } catch (error) {
      // An expression of an unknown shape shows nothing: the rule stays opaque.
      if (!(error instanceof Opaque)) throw error;
    }
  }
}

/**
 * Reads back a rule of a GETRULE answer (`body` from its nfgenmsg on). Throws `Malformed` when the
 * message is not one nf_tables sends.
 */
export function readBackRule(body: Buffer, family: Family): ReadBackRule {
  const rule = RULE.read(body, 4, body.length);
  if (rule.length(RULE_HANDLE) !== 8) throw new Malformed('a rule without its handle');
  const handle = body.readBigUInt64BE(rule.from[RULE_HANDLE]);
  const exprs = rule.has(RULE_EXPRESSIONS)
    ? listElements(body, rule.from[RULE_EXPRESSIONS] as number, rule.to[RULE_EXPRESSIONS] as number)
    : [];
  const r = new Reading(family);
  if (rule.has(RULE_USERDATA)) {
    const comment = userComment(
      body,
      rule.from[RULE_USERDATA] as number,
      rule.to[RULE_USERDATA] as number,
    );
    if (comment !== undefined) r.comment = comment;
  }
  // Anything but table, chain, handle, expressions and position (user data, compat) is not
  // printed here: the rule is opaque.
  const exact = (rule.present & ~KNOWN_RULE_ATTRIBUTES) === 0;
  let i = 0;
  try {
    if (!exact) throw OPAQUE;
    for (; i < exprs.length; i += 2) {
      const name = expressionAt(body, exprs, i);
      if (name === 'counter') continue;
      if (name === 'payload') payload(r, DATA);
      else if (name === 'meta') meta(r, DATA);
      else if (name === 'bitwise') bitwise(r, DATA);
      else if (name === 'cmp') cmp(r, DATA);
      else if (name === 'match') match(r, DATA);
      else if (name === 'immediate') immediate(r, DATA);
      else if (name === 'target') target(r, DATA);
      else throw OPAQUE;
    }
    const spec = r.spec();
    const targetAt = r.target === undefined ? undefined : spec.length - r.target.length;
    return { handle, spec, comment: r.comment, target: r.targetName, targetAt };
  } catch (error) {
    if (!(error instanceof Opaque)) throw error;
    glance(r, body, exprs, i);
    return { handle, spec: undefined, comment: r.comment, target: r.targetName };
  }
}
