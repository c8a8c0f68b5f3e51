import { messageOf } from '@allocnet/base';
import type { ErrorKind } from '@allocnet/base';
import { isNetnsError } from '@allocnet/netns';

export { messageOf };

/**
 * Why the sandbox could not run (the agent command reports these as its own `dev-failed`; the
 * kind, @allocnet/base's, in brackets):
 * - `needs-root` (unavailable): not run as root; a namespace cannot be made;
 * - `sandbox-failed` (internal): the sandbox namespace could not be made;
 * - `not-ready` (internal): the agent did not write its ready file in time.
 */
export type DevErrorCode = 'needs-root' | 'sandbox-failed' | 'not-ready';

const KINDS: Readonly<Record<DevErrorCode, ErrorKind>> = {
  'needs-root': 'unavailable',
  'sandbox-failed': 'internal',
  'not-ready': 'internal',
};

export interface DevErrorDetails {
  readonly code: DevErrorCode;
  readonly cause?: unknown;
}

const BRAND = Symbol.for('@allocnet/dev-sandbox.DevError');

/** The one error type of this package; its message is for the person at the terminal. */
export class DevError extends Error {
  readonly code: DevErrorCode;
  readonly kind: ErrorKind;
  readonly [BRAND] = true;

  constructor(message: string, details: DevErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'DevError';
    this.code = details.code;
    this.kind = KINDS[details.code];
  }
}

/** True for a `DevError`, also one from another copy of this package. */
export function isDevError(value: unknown): value is DevError {
  return typeof value === 'object' && value !== null && BRAND in value;
}

/**
 * A namespace step's failure as the sandbox has always worded it (it ran these commands itself
 * before @allocnet/netns did): `<command> could not run: <why>` for a command that did not
 * start, else `<command> failed (exit status N): <its stderr, or "no error message">`; a process
 * that could not be killed by the kill's own message.
 */
export function problemOf(error: unknown): string {
  if (!isNetnsError(error)) return messageOf(error);
  if (error.code === 'kill-failed') return messageOf(error.cause);
  const command = error.command;
  if (command === undefined) return error.message;
  const line = command.argv.join(' ');
  if (command.failure?.reason === 'spawn')
    return `${line} could not run: ${command.failure.message}`;
  return `${line} failed (exit status ${command.exitCode ?? 'none'}): ${command.stderr || 'no error message'}`;
}
