/** The verbs a runtime runs. */
export type CniVerb = 'ADD' | 'CHECK' | 'DEL' | 'VERSION' | 'STATUS' | 'GC';

/**
 * What went wrong. Errors a plugin reports carry the spec's numeric code in `specCode` and a name
 * here; errors the runtime finds itself have only a name.
 */
export type CniErrorCode =
  // Well-known codes a plugin reports (spec 1.1.0, "Error").
  | 'incompatible-version' // 1
  | 'unsupported-field' // 2
  | 'unknown-container' // 3
  | 'invalid-environment' // 4
  | 'io-failure' // 5
  | 'decode-failure' // 6
  | 'invalid-network-config' // 7
  | 'try-again-later' // 11
  | 'not-available' // 50 (STATUS)
  | 'limited-connectivity' // 51 (STATUS)
  | 'plugin-error' // any other code, or a plugin failing without one
  // Found by the runtime.
  | 'invalid-config' // a network configuration file or object is not valid
  | 'network-not-found' // no configuration with that name
  | 'invalid-argument' // container id, interface name, CNI_ARGS, capability args
  | 'plugin-not-found' // no regular file of that type in the plugin directories
  | 'no-common-version' // no version offered that every plugin supports
  | 'invalid-result' // a plugin's result that cannot be read
  | 'not-added' // CHECK of an attachment with no cached ADD result
  | 'check-not-supported' // CHECK below 0.4.0
  | 'cache' // the result cache could not be read or written
  | 'spawn' // the plugin did not start
  | 'timeout'
  | 'aborted';

/** Names of the spec's well-known codes. */
export const WELL_KNOWN_CODES: Readonly<Record<number, CniErrorCode>> = {
  1: 'incompatible-version',
  2: 'unsupported-field',
  3: 'unknown-container',
  4: 'invalid-environment',
  5: 'io-failure',
  6: 'decode-failure',
  7: 'invalid-network-config',
  11: 'try-again-later',
  50: 'not-available',
  51: 'limited-connectivity',
};

export function codeName(specCode: number): CniErrorCode {
  return WELL_KNOWN_CODES[specCode] ?? 'plugin-error';
}

export interface CniErrorDetails {
  readonly code: CniErrorCode;
  /** The numeric code the plugin reported (or the spec's code for what the runtime found). */
  readonly specCode?: number;
  /** The spec's `msg`: what failed, without context. */
  readonly msg: string;
  /** The spec's `details`. */
  readonly details?: string;
  /** The plugin `type`. */
  readonly plugin?: string;
  readonly verb?: CniVerb;
  readonly containerId?: string;
  readonly network?: string;
  /** The configuration file, for `invalid-config`. */
  readonly file?: string;
  /** The field of a configuration or argument that is wrong, as a path (`plugins[1].type`). */
  readonly field?: string;
  readonly cause?: unknown;
}

const BRAND = Symbol.for('@allocnet/cni.CniError');

/**
 * The one error type of this package. Its message puts the context first and quotes identifiers:
 * `plugin "bridge" failed (ADD) for "6b235529-…": failed to allocate …`.
 */
export class CniError extends Error {
  readonly code: CniErrorCode;
  readonly specCode: number | undefined;
  readonly msg: string;
  readonly details: string | undefined;
  readonly plugin: string | undefined;
  readonly verb: CniVerb | undefined;
  readonly containerId: string | undefined;
  readonly network: string | undefined;
  readonly file: string | undefined;
  readonly field: string | undefined;
  readonly [BRAND] = true;

  constructor(message: string, d: CniErrorDetails) {
    super(message, d.cause === undefined ? undefined : { cause: d.cause });
    this.name = 'CniError';
    this.code = d.code;
    this.specCode = d.specCode;
    this.msg = d.msg;
    this.details = d.details;
    this.plugin = d.plugin;
    this.verb = d.verb;
    this.containerId = d.containerId;
    this.network = d.network;
    this.file = d.file;
    this.field = d.field;
  }

  /** The spec's error object, for printing where a plugin's error would go. */
  toJSON(): { code: number; msg: string; details?: string } {
    return {
      code: this.specCode ?? 999,
      msg: this.msg,
      ...(this.details === undefined ? {} : { details: this.details }),
    };
  }
}

/** True for a `CniError`, also one from another copy of this package. */
export function isCniError(value: unknown): value is CniError {
  return typeof value === 'object' && value !== null && BRAND in value;
}

/** An `invalid-argument` error naming the field. */
export function invalidArgument(field: string, problem: string, specCode = 4): CniError {
  return new CniError(`${field} ${problem}`, {
    code: 'invalid-argument',
    specCode,
    msg: `${field} ${problem}`,
    field,
  });
}
