import { formatPath, renderProblem } from '@allocnet/base';
import type { ContractError, ErrorKind, FieldPath, Problem } from '@allocnet/base';

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

/** What callers act on (see @allocnet/base), by code. */
const KINDS: Readonly<Record<CniErrorCode, ErrorKind>> = {
  'incompatible-version': 'internal',
  'unsupported-field': 'internal',
  'unknown-container': 'internal',
  'invalid-environment': 'internal',
  'io-failure': 'internal',
  'decode-failure': 'internal',
  'invalid-network-config': 'internal',
  'try-again-later': 'unavailable',
  'not-available': 'unavailable',
  'limited-connectivity': 'unavailable',
  'plugin-error': 'internal',
  'invalid-config': 'invalid',
  'network-not-found': 'not-found',
  'invalid-argument': 'invalid',
  'plugin-not-found': 'unavailable',
  'no-common-version': 'internal',
  'invalid-result': 'internal',
  'not-added': 'not-found',
  'check-not-supported': 'internal',
  cache: 'internal',
  spawn: 'unavailable',
  // A plugin that did not answer in time (a lock held elsewhere, a slow node): try again later.
  timeout: 'unavailable',
  aborted: 'aborted',
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
  /** The field of a configuration or argument that is wrong (`['plugins', 1, 'type']`). */
  readonly path?: FieldPath;
  /** What is wrong with that field (the `msg` is `<field> <problem>`). */
  readonly problem?: Problem;
  readonly cause?: unknown;
}

const BRAND = Symbol.for('@allocnet/cni.CniError');

/**
 * The one error type of this package. Its message puts the context first and quotes identifiers:
 * `plugin "bridge" failed (ADD) for "6b235529-…": failed to allocate …`.
 */
export class CniError extends Error implements ContractError {
  readonly code: CniErrorCode;
  readonly kind: ErrorKind;
  readonly specCode: number | undefined;
  readonly msg: string;
  readonly details: string | undefined;
  readonly plugin: string | undefined;
  readonly verb: CniVerb | undefined;
  readonly containerId: string | undefined;
  readonly network: string | undefined;
  readonly file: string | undefined;
  readonly path: FieldPath | undefined;
  readonly problem: Problem | undefined;
  /** Messages here name no field outside `path`/`problem`. */
  readonly parts: Problem | undefined = undefined;
  readonly [BRAND] = true;

  constructor(message: string, d: CniErrorDetails) {
    super(message, d.cause === undefined ? undefined : { cause: d.cause });
    this.name = 'CniError';
    this.code = d.code;
    this.kind = KINDS[d.code];
    this.specCode = d.specCode;
    this.msg = d.msg;
    this.details = d.details;
    this.plugin = d.plugin;
    this.verb = d.verb;
    this.containerId = d.containerId;
    this.network = d.network;
    this.file = d.file;
    this.path = d.path;
    this.problem = d.problem;
  }

  /** The wrong field as text (`plugins[1].type`). */
  get field(): string | undefined {
    return this.path === undefined ? undefined : formatPath(this.path);
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

/**
 * An `invalid-argument` error naming the field. A string field is one name (`netns`,
 * `defaultNetwork.bridge` as its owner calls it), never parsed.
 */
export function invalidArgument(
  field: FieldPath | string,
  problem: string,
  specCode = 4,
): CniError {
  const path = typeof field === 'string' ? [field] : field;
  const msg = `${formatPath(path)} ${renderProblem([problem])}`;
  return new CniError(msg, {
    code: 'invalid-argument',
    specCode,
    msg,
    path,
    problem: [problem],
  });
}
