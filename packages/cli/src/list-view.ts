// `alloc list`'s view of the answer (`@allocnet/proto/call`'s views), in a module of its own: the
// contract's client is loaded when a call is made (with-agent.ts), not by `--help`.
import type { AllocNetworkServiceClient } from '@allocnet/proto';
import { ALLOC_NETWORK, answerView } from '@allocnet/proto/call';
import { ROW_FIELDS } from './alloc-status.js';
import type { StatusRow } from './alloc-status.js';

/**
 * The list's answer read for its rows only (`@allocnet/proto/call`'s views): a status's other
 * fields, its attachments' contents and its int64 are skipped on the wire, where a fresh process
 * spent most of its decoding and collecting (docs/cli.md). `--json` reads it all.
 */
export const LIST_ROWS = answerView<
  AllocNetworkServiceClient,
  'ListAllocNetworks',
  { readonly allocations: readonly StatusRow[] }
>(ALLOC_NETWORK, 'ListAllocNetworks', {
  'allocnet.v1.AllocNetworkStatus': ROW_FIELDS,
  'allocnet.v1.AttachmentStatus': [],
  'allocnet.v1.CniOrigin': ['runtime'],
});
