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
  readonly updatedAtMs: number;
  /** The secondary attachments, in order (the primary is `attachment`/`status`). */
  readonly extra?: readonly ExtraAttachment[];
}

/** Where one secondary attachment is. */
export type AttachmentPhase = 'setting-up' | 'ready' | 'tearing-down';

/** A secondary attachment of an allocation, as recorded. */
export interface ExtraAttachment {
  /** The configurator's spec it was (or is being) set up with. */
  readonly spec: AllocNetworkSpec;
  readonly phase: AttachmentPhase;
  /** Whether `attach` added it to the running allocation (false: part of the setup). */
  readonly attached: boolean;
  /** What its ADD used, once it ran. */
  readonly attachment?: AllocAttachment;
  readonly status?: AllocNetworkStatus;
}

/** One attachment of an allocation as readers see it, the primary first. */
export interface AttachmentView {
  readonly index: number;
  readonly primary: boolean;
  /** The network's name (empty when a record not set up asked for the default network). */
  readonly network: string;
  readonly ifName: string;
  /** The primary's is the allocation's phase. */
  readonly phase: AllocPhase;
  readonly attachment?: AllocAttachment;
  readonly status?: AllocNetworkStatus;
  readonly attached: boolean;
}

/** The interface of the attachment at `index` when its spec names none. */
function defaultIfName(index: number): string {
  return index === 0 ? 'eth0' : `net${index}`;
}

/**
 * Every attachment of an allocation, primary first; a record without `extra` (every record
 * written before several networks) reads as one attachment.
 */
export function attachmentsOf(rec: AllocRecord): readonly AttachmentView[] {
  const first = rec.spec.attachments?.[0];
  const primary: AttachmentView = {
    index: 0,
    primary: true,
    network:
      rec.status?.network ??
      rec.attachment?.network.name ??
      first?.network ??
      rec.spec.network ??
      '',
    ifName: rec.attachment?.ifName ?? first?.ifName ?? rec.spec.ifName ?? defaultIfName(0),
    phase: rec.phase,
    ...(rec.attachment === undefined ? {} : { attachment: rec.attachment }),
    ...(rec.status === undefined ? {} : { status: rec.status }),
    attached: false,
  };
  const extras = (rec.extra ?? []).map((x, i): AttachmentView => ({
    index: i + 1,
    primary: false,
    network: x.status?.network ?? x.attachment?.network.name ?? x.spec.network ?? '',
    ifName: x.attachment?.ifName ?? x.spec.ifName ?? defaultIfName(i + 1),
    phase: x.phase,
    ...(x.attachment === undefined ? {} : { attachment: x.attachment }),
    ...(x.status === undefined ? {} : { status: x.status }),
    attached: x.attached,
  }));
  return [primary, ...extras];
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
