// The list's encoder against the method's own serializer: the same bytes as the whole response
// encoded at once, each record encoded once while it, the default network and its restoring
// stay the same.
import type { AllocRecord } from '@allocnet/alloc-runner';
import { loadAllocnetProto } from '@allocnet/proto';
import type { AllocNetworkStatus, ListAllocNetworksResponse } from '@allocnet/proto';
import { createListEncoder } from './list-encode.js';
import { preEncodedBytes } from './sliced-encode.js';

const method = loadAllocnetProto().allocnet.v1.AllocNetworkService.service.ListAllocNetworks;
const serialize = method.responseSerialize as (m: ListAllocNetworksResponse) => Buffer;

/** A record the encoder sees: only its id and its identity matter here. */
const recordOf = (allocId: string) => ({ allocId }) as AllocRecord;

describe('createListEncoder', () => {
  it('encodes what the serializer encodes, each record once, again when it is replaced or its restoring changes', () => {
    const calls: string[] = [];
    const statusOf = (r: AllocRecord, network: string, restoring: boolean): AllocNetworkStatus => {
      calls.push(r.allocId);
      return {
        allocId: r.allocId,
        network,
        phase: restoring ? 'PHASE_RESTORING' : 'PHASE_READY',
        portMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp' }],
        updatedAtUnixMs: '17',
      };
    };
    const encode = createListEncoder(statusOf);
    const [a, b] = [recordOf('a'), recordOf('b')];
    const whole = (restoringB: boolean, network = 'nomad') =>
      serialize({
        allocations: [statusOf(a, network, false), statusOf(b, network, restoringB)],
      });
    const first = preEncodedBytes(encode([a, b], 'nomad', () => false));
    expect(calls.splice(0)).toEqual(['a', 'b']);
    expect(first.equals(whole(false))).toBe(true);
    calls.length = 0;

    // Nothing changed: nothing encoded again.
    expect(preEncodedBytes(encode([a, b], 'nomad', () => false)).equals(first)).toBe(true);
    expect(calls).toEqual([]);
    // b being restored, then a replaced record and another default network.
    const restoring = preEncodedBytes(encode([a, b], 'nomad', (id) => id === 'b'));
    expect(calls.splice(0)).toEqual(['b']);
    expect(restoring.equals(whole(true))).toBe(true);
    calls.length = 0;
    const a2 = recordOf('a');
    encode([a2, b], 'nomad', (id) => id === 'b');
    expect(calls.splice(0)).toEqual(['a']);
    encode([a2, b], 'other', (id) => id === 'b');
    expect(calls.splice(0)).toEqual(['a', 'b']);
    // None: the empty message.
    expect(preEncodedBytes(encode([], 'nomad', () => false)).length).toBe(0);
  });
});
