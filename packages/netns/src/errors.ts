import type { ErrorKind } from '@allocnet/base';

export { messageOf } from '@allocnet/base';

/**
 * What went wrong with a namespace (the kind, @allocnet/base's, in brackets):
 * - `invalid-name` (invalid): a name `ip netns` would refuse, or that is not one plain file name;
 * - `command-failed` (internal): `ip` or `nsenter` did not start, exited non-zero, ran out of
 *   time or was killed; `command` says which and how, for callers that word it their own way;
 * - `aborted` (aborted): the caller's signal aborted the command;
 * - `read-failed` (internal): a namespace file could not be examined (`exists`); `cause` is the
 *   file system's error;
 * - `kill-failed` (internal): a process inside could not be killed (`killAll`); `cause` is the
 *   kill's error.
 */
export type NetnsErrorCode =
  'invalid-name' | 'command-failed' | 'aborted' | 'read-failed' | 'kill-failed';

const KINDS: Readonly<Record<NetnsErrorCode, ErrorKind>> = {
  'invalid-name': 'invalid',
  'command-failed': 'internal',
  aborted: 'aborted',
  'read-failed': 'internal',
  'kill-failed': 'internal',
};

/** How one command ended, when it did not end well. */
export interface NetnsCommandOutcome {
  /** The command as run: `['ip', 'netns', 'add', 'alloc-1']`. */
  readonly argv: readonly string[];
  /** Its exit status; undefined when it did not exit by itself (see `failure`). */
  readonly exitCode: number | undefined;
  /** Its standard error, trimmed. */
  readonly stderr: string;
  /** Why there is no exit status: it did not start (`spawn`), ran out of time, was killed. */
  readonly failure?: {
    readonly reason: 'spawn' | 'killed' | 'timeout' | 'aborted';
    readonly message: string;
  };
}

export interface NetnsErrorDetails {
  readonly code: NetnsErrorCode;
  /** For `command-failed` and `aborted`: the command and how it ended. */
  readonly command?: NetnsCommandOutcome;
  readonly cause?: unknown;
}

const BRAND = Symbol.for('@allocnet/netns.NetnsError');

/**
 * The one error type of this package. Its message is what `ip` said, after the command:
 * `ip netns add alloc-1 failed (exit status 1): Cannot create namespace file "<NETNS_RUN_DIR>/alloc-1": File exists`.
 */
export class NetnsError extends Error {
  readonly code: NetnsErrorCode;
  readonly kind: ErrorKind;
  readonly command: NetnsCommandOutcome | undefined;
  readonly [BRAND] = true;

  constructor(message: string, details: NetnsErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'NetnsError';
    this.code = details.code;
    this.kind = KINDS[details.code];
    this.command = details.command;
  }
}

/** True for a `NetnsError`, also one from another copy of this package. */
export function isNetnsError(value: unknown): value is NetnsError {
  return typeof value === 'object' && value !== null && BRAND in value;
}
