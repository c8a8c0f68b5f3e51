import { allocChains } from '@allocnet/cni-configurator';
import { createBatch } from '@allocnet/iptables-node';
import { LINES_PER_LEAK, addLeaks, leakId, leakIp } from './reap.js';

const ID = '1eaced00-0000-4000-8000-000000000000';
const TAG = ['-m', 'comment', '--comment', `name: "nomad" id: "${ID}"`];
const { masq, dnat } = allocChains('nomad', ID);
const BRIDGE = [
  { kind: 'newChain', table: 'nat', chain: masq },
  { kind: 'append', table: 'nat', chain: masq, spec: ['-d', '172.26.64.0/18', ...TAG, '-j', 'ACCEPT'] },
  { kind: 'append', table: 'nat', chain: masq, spec: ['!', '-d', '224.0.0.0/4', ...TAG, '-j', 'MASQUERADE'] },
  { kind: 'append', table: 'nat', chain: 'POSTROUTING', spec: ['-s', '172.26.64.2/32', ...TAG, '-j', masq] },
]; // prettier-ignore

describe('addLeaks', () => {
  it('writes the full shape: masquerade jump and chain, one tcp port’s DNAT jump and chain, the firewall’s accepts', () => {
    const tcp = ['-p', 'tcp', '-m', 'tcp', '--dport', '20000'];
    expect(addLeaks(createBatch(), 'full', 1).ops).toEqual([
      ...BRIDGE,
      { kind: 'newChain', table: 'nat', chain: dnat },
      { kind: 'append', table: 'nat', chain: dnat, spec: ['-s', '172.26.64.0/18', ...tcp, '-j', 'CNI-HOSTPORT-SETMARK'] },
      { kind: 'append', table: 'nat', chain: dnat, spec: ['-s', '127.0.0.1/32', ...tcp, '-j', 'CNI-HOSTPORT-SETMARK'] },
      { kind: 'append', table: 'nat', chain: dnat, spec: [...tcp, '-j', 'DNAT', '--to-destination', '172.26.64.2:8080'] },
      {
        kind: 'append', table: 'nat', chain: 'CNI-HOSTPORT-DNAT',
        spec: ['-p', 'tcp', '-m', 'comment', '--comment', `dnat name: "nomad" id: "${ID}"`, '-m', 'multiport', '--dports', '20000', '-j', dnat],
      },
      { kind: 'append', table: 'filter', chain: 'CNI-FORWARD', spec: ['-d', '172.26.64.2/32', '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', 'ACCEPT'] },
      { kind: 'append', table: 'filter', chain: 'CNI-FORWARD', spec: ['-s', '172.26.64.2/32', '-j', 'ACCEPT'] },
    ]); // prettier-ignore
  });

  it('writes the netns-deleted shape: the masquerade jump and chain only', () => {
    expect(addLeaks(createBatch(), 'netns-deleted', 1).ops).toEqual(BRIDGE);
  });

  it('is LINES_PER_LEAK iptables-save lines an allocation (chains declared, rules appended)', () => {
    expect(addLeaks(createBatch(), 'full', 3).size).toBe(3 * LINES_PER_LEAK.full);
    expect(addLeaks(createBatch(), 'netns-deleted', 3).size).toBe(
      3 * LINES_PER_LEAK['netns-deleted'],
    );
    expect(LINES_PER_LEAK).toEqual({ full: 11, 'netns-deleted': 4 });
  });

  it('gives 5,000 allocations distinct ids and addresses inside the /18', () => {
    const n = 5000;
    const ids = Array.from({ length: n }, (_, i) => leakId(i));
    expect(new Set(ids).size).toBe(n);
    // Like random allocation ids, not in the order made: sorted, few stay where they were.
    const sorted = [...ids].sort();
    expect(sorted.filter((id, k) => id === ids[k]).length).toBeLessThan(n / 100);
    const ips = Array.from({ length: n }, (_, i) => leakIp(i));
    expect(new Set(ips).size).toBe(n);
    expect(ips.at(-1)).toBe('172.26.83.251');
    for (const ip of ips) {
      const [, , third, fourth] = ip.split('.').map(Number);
      expect(third).toBeGreaterThanOrEqual(64);
      expect(third).toBeLessThan(128);
      expect(fourth).toBeGreaterThanOrEqual(2);
      expect(fourth).toBeLessThan(255);
    }
  });
});
