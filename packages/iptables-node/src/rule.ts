import { IptablesError } from './errors.js';
import type { Token } from './quote.js';
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

function isOptionToken(token: Token): boolean {
  return !token.quoted && token.value.length > 1 && token.value.startsWith('-');
}

function isNegation(token: Token): boolean {
  return !token.quoted && token.value === '!';
}

/**
 * Reads options from `tokens` starting at `start`, up to a `-m`, `-j` or `-g` (or the end).
 * Returns the options and the index where it stopped. `line` is the rule's, for an error.
 */
function readOptions(
  tokens: readonly Token[],
  start: number,
  stopAtModule: boolean,
  line: number,
): { options: RuleOption[]; next: number } {
  const options: RuleOption[] = [];
  let i = start;
  while (i < tokens.length) {
    let negated = false;
    let token = tokens[i] as Token;
    if (isNegation(token)) {
      negated = true;
      i++;
      const after = tokens[i];
      if (after === undefined) throw refused(line, '"!" at the end of the rule');
      token = after;
    }
    if (
      stopAtModule &&
      (MODULE_FLAGS.has(token.value) || JUMP_FLAGS.has(token.value) || GOTO_FLAGS.has(token.value))
    ) {
      if (negated) throw refused(line, `"!" before ${token.value}`);
      break;
    }
    if (!isOptionToken(token)) {
      throw refused(line, `value ${JSON.stringify(token.value)} does not follow an option`);
    }
    i++;
    let values: string[];
    if (ONE_VALUE_OPTIONS.has(token.value)) {
      const value = tokens[i];
      if (value === undefined) throw refused(line, `${token.value} has no value`);
      values = [value.value];
      i++;
    } else {
      const from = i;
      while (i < tokens.length) {
        const value = tokens[i] as Token;
        if (isOptionToken(value) || isNegation(value)) break;
        i++;
      }
      values = i === from ? NONE : tokens.slice(from, i).map((t) => t.value);
    }
    options.push({ option: token.value, negated, values });
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
 * Builds a `Rule` from the tokens that follow `-A <chain>` in iptables-save or `iptables -S`
 * output, on `line` of it. Throws a `parse` error naming the line when the tokens are not a rule
 * iptables would print.
 */
export function ruleFromTokens(
  table: Table,
  chain: string,
  tokens: readonly Token[],
  line: number,
): Rule {
  const matches: RuleMatch[] = [];
  let target: RuleTarget | undefined;
  let i = 0;

  const builtin = readOptions(tokens, i, true, line);
  for (const option of builtin.options) {
    if (!BUILTIN_OPTIONS.has(option.option)) {
      throw refused(line, `option ${option.option} comes before any -m`);
    }
  }
  if (builtin.options.length > 0) matches.push({ module: undefined, options: builtin.options });
  i = builtin.next;

  while (i < tokens.length) {
    const flag = (tokens[i] as Token).value;
    const name = tokens[i + 1];
    if (name === undefined) throw refused(line, `${flag} has no name`);
    if (MODULE_FLAGS.has(flag)) {
      const read = readOptions(tokens, i + 2, true, line);
      matches.push({ module: name.value, options: read.options });
      i = read.next;
    } else {
      // -j/-g: everything after the target's name is the target's options.
      const read = readOptions(tokens, i + 2, false, line);
      target = { name: name.value, goto: GOTO_FLAGS.has(flag), options: read.options };
      i = read.next;
    }
  }

  const kept = exact(matches);
  const comment = kept
    .find((m) => m.module === 'comment')
    ?.options.find((o) => o.option === '--comment')?.values[0];
  return { table, chain, spec: tokens.map((t) => t.value), matches: kept, comment, target };
}
