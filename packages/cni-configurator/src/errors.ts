/**
 * What went wrong, as a caller needs to act on it:
 * - `invalid-argument`: the request is wrong (`field` names what); nothing was changed;
 * - `network-not-found`: no such network (neither the default nor one in the conf dir);
 * - `unavailable`: a plugin or iptables is missing or cannot start;
 * - `setup-failed`: ADD failed on every attempt (the first error is the cause), or the result
 *   gave no address; what the attempts applied was undone;
 * - `check-failed`: CHECK found the allocation's network broken;
 * - `teardown-failed`, `cleanup-failed`: state tagged with the allocation could not be removed;
 * - `aborted`: the caller's signal fired; what was applied was undone.
 */
export type ConfiguratorErrorCode =
  | 'invalid-argument'
  | 'network-not-found'
  | 'unavailable'
  | 'setup-failed'
  | 'check-failed'
  | 'teardown-failed'
  | 'cleanup-failed'
  | 'aborted';

export interface ConfiguratorErrorDetails {
  readonly code: ConfiguratorErrorCode;
  /** The field of the request that is wrong, as a path (`ports[1].value`). */
  readonly field?: string;
  readonly allocId?: string;
  readonly network?: string;
  /** ADD attempts made (setup). */
  readonly attempts?: number;
  readonly cause?: unknown;
}

const BRAND = Symbol.for('@allocnet/cni-configurator.ConfiguratorError');

/** The one error type of this package; the message starts with the context. */
export class ConfiguratorError extends Error {
  readonly code: ConfiguratorErrorCode;
  readonly field: string | undefined;
  readonly allocId: string | undefined;
  readonly network: string | undefined;
  readonly attempts: number | undefined;
  readonly [BRAND] = true;

  constructor(message: string, details: ConfiguratorErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'ConfiguratorError';
    this.code = details.code;
    this.field = details.field;
    this.allocId = details.allocId;
    this.network = details.network;
    this.attempts = details.attempts;
  }
}

/** True for a `ConfiguratorError`, also one from another copy of this package. */
export function isConfiguratorError(value: unknown): value is ConfiguratorError {
  return typeof value === 'object' && value !== null && BRAND in value;
}

/** An `invalid-argument` error: `<field> <problem>`. */
export function invalidField(field: string, problem: string): ConfiguratorError {
  return new ConfiguratorError(`${field} ${problem}`, { code: 'invalid-argument', field });
}

/** The message of anything thrown. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
