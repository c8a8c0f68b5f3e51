// ListAllocNetworks' response from encodings kept per allocation between calls. `allocnet alloc
// list` and a scheduler's list of a node with 1,000 allocations otherwise encode every status
// each time (proto-loader's fromObject then encode: ~50 ms of the agent's one thread with 1,000,
// docs/performance.md). The response's one field is the repeated `allocations`, and a repeated
// field's encoding is its elements' encodings one after the other: so the response is the
// concatenation of each allocation's encoding as a one-element response, kept while its record
// (the store replaces a record's object on every change), the default network and whether it is
// being restored stay the same. `tolerantService` (call.ts) writes the bytes as they are.
import type { AllocRecord } from '@allocnet/alloc-runner';
import { loadAllocnetProto } from '@allocnet/proto';
import type { AllocNetworkStatus, ListAllocNetworksResponse } from '@allocnet/proto';
import { preEncoded } from './sliced-encode.js';
import type { PreEncoded } from './sliced-encode.js';

/** One allocation's status, as the list shows it. */
export type StatusOf = (
  record: AllocRecord,
  defaultNetwork: string,
  restoring: boolean,
) => AllocNetworkStatus;

/** An allocation's encoding and what it was made with. */
interface Kept {
  readonly network: string;
  readonly restoring: boolean;
  readonly bytes: Buffer;
}

/** The list's encoder: `records` as a ListAllocNetworksResponse, each record encoded once. */
export function createListEncoder(
  statusOf: StatusOf,
): (
  records: readonly AllocRecord[],
  defaultNetwork: string,
  isRestoring: (allocId: string) => boolean,
) => PreEncoded {
  const kept = new WeakMap<AllocRecord, Kept>();
  let serialize: ((message: ListAllocNetworksResponse) => Buffer) | undefined;
  return (records, network, isRestoring) => {
    serialize ??= loadAllocnetProto().allocnet.v1.AllocNetworkService.service.ListAllocNetworks
      .responseSerialize as (message: ListAllocNetworksResponse) => Buffer;
    const encode = serialize;
    const parts = records.map((record) => {
      const restoring = isRestoring(record.allocId);
      const known = kept.get(record);
      if (known?.network === network && known.restoring === restoring) return known.bytes;
      const bytes = encode({ allocations: [statusOf(record, network, restoring)] });
      kept.set(record, { network, restoring, bytes });
      return bytes;
    });
    return preEncoded(Buffer.concat(parts));
  };
}
