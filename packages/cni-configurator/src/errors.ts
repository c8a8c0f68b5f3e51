import { carriedKind, formatPath, messageOf, renderProblem } from '@allocnet/base';
import type { ContractError, ErrorKind, FieldPath, Problem } from '@allocnet/base';

export { messageOf };

/**
 * What went wrong, in detail; `kind` (see @allocnet/base) is what callers act on:
 * - `invalid-argument` (invalid): the request is wrong (`path` names what); nothing was changed;
 * - `network-not-found` (invalid: the request names it, `path` is `['network']`): no such
 *   network (neither the default nor one in the conf dir);
 * - `unavailable` (unavailable): a plugin or iptables is missing or cannot start;
 * - `setup-failed` (internal): ADD failed on every attempt (the first error is the cause), or
 *   the result gave no address; what the attempts applied was undone;
 * - `check-failed` (broken): CHECK found the allocation's network broken;
 * - `teardown-failed`, `cleanup-failed` (internal, or the cause's `unavailable`/`aborted`):
 *   state tagged with the allocation could not be removed;
 * - `address-lost` (conflict): a reclaim's recorded address is outside the network's ranges or
 *   reserved by another allocation (`address` names it); nothing ran;
 * - `aborted` (aborted): the caller's signal fired; what was applied was undone.
 */
export type ConfiguratorErrorCode =
  | 'invalid-argument'
  | 'network-not-found'
  | 'unavailable'
  | 'setup-failed'
  | 'check-failed'
  | 'teardown-failed'
  | 'cleanup-failed'
  | 'address-lost'
  | 'aborted';

const KINDS: Readonly<Record<ConfiguratorErrorCode, ErrorKind | 'from-cause'>> = {
  'invalid-argument': 'invalid',
  'network-not-found': 'invalid',
  unavailable: 'unavailable',
  'setup-failed': 'internal',
  'check-failed': 'broken',
  'teardown-failed': 'from-cause',
  'cleanup-failed': 'from-cause',
  'address-lost': 'conflict',
  aborted: 'aborted',
};

export interface ConfiguratorErrorDetails {
  readonly code: ConfiguratorErrorCode;
  /** Default: by `code` (for the removal failures, `carriedKind(cause)`). */
  readonly kind?: ErrorKind;
  /** The field of the request that is wrong (`['ports', 1, 'value']`). */
  readonly path?: FieldPath;
  /** What is wrong with the field. */
  readonly problem?: Problem;
  readonly allocId?: string;
  readonly network?: string;
  /** ADD attempts made (setup). */
  readonly attempts?: number;
  /** The address a reclaim lost (`address-lost`). */
  readonly address?: string;
  readonly cause?: unknown;
}

const BRAND = Symbol.for('@allocnet/cni-configurator.ConfiguratorError');

/** The one error type of this package; the message starts with the context. */
export class ConfiguratorError extends Error implements ContractError {
  readonly code: ConfiguratorErrorCode;
  readonly kind: ErrorKind;
  readonly path: FieldPath | undefined;
  readonly problem: Problem | undefined;
  /** Messages here name no field outside `path`/`problem`. */
  readonly parts: Problem | undefined = undefined;
  readonly allocId: string | undefined;
  readonly network: string | undefined;
  readonly attempts: number | undefined;
  readonly address: string | undefined;
  readonly [BRAND] = true;

  constructor(message: string, details: ConfiguratorErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'ConfiguratorError';
    this.code = details.code;
    const byCode = KINDS[details.code];
    this.kind = details.kind ?? (byCode === 'from-cause' ? carriedKind(details.cause) : byCode);
    this.path = details.path;
    this.problem = details.problem;
    this.allocId = details.allocId;
    this.network = details.network;
    this.attempts = details.attempts;
    this.address = details.address;
  }

  /** The bad field as the request spells it (`ports[1].value`; `spec` for the spec itself). */
  get field(): string | undefined {
    return this.path === undefined ? undefined : fieldName(this.path);
  }
}

function fieldName(path: FieldPath): string {
  return path.length === 0 ? 'spec' : formatPath(path);
}

/** True for a `ConfiguratorError`, also one from another copy of this package. */
export function isConfiguratorError(value: unknown): value is ConfiguratorError {
  return typeof value === 'object' && value !== null && BRAND in value;
}

/**
 * An `invalid-argument` error: `<field> <problem>`. A string field is one name (`batchSize`,
 * `retry.attempts` for an option), never parsed.
 */
export function invalidField(
  field: FieldPath | string,
  problem: Problem | string,
): ConfiguratorError {
  const path = typeof field === 'string' ? [field] : field;
  const parts = typeof problem === 'string' ? [problem] : problem;
  return new ConfiguratorError(`${fieldName(path)} ${renderProblem(parts)}`, {
    code: 'invalid-argument',
    path,
    problem: parts,
  });
}
