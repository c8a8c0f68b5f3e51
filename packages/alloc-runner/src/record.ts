import * as t from 'io-ts';
import type {
  AllocAttachment,
  AllocNetworkSpec,
  AllocNetworkStatus,
} from '@allocnet/cni-configurator';
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
  /**
   * The allocation's other networks (its secondary attachments), in order; absent in the single
   * form and in records written before attachments. `attachment` and `status` are the primary's.
   */
  readonly extra?: readonly ExtraAttachment[];
  readonly updatedAtMs: number;
}

/**
 * Where one secondary attachment is: `setting-up` (its intent is recorded; its plugins may have
 * run, or not), `ready` (`attachment` and `status` are there), `tearing-down` (a detach started).
 */
export type AttachmentPhase = 'setting-up' | 'ready' | 'tearing-down';

/** A secondary attachment of an allocation, as its record keeps it. */
export interface ExtraAttachment {
  /** The configurator spec it is (or was being) set up with; its interface is `spec.ifName`. */
  readonly spec: AllocNetworkSpec;
  readonly phase: AttachmentPhase;
  /** Whether it was added to the running allocation (`attach`), not by its setup. */
  readonly attached: boolean;
  /** What its ADD used: its CHECK and DEL run with exactly this. */
  readonly attachment?: AllocAttachment;
  readonly status?: AllocNetworkStatus;
}

/** One attachment of an allocation, the primary or a secondary, as `attachmentsOf` lists them. */
export interface AttachmentView {
  /** 0 for the primary, then the secondaries in order. */
  readonly index: number;
  readonly primary: boolean;
  /** The network's name as the ADD used it (as the spec names it before: empty for the default). */
  readonly network: string;
  readonly ifName: string;
  /** The primary's is the allocation's phase (`failed` included). */
  readonly phase: AllocPhase;
  readonly attachment?: AllocAttachment;
  readonly status?: AllocNetworkStatus;
  readonly attached: boolean;
}

/**
 * Every attachment of the allocation, the primary first. A record without `extra` (the single
 * form, or written before attachments) has one.
 */
export function attachmentsOf(rec: AllocRecord): readonly AttachmentView[] {
  const primarySpec = rec.spec.attachments?.[0];
  const primary: AttachmentView = {
    index: 0,
    primary: true,
    network: rec.attachment?.network.name ?? primarySpec?.network ?? rec.spec.network ?? '',
    ifName: rec.attachment?.ifName ?? primarySpec?.ifName ?? rec.spec.ifName ?? 'eth0',
    phase: rec.phase,
    ...(rec.attachment === undefined ? {} : { attachment: rec.attachment }),
    ...(rec.status === undefined ? {} : { status: rec.status }),
    attached: false,
  };
  return [
    primary,
    ...(rec.extra ?? []).map((e, i) => ({
      index: i + 1,
      primary: false,
      network: e.attachment?.network.name ?? e.spec.network ?? '',
      ifName: e.spec.ifName ?? e.attachment?.ifName ?? '',
      phase: e.phase,
      ...(e.attachment === undefined ? {} : { attachment: e.attachment }),
      ...(e.status === undefined ? {} : { status: e.status }),
      attached: e.attached,
    })),
  ];
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
const extraCodec = t.intersection([
  t.type({
    // The configurator's spec, checked by its decoder when it is set up again.
    spec: t.UnknownRecord,
    phase: t.keyof({ 'setting-up': null, ready: null, 'tearing-down': null }),
    attached: t.boolean,
  }),
  t.partial({ attachment: attachmentCodec, status: statusCodec }),
]);

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
  t.partial({
    attachment: attachmentCodec,
    status: statusCodec,
    error: t.string,
    extra: t.array(extraCodec),
  }),
]);
