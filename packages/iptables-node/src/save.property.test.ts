// Properties of the iptables-save and `iptables -S` parsers (what iptables prints is read at this
// edge): any text is tables or a `parse` IptablesError naming a line of it, never anything else; a
// ruleset written with this package's own writer (`formatRestoreInput`, `formatArg`) is read back
// exactly: parse(render(tables)) equals tables, rules' matches, comments and targets included.
import fc from 'fast-check';
import { formatRestoreInput } from './batch.js';
import { formatArg } from './quote.js';
import type { Rule, RuleMatch, RuleOption, RuleTarget } from './rule.js';
import { isIptablesError } from './errors.js';
import type { IptablesError } from './errors.js';
import { createRuleMemo, createSaveStream, parseIptablesSave, parseRuleListing } from './save.js';
import type { Chain, SavedTable, SaveStream } from './save.js';
import { plainRules } from './testing/index.js';
import { TABLES } from './validate.js';
import type { Table } from './validate.js';

const SEED = 16_2006;

/** FC_NUM_RUNS / FC_SEED explore further than CI does (docs/testing.md, "Property tests"). */
function parameters(numRuns: number): { seed: number; numRuns: number } {
  const env = (name: string) => Number(process.env[name]) || undefined;
  return { seed: env('FC_SEED') ?? SEED, numRuns: env('FC_NUM_RUNS') ?? numRuns };
}

// ---- arbitrary text ---------------------------------------------------------------------------

/** Pieces iptables-save output is made of, in any order: reaches deep into the parser. */
const piece = fc.constantFrom(
  '*nat', '*filter', '*bogus', 'COMMIT', ':X', ':CNI-A ACCEPT [0:0]', '-A', '--append', 'X',
  '-m', 'comment', '--comment', '-j', '-g', 'ACCEPT', '!', '-s', '10.0.0.1/32', '--dport', '80',
  '"', '\\', '\\"', '#', '[1:2]', '-P', '-N', ' ', '\t', '\r', '\n', '\n', '-x', '""',
); // prettier-ignore
const text = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 200 }),
  fc.array(piece, { maxLength: 40 }).map((pieces) => pieces.join(' ')),
  fc.array(piece, { maxLength: 40 }).map((pieces) => pieces.join('')),
);

/** A parser's error: an `IptablesError` with code `parse` and a line; anything else is thrown. */
function parseError(error: unknown): IptablesError & { readonly line: number } {
  if (!isIptablesError(error) || error.code !== 'parse' || error.line === undefined) throw error;
  return error as IptablesError & { readonly line: number };
}

function lineCount(t: string): number {
  return t.split('\n').length;
}

/** An async parse's value, or its `parse` error's message and line. */
async function outcomeOf(parsing: Promise<unknown>) {
  try {
    return { value: plainRules(await parsing) };
  } catch (error) {
    const refused = parseError(error);
    return { error: refused.message, line: refused.line };
  }
}

/** A parse's value, or its `parse` error's message and line. */
function outcome(f: () => unknown) {
  try {
    return { value: plainRules(f()) };
  } catch (error) {
    const refused = parseError(error);
    return { error: refused.message, line: refused.line };
  }
}

/** Cut points into a byte string (any order, repeats and points beyond its end allowed). */
const cuts = fc.array(fc.nat({ max: 400 }), { maxLength: 8 });

/**
 * `bytes` through `createSaveStream`, cut at `at` (a UTF-8 character may be split), then ended.
 * The stream pauses (a microtask) at every other pause point: the result must not depend on where
 * the reading was paused, and a clock's pauses would make the run slow and its path random.
 */
function streamed(bytes: Buffer, at: readonly number[], keep?: (line: string) => boolean) {
  let n = 0;
  const stream = createSaveStream(keep, () => (n++ % 2 === 0 ? undefined : Promise.resolve()));
  return writtenInPieces(stream, bytes, at).end().then(plainRules);
}

/** `bytes` written to `stream` in pieces cut at `at` (any order, beyond the end allowed). */
function writtenInPieces(stream: SaveStream, bytes: Buffer, at: readonly number[]): SaveStream {
  let from = 0;
  for (const cut of [...at].sort((a, b) => a - b)) {
    const to = Math.min(cut, bytes.length);
    stream.write(bytes.subarray(from, to));
    from = to;
  }
  stream.write(bytes.subarray(from));
  return stream;
}

/** Pure filters (the stream may ask about a line twice). */
const filters: fc.Arbitrary<((line: string) => boolean) | undefined> = fc.constantFrom(
  undefined,
  (line: string) => line.includes('X'),
  (line: string) => line.length % 2 === 0,
  () => true,
);

describe('parseIptablesSave properties', () => {
  it('reads any text as tables or a parse error naming a line of it', () => {
    fc.assert(
      fc.property(text, fc.boolean(), (input, filtered) => {
        try {
          parseIptablesSave(input, filtered ? (line) => line.includes('X') : undefined);
        } catch (error) {
          const { line, message } = parseError(error);
          // 0 is the end of the text (a table without COMMIT).
          expect(line).toBeGreaterThanOrEqual(0);
          expect(line).toBeLessThanOrEqual(lineCount(input));
          if (line > 0) expect(message).toMatch(/^(line \d+: |unterminated quote)/);
        }
      }),
      parameters(1000),
    );
  });

  it('reads any output in any pieces exactly as whole, the same error included', async () => {
    const bytes = fc.oneof(
      text.map((t) => Buffer.from(t, 'utf8')),
      fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
    );
    await fc.assert(
      fc.asyncProperty(bytes, cuts, filters, async (output, at, keep) => {
        const whole = outcome(() => parseIptablesSave(output.toString('utf8'), keep));
        expect(await outcomeOf(streamed(output, at, keep))).toEqual(whole);
      }),
      parameters(1000),
    );
  });

  it("gives the output's first characters in any pieces", () => {
    fc.assert(
      fc.property(text, cuts, fc.nat({ max: 300 }), (t, at, chars) => {
        const stream = writtenInPieces(createSaveStream(), Buffer.from(t, 'utf8'), at);
        expect(stream.start(chars)).toBe(t.slice(0, chars));
      }),
      parameters(300),
    );
  });

  it('reads any text through a memo exactly as without one, the same error included', () => {
    const memo = createRuleMemo({ limit: 64, minChars: 0 });
    fc.assert(
      fc.property(text, fc.constantFrom(...TABLES), (input, table) => {
        const plain = outcome(() => parseRuleListing(table, input));
        expect(outcome(() => parseRuleListing(table, input, memo))).toEqual(plain);
        // Again, now from the memo.
        expect(outcome(() => parseRuleListing(table, input, memo))).toEqual(plain);
      }),
      parameters(1000),
    );
  });

  it('reads any text as an iptables -S listing or a parse error naming a line of it', () => {
    fc.assert(
      fc.property(text, fc.constantFrom(...TABLES), (input, table) => {
        try {
          parseRuleListing(table, input);
        } catch (error) {
          const { line } = parseError(error);
          expect(line).toBeGreaterThanOrEqual(1);
          expect(line).toBeLessThanOrEqual(lineCount(input));
        }
      }),
      parameters(1000),
    );
  });
});

// ---- rulesets, written and read back ----------------------------------------------------------

// Options that always take one value (rule.ts); the others take the values up to the next option.
const ONE_VALUE = new Set(['-s', '-d', '-p', '-i', '-o', '--comment']);
/** Any value iptables-restore input can carry: no newline, carriage return or NUL. */
const anyValue = fc.string({ maxLength: 12 }).filter((v) => !/[\n\r\0]/.test(v));
/** A value of a many-valued option: not one iptables would read as an option or a negation. */
const plainValue = anyValue.filter((v) => v !== '!' && !(v.length > 1 && v.startsWith('-')));
const optionName = fc
  .stringMatching(/^--?[a-z][a-z0-9-]{0,8}$/)
  .filter((o) => !['-m', '--match', '-j', '--jump', '-g', '--goto'].includes(o));

function option(names: fc.Arbitrary<string>): fc.Arbitrary<RuleOption> {
  return fc
    .tuple(names, fc.boolean(), anyValue, fc.array(plainValue, { maxLength: 3 }))
    .map(([name, negated, one, many]) => ({
      option: name,
      negated,
      values: ONE_VALUE.has(name) ? [one] : many,
    }));
}

const builtin: fc.Arbitrary<RuleMatch[]> = fc
  .array(option(fc.constantFrom('-s', '-d', '-p', '-i', '-o', '-f')), { maxLength: 3 })
  .map((options) => (options.length === 0 ? [] : [{ module: undefined, options }]));
const moduleMatch: fc.Arbitrary<RuleMatch> = fc.record({
  module: fc.oneof(fc.constantFrom('comment', 'tcp', 'multiport', 'conntrack'), anyValue),
  options: fc.array(option(fc.oneof(optionName, fc.constant('--comment'))), { maxLength: 3 }),
});
const target: fc.Arbitrary<RuleTarget | undefined> = fc.option(
  fc.record({
    name: fc.oneof(fc.constantFrom('ACCEPT', 'DNAT', 'CNI-X'), anyValue),
    goto: fc.boolean(),
    options: fc.array(option(optionName), { maxLength: 2 }),
  }),
  { nil: undefined },
);
/** Names `checkChain` takes. */
const chainName = fc.stringMatching(/^[^\s"'!-][^\s"']{0,27}$/);

function optionArgs(o: RuleOption): string[] {
  return [...(o.negated ? ['!'] : []), o.option, ...o.values];
}

function ruleOf(
  table: Table,
  chain: string,
  matches: RuleMatch[],
  t: RuleTarget | undefined,
): Rule {
  const spec = [
    ...matches.flatMap((m) => [
      ...(m.module === undefined ? [] : ['-m', m.module]),
      ...m.options.flatMap(optionArgs),
    ]),
    ...(t === undefined ? [] : [t.goto ? '-g' : '-j', t.name, ...t.options.flatMap(optionArgs)]),
  ];
  const comment = matches
    .find((m) => m.module === 'comment')
    ?.options.find((o) => o.option === '--comment')?.values[0];
  return { table, chain, spec, matches, comment, target: t };
}

function tableOf(name: Table): fc.Arbitrary<SavedTable> {
  const chain: fc.Arbitrary<Chain> = fc.record({
    name: chainName,
    policy: fc.option(fc.constantFrom('ACCEPT', 'DROP'), { nil: undefined }),
  });
  const rule = fc
    .tuple(chainName, builtin, fc.array(moduleMatch, { maxLength: 3 }), target)
    .map(([c, b, m, t]) => ruleOf(name, c, [...b, ...m], t));
  return fc.record({
    name: fc.constant(name),
    chains: fc.array(chain, { maxLength: 4 }),
    rules: fc.array(rule, { maxLength: 6 }),
  });
}

const tables: fc.Arbitrary<SavedTable[]> = fc
  .subarray([...TABLES])
  .chain((names) => fc.tuple(...names.map(tableOf)));

/**
 * Tables as iptables-save prints them: the rules through this package's writer for
 * iptables-restore, the chain declarations and (with `counters`) `[p:b]` before each rule added,
 * as `iptables-save -c` does.
 */
function render(saved: readonly SavedTable[], counters: boolean): string {
  const out = ['# Generated by a property test'];
  for (const t of saved) {
    const ops = t.rules.map((r) => ({
      kind: 'append' as const,
      table: t.name,
      chain: r.chain,
      spec: r.spec,
    }));
    const ruleLines = formatRestoreInput(ops).text.split('\n').slice(1, -2);
    out.push(
      `*${t.name}`,
      ...t.chains.map((c) => `:${c.name} ${c.policy ?? '-'} [0:0]`),
      ...ruleLines.map((line) => (counters ? `[3:180] ${line}` : line)),
      'COMMIT',
    );
  }
  return `${out.join('\n')}\n`;
}

/** Tables without `places`, which the generated ones do not have. */
const unplaced = (parsed: readonly SavedTable[]) =>
  parsed.map(({ name, chains, rules }) => ({ name, chains, rules: plainRules(rules) }));

/** Each rule's index among its chain's rules, and each chain's rule count, in order. */
function placesOf(rules: readonly { readonly chain: string }[]) {
  const sizes = new Map<string, number>();
  const positions = rules.map((r) => {
    const n = sizes.get(r.chain) ?? 0;
    sizes.set(r.chain, n + 1);
    return n;
  });
  return { positions, sizes };
}

describe('parseIptablesSave round trip', () => {
  it('reads back exactly the ruleset it wrote, each rule placed in its chain', () => {
    fc.assert(
      fc.property(tables, fc.boolean(), (saved, counters) => {
        const parsed = parseIptablesSave(render(saved, counters));
        expect(unplaced(parsed)).toEqual(saved);
        expect(parsed.map((t) => t.places)).toEqual(saved.map((t) => placesOf(t.rules)));
      }),
      parameters(500),
    );
  });

  it('reads a ruleset in any pieces exactly as whole, places included', async () => {
    await fc.assert(
      fc.asyncProperty(tables, fc.boolean(), cuts, filters, async (saved, counters, at, keep) => {
        const output = render(saved, counters);
        expect(await streamed(Buffer.from(output, 'utf8'), at, keep)).toEqual(
          plainRules(parseIptablesSave(output, keep)),
        );
      }),
      parameters(300),
    );
  });

  it('reads the same ruleset with a filter that keeps every line', () => {
    fc.assert(
      fc.property(tables, (saved) => {
        const text = render(saved, false);
        expect(plainRules(parseIptablesSave(text, () => true))).toEqual(
          plainRules(parseIptablesSave(text)),
        );
      }),
      parameters(200),
    );
  });

  it('places the rules a filter keeps where the whole parse places them', () => {
    fc.assert(
      fc.property(tables, fc.integer({ min: 2, max: 5 }), (saved, every) => {
        const text = render(saved, false);
        const whole = parseIptablesSave(text);
        // The `-A` lines the filter keeps, by their order in the text (over every table).
        const kept: number[] = [];
        let n = 0;
        const parsed = parseIptablesSave(text, (line) => {
          if (!line.startsWith('-A ')) return true;
          if (n % every === 0) kept.push(n);
          return n++ % every === 0;
        });
        const wholeRules = whole.flatMap((t) => t.rules.map((_, i) => t.places?.positions[i]));
        const parsedRules = parsed.flatMap((t) => t.rules.map((_, i) => t.places?.positions[i]));
        expect(parsed.map((t) => t.places?.sizes)).toEqual(whole.map((t) => t.places?.sizes));
        if (parsedRules.length === wholeRules.length) {
          // A quoted argument spanning lines: everything was parsed.
          expect(plainRules(parsed)).toEqual(plainRules(whole));
        } else {
          expect(parsedRules).toEqual(kept.map((k) => wholeRules[k]));
        }
      }),
      parameters(200),
    );
  });

  it('reads each rule back from an iptables -S listing', () => {
    fc.assert(
      fc.property(tables, (saved) => {
        for (const t of saved) {
          const ops = [
            ...t.chains.map((c) => ({ kind: 'newChain' as const, table: t.name, chain: c.name })),
            ...t.rules.map((r) => ({
              kind: 'append' as const,
              table: t.name,
              chain: r.chain,
              spec: r.spec,
            })),
          ];
          // `-N` and `-A` lines, without the `*table` and `COMMIT` frame of restore input.
          const listing = formatRestoreInput(ops).text.split('\n').slice(1, -2).join('\n');
          const expected = {
            chains: t.chains.map((c) => ({ name: c.name, policy: undefined })),
            rules: t.rules,
          };
          expect(plainRules(parseRuleListing(t.name, listing))).toEqual(expected);
          // Through a memo, twice: parsed, then every rule from the memo.
          const memo = createRuleMemo({ minChars: 0 });
          expect(plainRules(parseRuleListing(t.name, listing, memo))).toEqual(expected);
          expect(plainRules(parseRuleListing(t.name, listing, memo))).toEqual(expected);
        }
      }),
      parameters(200),
    );
  });

  it('writes every chain name and value so that it reads back as one argument', () => {
    fc.assert(
      fc.property(anyValue, chainName, (comment, chain) => {
        const [table] = parseIptablesSave(
          `*filter\n-A ${formatArg(chain)} -m comment --comment ${formatArg(comment)}\nCOMMIT\n`,
        );
        expect(table?.rules[0]?.chain).toBe(chain);
        expect(table?.rules[0]?.comment).toBe(comment);
      }),
      parameters(500),
    );
  });
});
