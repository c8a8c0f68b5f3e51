import * as t from 'io-ts';
import type { AllocAttachment, AllocNetworkStatus } from '@allocnet/cni-configurator';
import type { RunnerSpec } from './spec.js';

/** The schema of the records this version writes. */
export const SCHEMA_VERSION = 1;

/**
 * Where an allocation is:
 * - `setting-up`: the intent is recorded; the namespace and the plugins may have run, or not;
 * - `ready`: set up; `attachment` and `status` are there;
 * - `tearing-down`: a teardown started; it is finished by the next teardown or by restore;
 * - `failed`: restore could not keep the allocation and undid it; kept only to report it, until a
 *   teardown (or a new setup) of the allocation clears it.
 */
export type AllocPhase = 'setting-up' | 'ready' | 'tearing-down' | 'failed';

/** One allocation's durable record (`alloc/<id>` in the store). */
export interface AllocRecord {
  readonly schema: number;
  readonly allocId: string;
  readonly spec: RunnerSpec;
  readonly phase: AllocPhase;
  /** Where its network namespace is (made by the runner, or given by the spec). */
  readonly netnsPath: string;
  /** Whether the runner makes (and so removes) that namespace. */
  readonly netnsCreated: boolean;
  /** What the ADD used: CHECK and DEL are run with exactly this (the config snapshot included). */
  readonly attachment?: AllocAttachment;
  readonly status?: AllocNetworkStatus;
  /** Why the allocation failed (`failed`), with the cause's message. */
  readonly error?: string;
  readonly updatedAtMs: number;
}

// The configurator made the attachment and status; the store keeps them as it gave them. Their
// shape is checked loosely here (the fields the runner itself reads), so that a configurator
// adding a field does not make old records unreadable.
const attachmentCodec = t.type({
  allocId: t.string,
  netns: t.string,
  ifName: t.string,
  network: t.type({ name: t.string, config: t.string }),
});
const statusCodec = t.type({ allocId: t.string, address: t.string, addressIpv6: t.string });

export const recordCodec = t.intersection([
  t.type({
    schema: t.number,
    allocId: t.string,
    // Checked by decodeSpec after this codec, as a request's spec is.
    spec: t.UnknownRecord,
    phase: t.keyof({ 'setting-up': null, ready: null, 'tearing-down': null, failed: null }),
    netnsPath: t.string,
    netnsCreated: t.boolean,
    updatedAtMs: t.number,
  }),
  t.partial({ attachment: attachmentCodec, status: statusCodec, error: t.string }),
]);
