// A large streamed response encoded in slices: ReapLeaks' summary of 5,000 reaped allocations is
// a message of some 40,000 rules, which grpc-js would convert and encode in one go when it is
// written, holding the event loop for a second (issue 28: no other call may wait for a reap).
//
// The wire format makes slices possible: an embedded message is a tag, a length and its fields'
// encodings one after the other, and a repeated field is its elements' encodings one after the
// other. So the summary given as parts (the first with every field, the next ones with only a
// slice of the repeated field `reaped`) is encoded part by part through the method's own
// serializer, a turn of the event loop between parts when a slice has run its time
// (`createPause`, @allocnet/base); each part's payload is cut out of its `summary` field and the
// payloads joined under one tag and length. The bytes decode as the summary whole (the unit test
// checks it through the real serializer). `tolerantService` (call.ts) passes them on as they are.
import { createPause } from '@allocnet/base';
import { AgentError } from './errors.js';

const PRE_ENCODED = Symbol('allocnet.preEncoded');

/** A response already encoded: written as it is. */
export interface PreEncoded {
  readonly [PRE_ENCODED]: Buffer;
}

export function isPreEncoded(value: unknown): value is PreEncoded {
  return typeof value === 'object' && value !== null && PRE_ENCODED in value;
}

export function preEncodedBytes(value: PreEncoded): Buffer {
  return value[PRE_ENCODED];
}

/** A response given as its bytes. */
export function preEncoded(bytes: Buffer): PreEncoded {
  return { [PRE_ENCODED]: bytes };
}

/** A varint at `at`: its value and where the next field starts. */
function varintAt(bytes: Buffer, at: number): { value: number; next: number } {
  let value = 0;
  for (let i = at, shift = 0; i < bytes.length && shift < 35; i++, shift += 7) {
    const b = bytes[i] as number;
    value += (b & 0x7f) * 2 ** shift;
    if ((b & 0x80) === 0) return { value, next: i + 1 };
  }
  throw new AgentError('a sliced response: a varint runs past its part', { code: 'encode-failed' });
}

function varint(n: number): Buffer {
  const out: number[] = [];
  let v = n;
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
  return Buffer.from(out);
}

/**
 * `parts` (each a message whose one set field is the same embedded message) encoded as the one
 * message whose field holds every part's fields, in slices. Throws `encode-failed` when a part is not
 * one length-delimited field, or not the same one as the first.
 */
export async function encodeInSlices<T>(
  serialize: (message: T) => Buffer,
  parts: Iterable<T>,
): Promise<PreEncoded> {
  const pause = createPause();
  let tag: Buffer | undefined;
  const payloads: Buffer[] = [];
  for (const part of parts) {
    const bytes = serialize(part);
    const key = varintAt(bytes, 0);
    const length = varintAt(bytes, key.next);
    const own = bytes.subarray(0, key.next);
    if ((key.value & 7) !== 2 || length.next + length.value !== bytes.length || (tag !== undefined && !tag.equals(own)))
      throw new AgentError('a sliced response: a part is not the one embedded message field', { code: 'encode-failed' }); // prettier-ignore
    tag ??= Buffer.from(own);
    payloads.push(bytes.subarray(length.next));
    const turn = pause();
    if (turn !== undefined) await turn;
  }
  if (tag === undefined)
    throw new AgentError('a sliced response has no part', { code: 'encode-failed' });
  const payload = Buffer.concat(payloads);
  return preEncoded(Buffer.concat([tag, varint(payload.length), payload]));
}
