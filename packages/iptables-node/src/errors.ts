import type { ErrorKind } from '@allocnet/base';

/**
 * What went wrong, in detail; `kind` (see @allocnet/base) is what callers act on:
 * - `invalid-argument`: refused before anything ran (a bad table, chain or rule argument);
 * - `not-found`: the chain or rule is not there;
 * - `already-exists`: the chain is already there (also iptables-nft's EEXIST race on `-N`);
 * - `in-use`: a chain cannot go, it still has rules or a rule jumps to it;
 * - `bad-rule`: iptables refused the rule or its options;
 * - `lock`: another process holds the xtables lock (legacy backend);
 * - `permission`: not root, or no CAP_NET_ADMIN in the target namespace;
 * - `parse`: text that is not what iptables prints: a parser's (`parseIptablesSave`,
 *   `parseRuleListing`, `splitArgs`; `line` names the line, 0 for the end of the text), or a
 *   command's output (the message names the command, `cause` is the parser's);
 * - `changed`: the ruleset changed since it was read (an nf_tables removal by rule handle, nft.ts);
 * - `spawn`, `timeout`, `aborted`: the process did not start, took too long, or was cancelled;
 * - `unknown`: a failure none of the above describes (read `stderr`).
 */
export type IptablesErrorCode =
  | 'invalid-argument'
  | 'not-found'
  | 'already-exists'
  | 'in-use'
  | 'bad-rule'
  | 'lock'
  | 'permission'
  | 'parse'
  | 'changed'
  | 'spawn'
  | 'timeout'
  | 'aborted'
  | 'unknown';

/** What callers act on, by code. */
const KINDS: Readonly<Record<IptablesErrorCode, ErrorKind>> = {
  'invalid-argument': 'invalid',
  'not-found': 'not-found',
  'already-exists': 'conflict',
  'in-use': 'conflict',
  'bad-rule': 'internal',
  lock: 'unavailable',
  permission: 'internal',
  parse: 'internal',
  changed: 'conflict',
  spawn: 'unavailable',
  timeout: 'internal',
  aborted: 'aborted',
  unknown: 'internal',
};

export interface IptablesErrorDetails {
  readonly code: IptablesErrorCode;
  /** The argv that ran (with its nsenter prefix), empty when nothing ran. */
  readonly command?: readonly string[];
  readonly exitCode?: number;
  readonly stderr?: string;
  /**
   * For a failed iptables-restore: the 1-based input line iptables named, if it named one. For a
   * parser's `parse`: the 1-based line of the text, 0 for its end.
   */
  readonly line?: number;
  readonly cause?: unknown;
}

const BRAND = Symbol.for('@allocnet/iptables-node.IptablesError');

/** The one error type of this package. Its message starts with the command that failed. */
export class IptablesError extends Error {
  readonly code: IptablesErrorCode;
  readonly kind: ErrorKind;
  readonly command: readonly string[];
  readonly exitCode: number | undefined;
  readonly stderr: string;
  readonly line: number | undefined;
  readonly [BRAND] = true;

  constructor(message: string, details: IptablesErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'IptablesError';
    this.code = details.code;
    this.kind = KINDS[details.code];
    this.command = details.command ?? [];
    this.exitCode = details.exitCode;
    this.stderr = details.stderr ?? '';
    this.line = details.line;
  }
}

/** True for an `IptablesError`, also one from another copy of this package. */
export function isIptablesError(value: unknown): value is IptablesError {
  return typeof value === 'object' && value !== null && BRAND in value;
}

// Ordered: the first pattern that matches stderr decides. Messages are iptables 1.8.9's, both
// backends; iptables prints them in English whatever the locale.
const PATTERNS: readonly (readonly [RegExp, IptablesErrorCode])[] = [
  [/Permission denied|you must be root|Operation not permitted/i, 'permission'],
  [/xtables lock|Another app is currently holding/i, 'lock'],
  [/Chain already exists|File exists/, 'already-exists'],
  [/Device or resource busy|Directory not empty|Too many links/, 'in-use'],
  [/host\/network .* not found|Index of insertion too big|unknown option|Bad argument/, 'bad-rule'],
  [
    // iptables-nft 1.8.9 answers `-S <missing chain>` with "chain `X' in table `t' is
    // incompatible, use 'nft' tool."; a chain nft made that iptables cannot read says the same.
    /No chain\/target\/match by that name|does a matching rule exist|does not exist|is incompatible, use 'nft' tool|Bad built-in chain name|No such file or directory/,
    'not-found',
  ],
];

/** Classifies a non-zero iptables exit by its stderr, then by its exit status. */
export function classifyFailure(exitCode: number, stderr: string): IptablesErrorCode {
  for (const [pattern, code] of PATTERNS) if (pattern.test(stderr)) return code;
  // 2 is iptables' PARAMETER_PROBLEM: it refused the arguments.
  return exitCode === 2 ? 'bad-rule' : 'unknown';
}
