import type { ErrorKind } from '@allocnet/base';

/**
 * Why a soak could not run to its verdict (a verdict that finds failures, leaks or growth is a
 * summary, not an error); the kind, @allocnet/base's, in brackets:
 * - `invalid-flag` (invalid): a flag's value is not what it takes; `flag` names it;
 * - `interrupted` (aborted): SIGINT or SIGTERM stopped the churn; everything was cleaned up.
 */
export type SoakErrorCode = 'invalid-flag' | 'interrupted';

const KINDS: Readonly<Record<SoakErrorCode, ErrorKind>> = {
  'invalid-flag': 'invalid',
  interrupted: 'aborted',
};

export interface SoakErrorDetails {
  readonly code: SoakErrorCode;
  /** For `invalid-flag`: the flag as typed, `--count`. */
  readonly flag?: string;
  readonly cause?: unknown;
}

const BRAND = Symbol.for('@allocnet/soak.SoakError');

/** The one error type of this package; its message is for the person at the terminal. */
export class SoakError extends Error {
  readonly code: SoakErrorCode;
  readonly kind: ErrorKind;
  readonly flag: string | undefined;
  readonly [BRAND] = true;

  constructor(message: string, details: SoakErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'SoakError';
    this.code = details.code;
    this.kind = KINDS[details.code];
    this.flag = details.flag;
  }
}

/** True for a `SoakError`, also one from another copy of this package. */
export function isSoakError(value: unknown): value is SoakError {
  return typeof value === 'object' && value !== null && BRAND in value;
}
