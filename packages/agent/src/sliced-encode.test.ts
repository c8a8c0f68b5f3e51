import { loadAllocnetProto } from '@allocnet/proto';
import type { ReapLeaksProgress } from '@allocnet/proto';
import { isAgentError } from './errors.js';
import { encodeInSlices, isPreEncoded, preEncodedBytes } from './sliced-encode.js';

const method = loadAllocnetProto().allocnet.v1.OperatorService.service.ReapLeaks;
const serialize = method.responseSerialize as (m: ReapLeaksProgress) => Buffer;
const deserialize = method.responseDeserialize as (b: Buffer) => unknown;

const leak = (i: number) => ({
  allocId: `1eaced00-0000-4000-8000-${String(i).padStart(12, '0')}`,
  networks: ['nomad'],
  state: {
    rules: [{ family: 'ipv4', table: 'nat', chain: 'POSTROUTING', line: `-A POSTROUTING -s 10.0.${i}.2/32 -j CNI-x` }],
    chains: [{ family: 'ipv4', table: 'nat', chain: `CNI-${i}` }],
    reservations: [],
    cacheFiles: [`/var/lib/cni/results/nomad-${i}-eth0`],
  },
}); // prettier-ignore

describe('encodeInSlices', () => {
  it('encodes a summary given in parts as the bytes of the whole summary decode', async () => {
    const reaped = Array.from({ length: 250 }, (_, i) => leak(i));
    const rest = {
      orphans: { rules: [], chains: [{ family: 'ipv6', table: 'nat', chain: 'CNI-o' }], reservations: [], cacheFiles: [] },
      failed: [{ allocId: 'f', error: 'boom', netnsName: '' }],
      namespaces: [],
    }; // prettier-ignore
    const parts: ReapLeaksProgress[] = [
      { summary: { ...rest, reaped: reaped.slice(0, 100) } },
      { summary: { reaped: reaped.slice(100, 200) } },
      { summary: { reaped: reaped.slice(200) } },
    ];
    const encoded = await encodeInSlices(serialize, parts);
    expect(isPreEncoded(encoded)).toBe(true);
    expect(deserialize(preEncodedBytes(encoded))).toEqual(
      deserialize(serialize({ summary: { ...rest, reaped } })),
    );
  });

  it('refuses parts that are not the one embedded message field', async () => {
    const error: unknown = await encodeInSlices(serialize, [
      { summary: { reaped: [leak(1)] } },
      { step: { done: 1, total: 2, allocId: 'x' } },
    ]).catch((e: unknown) => e);
    expect(isAgentError(error) && error.code).toBe('encode-failed');
  });
});
