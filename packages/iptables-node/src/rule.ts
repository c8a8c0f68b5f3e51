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

/**
 * Reads options from `args` starting at `start`, up to a `-m`, `-j` or `-g` (or the end).
 * Returns the options and the index where it stopped. `line` is the rule's, for an error.
 */
function readOptions(
  args: Args,
  start: number,
  stopAtModule: boolean,
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
    if (stopAtModule && (MODULE_FLAGS.has(word) || JUMP_FLAGS.has(word) || GOTO_FLAGS.has(word))) {
      if (negated) throw refused(line, `"!" before ${word}`);
      break;
    }
    if (!isOption(args, i)) {
      throw refused(line, `value ${JSON.stringify(word)} does not follow an option`);
    }
    i++;
    let values: string[];
    if (ONE_VALUE_OPTIONS.has(word)) {
      const value = words[i];
      if (value === undefined) throw refused(line, `${word} has no value`);
      values = [value];
      i++;
    } else {
      const from = i;
      while (i < words.length && !isOption(args, i) && !isNegation(args, i)) i++;
      values = i === from ? NONE : words.slice(from, i);
    }
    options.push({ option: word, negated, values });
  }
  return { options: exact(options), next: i };
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
  const { line } = statement;
  const { values } = statement;
  const matches: RuleMatch[] = [];
  let target: RuleTarget | undefined;

  const builtin = readOptions(statement, start, true, line);
  for (const option of builtin.options) {
    if (!BUILTIN_OPTIONS.has(option.option)) {
      throw refused(line, `option ${option.option} comes before any -m`);
    }
  }
  if (builtin.options.length > 0) matches.push({ module: undefined, options: builtin.options });
  let i = builtin.next;

  while (i < values.length) {
    const flag = values[i] as string;
    const name = values[i + 1];
    if (name === undefined) throw refused(line, `${flag} has no name`);
    if (MODULE_FLAGS.has(flag)) {
      const read = readOptions(statement, i + 2, true, line);
      matches.push({ module: name, options: read.options });
      i = read.next;
    } else {
      // -j/-g: everything after the target's name is the target's options.
      const read = readOptions(statement, i + 2, false, line);
      target = { name, goto: GOTO_FLAGS.has(flag), options: read.options };
      i = read.next;
    }
  }

  const kept = exact(matches);
  const comment = kept
    .find((m) => m.module === 'comment')
    ?.options.find((o) => o.option === '--comment')?.values[0];
  return { table, chain, spec: values.slice(start), matches: kept, comment, target };
}
