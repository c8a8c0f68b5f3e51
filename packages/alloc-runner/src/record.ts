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
   * The secondary attachments, in order (the primary is `attachment`/`status` above). Absent in
   * a record of one network (and in every record written before attachments existed).
   */
  readonly extra?: readonly ExtraAttachment[];
  readonly updatedAtMs: number;
}

/** A secondary attachment of an allocation, as recorded. */
export interface ExtraAttachment {
  /** The configurator's spec of this attachment. */
  readonly spec: AllocNetworkSpec;
  readonly phase: 'setting-up' | 'ready' | 'tearing-down';
  /** Added to the running allocation by an attach (AttachNetwork), not by its setup. */
  readonly attached: boolean;
  readonly attachment?: AllocAttachment;
  readonly status?: AllocNetworkStatus;
}

/** One attachment of an allocation, primary or secondary, as the doors show it. */
export interface AttachmentView {
  /** 0 for the primary, k for `extra[k - 1]`. */
  readonly index: number;
  readonly primary: boolean;
  /** The network's name: the recorded attachment's, else the spec's (`''`: the default network). */
  readonly network: string;
  readonly ifName: string;
  /** The primary's is the allocation's. */
  readonly phase: AllocPhase;
  readonly attachment?: AllocAttachment;
  readonly status?: AllocNetworkStatus;
  readonly attached: boolean;
}

/** The primary's spec of a record: its first attachment's, or the single form's. */
function primarySpec(spec: RunnerSpec): { network?: string; ifName?: string } {
  return spec.attachments?.[0] ?? spec;
}

/** Every attachment of a record, the primary first (a record without `extra` has one). */
export function attachmentsOf(rec: AllocRecord): readonly AttachmentView[] {
  const first = primarySpec(rec.spec);
  const primary: AttachmentView = {
    index: 0,
    primary: true,
    network: rec.attachment?.network.name ?? first.network ?? '',
    ifName: rec.attachment?.ifName ?? first.ifName ?? 'eth0',
    phase: rec.phase,
    ...(rec.attachment === undefined ? {} : { attachment: rec.attachment }),
    ...(rec.status === undefined ? {} : { status: rec.status }),
    attached: false,
  };
  const rest = (rec.extra ?? []).map((x, i): AttachmentView => ({
    index: i + 1,
    primary: false,
    network: x.attachment?.network.name ?? x.spec.network ?? '',
    ifName: x.attachment?.ifName ?? x.spec.ifName ?? `net${i + 1}`,
    phase: x.phase,
    ...(x.attachment === undefined ? {} : { attachment: x.attachment }),
    ...(x.status === undefined ? {} : { status: x.status }),
    attached: x.attached,
  }));
  return [primary, ...rest];
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
