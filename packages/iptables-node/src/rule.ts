import { IptablesError } from './errors.js';
import type { Statement } from './quote.js';
import type { Table } from './validate.js';

/** An option inside a match or a target, e.g. `--comment "x"` or `! -s 10.0.0.0/8`. */
export interface RuleOption {
  /** As iptables printed it: `-s`, `--comment`, `--to-destination`. */
  readonly option: string;
  /** True when `!` came before the option. */
  readonly negated: boolean;
  readonly values: readonly string[];
}

/** One match: iptables' built-in one (`module` undefined: -s -d -p -i -o -f) or a `-m` module. */
export interface RuleMatch {
  readonly module: string | undefined;
  readonly options: readonly RuleOption[];
}

/** What `-j` (jump) or `-g` (goto) names, with its own options (`--to-destination …`). */
export interface RuleTarget {
  readonly name: string;
  readonly goto: boolean;
  readonly options: readonly RuleOption[];
}

/** One rule as iptables-save or `iptables -S` prints it. */
export interface Rule {
  readonly table: Table;
  readonly chain: string;
  /**
   * The arguments after `-A <chain>`, unquoted: exactly the argv that `-C`, `-D` or `-A` take
   * for this rule, and what `IptablesBatch.deleteRule` writes back.
   */
  readonly spec: readonly string[];
  readonly matches: readonly RuleMatch[];
  /** The first `-m comment --comment` value, if any. */
  readonly comment: string | undefined;
  readonly target: RuleTarget | undefined;
}

/** The `parse` error for a rule that iptables would not print, naming its line. */
function refused(line: number, what: string): IptablesError {
  return new IptablesError(`line ${line}: ${what}`, { code: 'parse', line });
}

// Built-in matches; everything else comes after `-m <module>`.
const BUILTIN_OPTIONS = new Set([
  '-s', '--source', '-d', '--destination', '-p', '--protocol',
  '-i', '--in-interface', '-o', '--out-interface', '-f', '--fragment',
]); // prettier-ignore
// Options that always take exactly one value, even one that starts with "-" (iptables-save prints
// a comment such as "-x" bare). Other options take the values up to the next option.
const ONE_VALUE_OPTIONS = new Set([
  '-s', '--source', '-d', '--destination', '-p', '--protocol',
  '-i', '--in-interface', '-o', '--out-interface', '--comment',
]); // prettier-ignore
const MODULE_FLAGS = new Set(['-m', '--match']);
const JUMP_FLAGS = new Set(['-j', '--jump']);
const GOTO_FLAGS = new Set(['-g', '--goto']);

/** The arguments of a rule's statement, unquoted, and which of them were quoted. */
type Args = Pick<Statement, 'values' | 'quoted'>;

function isOption(args: Args, i: number): boolean {
  const value = args.values[i] as string;
  return args.quoted[i] !== true && value.length > 1 && value.startsWith('-');
}

function isNegation(args: Args, i: number): boolean {
  return args.quoted[i] !== true && args.values[i] === '!';
}

/** The empty list every rule without options shares (never written to: `Rule` is read-only). */
const NONE = Object.freeze([]) as unknown as never[];

/**
 * `list` in an array of its own length. One grown by `push` keeps room for 17 entries: in the
 * 45,000 rules of a reap's save of 5,000 leaks, that room was most of what the rules held (84 MB
 * against 40 MB, with `common` words and joined quotes in quote.ts; docs/iptables.md).
 */
function exact<T>(list: T[]): T[] {
  return list.length === 0 ? NONE : list.slice();
}

/**
 * Reads options from `args` starting at `start`, up to a `-m`, `-j` or `-g` (or the end), and
 * returns them (only with `keep`: otherwise it only checks them) and the index where it stopped.
 * `builtin`: only the built-in matches' options may come. `line` is the rule's, for an error.
 */
function readOptions(
  args: Args,
  start: number,
  how: { readonly stopAtModule: boolean; readonly builtin: boolean; readonly keep: boolean },
  line: number,
): { options: RuleOption[]; next: number } {
  const { values: words } = args;
  const options: RuleOption[] = [];
  let i = start;
  while (i < words.length) {
    let negated = false;
    if (isNegation(args, i)) {
      negated = true;
      i++;
      if (i >= words.length) throw refused(line, '"!" at the end of the rule');
    }
    const word = words[i] as string;
    if (
      how.stopAtModule &&
      (MODULE_FLAGS.has(word) || JUMP_FLAGS.has(word) || GOTO_FLAGS.has(word))
    ) {
      if (negated) throw refused(line, `"!" before ${word}`);
      break;
    }
    if (!isOption(args, i)) {
      throw refused(line, `value ${JSON.stringify(word)} does not follow an option`);
    }
    if (how.builtin && !BUILTIN_OPTIONS.has(word)) {
      throw refused(line, `option ${word} comes before any -m`);
    }
    i++;
    const from = i;
    if (ONE_VALUE_OPTIONS.has(word)) {
      if (i >= words.length) throw refused(line, `${word} has no value`);
      i++;
    } else {
      while (i < words.length && !isOption(args, i) && !isNegation(args, i)) i++;
    }
    if (how.keep)
      options.push({ option: word, negated, values: i === from ? NONE : words.slice(from, i) });
  }
  return { options: how.keep ? exact(options) : NONE, next: i };
}

const CHECK_BUILTIN = { stopAtModule: true, builtin: true, keep: false } as const;
const READ_BUILTIN = { stopAtModule: true, builtin: true, keep: true } as const;
const CHECK_MATCH = { stopAtModule: true, builtin: false, keep: false } as const;
const READ_MATCH = { stopAtModule: true, builtin: false, keep: true } as const;
const READ_TARGET = { stopAtModule: false, builtin: false, keep: true } as const;

/**
 * One pass over a rule's arguments from `start` (after `-A <chain>`): it throws a `parse` error
 * naming `line` where they are not a rule iptables would print, and reads the target and the
 * first comment; with `matches`, the matches too (else `matches` is empty).
 */
function readRule(args: Args, start: number, line: number, matches: boolean) {
  const { values } = args;
  const read: RuleMatch[] = [];
  let target: RuleTarget | undefined;
  let comment: string | undefined;
  let commented = false;
  const builtin = readOptions(args, start, matches ? READ_BUILTIN : CHECK_BUILTIN, line);
  if (builtin.options.length > 0) read.push({ module: undefined, options: builtin.options });
  let i = builtin.next;
  while (i < values.length) {
    const flag = values[i] as string;
    const name = values[i + 1];
    if (name === undefined) throw refused(line, `${flag} has no name`);
    if (MODULE_FLAGS.has(flag)) {
      // The first comment match's options are read always: the rule keeps its comment.
      const first = name === 'comment' && !commented;
      const module = readOptions(args, i + 2, matches || first ? READ_MATCH : CHECK_MATCH, line);
      if (first) {
        commented = true;
        comment = module.options.find((o) => o.option === '--comment')?.values[0];
      }
      if (matches) read.push({ module: name, options: module.options });
      i = module.next;
    } else {
      // -j/-g: everything after the target's name is the target's options.
      const options = readOptions(args, i + 2, READ_TARGET, line);
      target = { name, goto: GOTO_FLAGS.has(flag), options: options.options };
      i = options.next;
    }
  }
  return { matches: exact(read), comment, target };
}

/**
 * A rule read from iptables text. Its matches are read from its arguments when first asked for:
 * a reap reads every rule of a save and asks for the matches of few (docs/iptables.md, "What a
 * parsed save holds"), and a rule's matches were most of what it held.
 */
class ReadRule implements Rule {
  readonly table: Table;
  readonly chain: string;
  readonly spec: readonly string[];
  readonly comment: string | undefined;
  readonly target: RuleTarget | undefined;
  /** Which of `spec` were quoted (by index); empty when none was. */
  readonly #quoted: readonly boolean[];
  #matches: readonly RuleMatch[] | undefined;

  constructor(
    table: Table,
    chain: string,
    spec: readonly string[],
    quoted: readonly boolean[],
    read: Pick<Rule, 'comment' | 'target'>,
  ) {
    this.table = table;
    this.chain = chain;
    this.spec = spec;
    this.comment = read.comment;
    this.target = read.target;
    this.#quoted = quoted;
  }

  get matches(): readonly RuleMatch[] {
    // Checked when the rule was read: this pass cannot throw.
    this.#matches ??= readRule({ values: this.spec, quoted: this.#quoted }, 0, 0, true).matches;
    return this.#matches;
  }
}

/**
 * Builds a `Rule` from the arguments of `statement` that follow `-A <chain>` in iptables-save or
 * `iptables -S` output (from index `start` on). Throws a `parse` error naming the statement's
 * line when they are not a rule iptables would print.
 */
export function ruleFromStatement(
  table: Table,
  chain: string,
  statement: Statement,
  start: number,
): Rule {
  const read = readRule(statement, start, statement.line, false);
  const quoted = statement.quoted.length > start ? statement.quoted.slice(start) : NONE;
  return new ReadRule(table, chain, statement.values.slice(start), quoted, read);
}

/**
 * Builds a `Rule` from arguments this package wrote itself as iptables-save prints them (the
 * read-back of nft-rule.ts), without `ruleFromStatement`'s check: `comment` is their first
 * comment match's and the target starts at `targetAt` (undefined: none). None is quoted (see
 * nft-read.ts). A reap reads thousands; the check was a third of their reading in a cold process.
 */
export function knownRule(
  table: Table,
  chain: string,
  spec: readonly string[],
  comment: string | undefined,
  targetAt: number | undefined,
): Rule {
  let target: RuleTarget | undefined;
  if (targetAt !== undefined) {
    const args = { values: spec, quoted: NONE };
    const { options } = readOptions(args, targetAt + 2, READ_TARGET, 0);
    const flag = spec[targetAt] as string;
    target = { name: spec[targetAt + 1] as string, goto: GOTO_FLAGS.has(flag), options };
  }
  return new ReadRule(table, chain, spec, NONE, { comment, target });
}
