import { StringDecoder } from 'node:string_decoder';
import { createPause } from '@allocnet/base';
import { IptablesError } from './errors.js';
import { eachStatement, splitArgs, splitStatements } from './quote.js';
import type { Statement } from './quote.js';
import { ruleFromStatement } from './rule.js';
import type { Rule } from './rule.js';
import { TABLES } from './validate.js';
import type { Table } from './validate.js';

/** A chain as iptables-save declares it (`:NAME POLICY [packets:bytes]`) or `-S` lists it. */
export interface Chain {
  readonly name: string;
  /** The built-in chain's policy (`ACCEPT`, `DROP`); undefined for a user-defined chain. */
  readonly policy: string | undefined;
}

/** One table of iptables-save output. */
export interface SavedTable {
  readonly name: Table;
  readonly chains: readonly Chain[];
  readonly rules: readonly Rule[];
  /**
   * Where each of `rules` is in its chain (0-based, the rules a `keep` filter left unparsed
   * counted), and how many rules each chain has: what a removal by position needs (nft.ts).
   * Set by `parseIptablesSave`.
   */
  readonly places?: {
    readonly positions: readonly number[];
    readonly sizes: ReadonlyMap<string, number>;
  };
}

/** What `iptables -S` prints for a table or a chain. */
export interface RuleListing {
  readonly chains: readonly Chain[];
  readonly rules: readonly Rule[];
}

/** The `parse` error for text that is not iptables output; `line` 0 is the end of the text. */
function unreadable(message: string, line: number): IptablesError {
  return new IptablesError(message, { code: 'parse', line });
}

/** The same on a statement: `line N: <what>`. */
function unexpected(statement: Statement, what: string): IptablesError {
  return unreadable(`line ${statement.line}: ${what}`, statement.line);
}

/** The rule of an `-A <chain> …` statement whose `-A` is at `at` (after `[packets:bytes]`: 1). */
function parseRule(table: Table, statement: Statement, at = 0): Rule {
  const chain = statement.values[at + 1];
  if (chain === undefined) throw unexpected(statement, '-A without a chain');
  return ruleFromStatement(table, chain, statement, at + 2);
}

/** True when a line opens a quote it does not close (an argument that goes on to the next line). */
function opensQuote(line: string): boolean {
  let open = false;
  for (let i = line.indexOf('"'); i >= 0; i = line.indexOf('"', i + 1)) {
    let backslashes = 0;
    for (let k = i - 1; k >= 0 && line[k] === '\\'; k--) backslashes++;
    if (!open || backslashes % 2 === 0) open = !open;
  }
  return open;
}

/** The chain of an `-A` line (`[packets:bytes]` first or not); undefined for other lines. */
function appendedChain(line: string): string | undefined {
  const from = line.startsWith('[') ? line.indexOf(']') + 2 : 0;
  const flag = line.startsWith('-A ', from) ? 3 : line.startsWith('--append ', from) ? 9 : 0;
  if (flag === 0) return undefined;
  const end = line.indexOf(' ', from + flag);
  const chain = line.slice(from + flag, end < 0 ? undefined : end);
  // A name iptables-save had to quote (never a real chain's): read it as the parser does.
  if (!/["'\\#]/.test(chain)) return chain;
  const args = splitArgs(line.slice(from));
  return args[1];
}

interface OpenTable {
  readonly name: Table;
  readonly chains: Chain[];
  readonly rules: Rule[];
  readonly positions: number[];
  readonly sizes: Map<string, number>;
}

/**
 * One parse of iptables-save output, read in pieces of whole lines, in order: the tables read,
 * the table open, and with `keep` each table's rules per chain counted so far (the refused ones
 * counted too).
 */
class SaveReader {
  private readonly tables: SavedTable[] = [];
  private current: OpenTable | undefined;
  /** With `keep`: every table's rule count per chain, and the one of the table being read. */
  private readonly sizes = new Map<string, Map<string, number>>();
  private counts = new Map<string, number>();

  constructor(private readonly keep: ((line: string) => boolean) | undefined) {}

  /**
   * Reads `text`, whole lines, its first being line `firstLine` of the output. Throws
   * a `parse` error naming the line. With `keep`, false when a line opens a quote it does not
   * close (lines cannot be judged alone then): this reader can read no further.
   */
  read(text: string, firstLine: number): boolean {
    let places: Map<number, number> | undefined;
    let body = text;
    if (this.keep !== undefined) {
      const kept = this.keepLines(text, firstLine, this.keep);
      if (kept === undefined) return false;
      ({ text: body, places } = kept);
    }
    eachStatement(
      body,
      (statement) => {
        this.statement(statement, places);
      },
      firstLine,
    );
    return true;
  }

  /** The tables, once the output has been read to its end. */
  finish(): SavedTable[] {
    if (this.current) throw unreadable(`table ${this.current.name} has no COMMIT`, 0);
    return this.tables;
  }

  /**
   * `text` with the lines `keep` refuses blanked (so line numbers stay), table headers and COMMIT
   * always kept, and each kept rule's place in its chain by line number (the refused ones
   * counted); undefined when a quoted argument spans lines.
   */
  private keepLines(
    text: string,
    firstLine: number,
    keep: (line: string) => boolean,
  ): { text: string; places: Map<number, number> } | undefined {
    const lines = text.split('\n');
    const places = new Map<number, number>();
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i] as string;
      if (line === '') continue;
      if (line.includes('"') && opensQuote(line)) return undefined;
      if (line.startsWith('*')) {
        this.counts = new Map();
        this.sizes.set(line.slice(1), this.counts);
        continue;
      }
      if (line === 'COMMIT') continue;
      const chain = appendedChain(line);
      const place = chain === undefined ? undefined : (this.counts.get(chain) ?? 0);
      if (chain !== undefined && place !== undefined) this.counts.set(chain, place + 1);
      if (keep(line)) {
        if (place !== undefined) places.set(firstLine + i, place);
        continue;
      }
      lines[i] = '';
    }
    return { text: lines.join('\n'), places };
  }

  private statement(statement: Statement, places: Map<number, number> | undefined): void {
    const words = statement.values;
    const head = words[0] as string;
    const current = this.current;
    if (head.startsWith('*')) {
      if (current) throw unexpected(statement, `table ${head} starts before COMMIT`);
      const name = head.slice(1);
      if (!(TABLES as readonly string[]).includes(name)) {
        throw unexpected(statement, `unknown table ${JSON.stringify(name)}`);
      }
      this.current = {
        name: name as Table,
        chains: [],
        rules: [],
        positions: [],
        sizes: this.sizes.get(name) ?? new Map<string, number>(),
      };
    } else if (current === undefined) {
      throw unexpected(statement, `${JSON.stringify(head)} outside a table`);
    } else if (head === 'COMMIT') {
      const { positions, sizes, ...table } = current;
      this.tables.push({ ...table, places: { positions, sizes } });
      this.current = undefined;
    } else if (head.startsWith(':')) {
      const policy = words[1];
      if (policy === undefined) throw unexpected(statement, `chain ${head} has no policy`);
      current.chains.push({ name: head.slice(1), policy: policy === '-' ? undefined : policy });
    } else if (head === '-A' || head === '--append') {
      this.rule(current, parseRule(current.name, statement), statement.line, places);
    } else if (head.startsWith('[') && words[1] === '-A') {
      // `iptables-save -c` puts [packets:bytes] first.
      const rule = parseRule(current.name, statement, 1);
      this.rule(current, rule, statement.line, places);
    } else {
      throw unexpected(statement, `unexpected ${JSON.stringify(head)}`);
    }
  }

  /** A rule just parsed, and its place: from `places` (with `keep`), or counted here. */
  private rule(
    current: OpenTable,
    rule: Rule,
    line: number,
    places: Map<number, number> | undefined,
  ): void {
    current.rules.push(rule);
    const counted = current.sizes.get(rule.chain) ?? 0;
    current.positions.push(places?.get(line) ?? counted);
    if (places === undefined) current.sizes.set(rule.chain, counted + 1);
  }
}

/**
 * Parses iptables-save (or ip6tables-save) output into tables of chains and rules, in the order
 * printed. Counters are dropped. Throws a `parse` error naming the line for text that is not
 * iptables-save output.
 *
 * `keep`, when given, is asked about every line but table headers and COMMIT (chain declarations
 * included), and only the lines it keeps are parsed: the way to read a few rules out of a large
 * ruleset cheaply. Text with a quoted argument spanning lines is parsed whole.
 */
export function parseIptablesSave(text: string, keep?: (line: string) => boolean): SavedTable[] {
  if (keep !== undefined) {
    const reader = new SaveReader(keep);
    if (reader.read(text, 1)) return reader.finish();
  }
  const reader = new SaveReader(undefined);
  reader.read(text, 1);
  return reader.finish();
}

/**
 * `parseIptablesSave` of a command's output, read as it arrives: `write` each piece of stdout in
 * order (`CommandSpec.onStdout`, which then leaves the result's stdout empty), then `end`. The
 * lines are parsed as they come, so the parse overlaps iptables-save's writing rather than
 * starting after its last byte (with thousands of leaked allocations that wait was most of a
 * save). `write` never throws. `end` gives exactly what `parseIptablesSave` of all the pieces
 * gives (with `keep`), error included: anything the pieces could not be read as (a quote spanning
 * lines where a piece ends, a line that does not parse) is parsed again whole there, so `keep`
 * may be asked about a line twice and must answer the same. The pieces are joined into one
 * string only then: on the way that never happens, the output is never held as one string
 * (5,000 leaked allocations print 5.6 MB, and joining them holds the event loop for tens of
 * milliseconds).
 *
 * The parse runs in slices: what `write` is given waits in a queue, read `PIECE_CHARS` of whole
 * lines at a time, with a turn of the event loop whenever a slice has run a few milliseconds
 * (`createPause`, @allocnet/base): the 60,000 lines of 5,000 leaked allocations take a second
 * or two of CPU, which would otherwise hold every other call of the agent (issue 28).
 */
export interface SaveStream {
  write(chunk: Buffer): void;
  end(): Promise<SavedTable[]>;
  /** The output's first `chars` characters given so far (for messages). */
  start(chars: number): string;
}

/** Characters of whole lines read between two pause points (well under a millisecond each). */
const PIECE_CHARS = 8192;

/**
 * `pause` says when the event loop gets a turn (default: every few milliseconds, `createPause`);
 * tests give one that never pauses, or pauses at points of their choosing.
 */
export function createSaveStream(
  keep?: (line: string) => boolean,
  pause: () => Promise<void> | undefined = createPause(),
): SaveStream {
  const reader = new SaveReader(keep);
  const decoder = new StringDecoder('utf8');
  let pending = '';
  let line = 1;
  let reading = true;
  /** Every piece given, for a parse of the whole when the pieces could not be read. */
  const pieces: Buffer[] = [];
  /** Whole lines given and not read yet, and the loop reading them while there are some. */
  const queue: string[] = [];
  let pumping = false;
  let drained: Promise<void> = Promise.resolve();
  /** Whole lines; on anything unexpected the stream stops (false), for `end` to parse whole. */
  const take = (text: string): boolean => {
    try {
      reading = reader.read(text, line);
    } catch {
      reading = false;
    }
    for (let k = text.indexOf('\n'); k >= 0; k = text.indexOf('\n', k + 1)) line++;
    return reading;
  };
  /** Reads the queue in pieces of whole lines, pausing between them, until it is empty. */
  const pump = async () => {
    pumping = true;
    for (let text = queue.shift(); text !== undefined; text = queue.shift())
      for (let from = 0; reading && from < text.length;) {
        const cut = text.indexOf('\n', from + PIECE_CHARS);
        const to = cut < 0 ? text.length : cut + 1;
        take(text.slice(from, to));
        from = to;
        // Synchronous until a slice has run its time: a piece is read as it comes.
        const turn = pause();
        if (turn !== undefined) await turn;
      }
    pumping = false;
  };
  const enqueue = (text: string) => {
    queue.push(text);
    if (!pumping) drained = pump();
  };
  return {
    write(chunk) {
      pieces.push(chunk);
      if (!reading) return;
      const text = decoder.write(chunk);
      const all = pending + text;
      const cut = all.lastIndexOf('\n');
      if (cut < 0) {
        pending = all;
        return;
      }
      pending = all.slice(cut + 1);
      enqueue(all.slice(0, cut + 1));
    },
    async end() {
      if (reading) {
        const last = pending + decoder.end();
        if (last !== '') enqueue(last);
        // `take` may have stopped the reading while the queue was read.
        if (await drained.then(() => reading)) {
          try {
            return reader.finish();
          } catch {
            // parsed whole below, for the same error
          }
        }
      }
      return parseIptablesSave(Buffer.concat(pieces).toString('utf8'), keep);
    },
    start(chars) {
      const head: Buffer[] = [];
      let bytes = 0;
      // UTF-8 takes at most 4 bytes a character: enough pieces for `chars` characters.
      for (const piece of pieces) {
        if (bytes >= chars * 4) break;
        head.push(piece);
        bytes += piece.length;
      }
      return Buffer.concat(head).toString('utf8').slice(0, chars);
    },
  };
}

/** Parses `iptables -t <table> -S [chain]` output: `-P` and `-N` lines are chains, `-A` rules. */
export function parseRuleListing(table: Table, text: string, memo?: RuleMemo): RuleListing {
  if (memo !== undefined && text.length >= memo.minChars) {
    const fast = parseLinesWithMemo(table, text, memo);
    if (fast !== undefined) return fast;
  }
  const chains: Chain[] = [];
  const rules: Rule[] = [];
  for (const statement of splitStatements(text)) {
    const [head, name, policy] = statement.values;
    if (head === '-P' && name !== undefined && policy !== undefined) {
      chains.push({ name, policy });
    } else if (head === '-N' && name !== undefined) {
      chains.push({ name, policy: undefined });
    } else if (head === '-A') {
      rules.push(parseRule(table, statement));
    } else {
      throw unexpected(statement, `unexpected ${JSON.stringify(head)}`);
    }
  }
  return { chains, rules };
}

/**
 * Rules already parsed, by table and line: a chain read again and again (a restore CHECKs a
 * thousand allocations against CNI-FORWARD's 2,000 rules) parses only the lines it has not seen,
 * and gives the same `Rule` object for the same line. Bounded: emptied when it holds `limit`.
 * Listings shorter than `minChars` are parsed directly: one allocation's chain is read once or
 * twice, and would only fill the memo.
 */
export interface RuleMemo {
  readonly rules: Map<string, Rule>;
  readonly limit: number;
  readonly minChars: number;
}

/**
 * A memo for `parseRuleListing`. The defaults (10,000 rules, 4,096 characters) hold the shared
 * chains of a few thousand allocations (CNI-FORWARD has two rules each) within a bounded heap,
 * and leave short listings (one allocation's chain) to be parsed directly.
 */
export function createRuleMemo(options: { limit?: number; minChars?: number } = {}): RuleMemo {
  return { rules: new Map(), limit: options.limit ?? 10_000, minChars: options.minChars ?? 4096 };
}

/**
 * `parseRuleListing` line by line through the memo; undefined when a line cannot be read alone
 * (a quote spanning lines) or does not parse, for the whole parse to say why.
 */
function parseLinesWithMemo(table: Table, text: string, memo: RuleMemo): RuleListing | undefined {
  const chains: Chain[] = [];
  const rules: Rule[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const key = `${table}\0${line}`;
    const known = memo.rules.get(key);
    if (known !== undefined) {
      rules.push(known);
      continue;
    }
    if (line.includes('"') && opensQuote(line)) return undefined;
    let one: RuleListing;
    try {
      one = parseRuleListing(table, line);
    } catch {
      return undefined;
    }
    chains.push(...one.chains);
    for (const rule of one.rules) {
      if (memo.rules.size >= memo.limit) memo.rules.clear();
      memo.rules.set(key, rule);
      rules.push(rule);
    }
  }
  return { chains, rules };
}
