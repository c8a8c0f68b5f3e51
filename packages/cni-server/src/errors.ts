// The CNI door's one error class. A `CniFault` is what the door answers with: answer.ts turns its
// `kind` (and, for bad input, where the field is) into the spec's error object, in one table.
import { formatPath, kindOf } from '@allocnet/base';
import type { ContractError, ErrorKind, FieldPath, Problem } from '@allocnet/base';

/**
 * What went wrong, in detail; `kind` (see @allocnet/base) is what the answer is made from:
 * - `invalid-request` (invalid): a field of the request (`path`: `env.CNI_NETNS`, `config.delegate`,
 *   `config.runtimeConfig.portMappings[1].hostPort`, or `body`); nothing ran;
 * - `incompatible-version` (invalid): `config.cniVersion` is not one allocnet answers in;
 * - `body-too-large` (invalid): the request is over the server's `maxBodyBytes`;
 * - `not-ready` (unavailable): the agent is restoring, replaying queued DELs, or stopping;
 * - `no-cni-result` (conflict): an ADD of an allocation that was set up without a CNI result;
 * - `gc-incomplete` (internal): a GC could not tear down every stale attachment;
 * - `failed`: the runner (or anything else the call ran) failed; the kind is the cause's own,
 *   `internal` when it has none.
 */
export type CniFaultCode =
  | 'invalid-request'
  | 'incompatible-version'
  | 'body-too-large'
  | 'not-ready'
  | 'no-cni-result'
  | 'gc-incomplete'
  | 'failed';

const KINDS: Readonly<Record<CniFaultCode, ErrorKind | 'from-cause'>> = {
  'invalid-request': 'invalid',
  'incompatible-version': 'invalid',
  'body-too-large': 'invalid',
  'not-ready': 'unavailable',
  'no-cni-result': 'conflict',
  'gc-incomplete': 'internal',
  failed: 'from-cause',
};

export interface CniFaultDetails {
  readonly code: CniFaultCode;
  /** For bad input: the request's field (`['env', 'CNI_IFNAME']`). */
  readonly path?: FieldPath;
  /** For bad input: what is wrong with the field. */
  readonly problem?: Problem;
  /** The spec's `details` of the answer (the runner's whole message, a GC's failures). */
  readonly details?: string;
  readonly cause?: unknown;
}

const BRAND = Symbol.for('@allocnet/cni-server.CniFault');

/** A CNI error the door answers with (answer.ts): the message names the request's field. */
export class CniFault extends Error implements ContractError {
  readonly code: CniFaultCode;
  readonly kind: ErrorKind;
  readonly path: FieldPath | undefined;
  readonly problem: Problem | undefined;
  readonly parts: Problem | undefined = undefined;
  readonly details: string | undefined;
  readonly [BRAND] = true;

  constructor(message: string, details: CniFaultDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'CniFault';
    this.code = details.code;
    const byCode = KINDS[details.code];
    this.kind = byCode === 'from-cause' ? (kindOf(details.cause) ?? 'internal') : byCode;
    this.path = details.path;
    this.problem = details.problem;
    this.details = details.details;
  }
}

/** Whether `error` is a `CniFault`, also from another copy of this package. */
export function isCniFault(error: unknown): error is CniFault {
  return typeof error === 'object' && error !== null && BRAND in error;
}

/** Bad input at `path` (`env.CNI_IFNAME`, `config.runtimeConfig.portMappings[1].hostPort`). */
export function badField(
  path: FieldPath,
  what: string,
  code: 'invalid-request' | 'incompatible-version' = 'invalid-request',
): CniFault {
  return new CniFault(`${formatPath(path)} ${what}`, { code, path, problem: [what] });
}
