// A network's facts (facts.ts) as the plugins would read the same config.
import { parseNetworkConfig } from '@allocnet/cni';
import { networkFacts } from './facts.js';

function facts(ipam: Record<string, unknown>) {
  return networkFacts(
    parseNetworkConfig(
      { cniVersion: '1.0.0', name: 'n', plugins: [{ type: 'bridge', ipam }] },
      'test',
    ),
  );
}

it("finds host-local's directory where host-local keeps it: an empty dataDir is its default", () => {
  const ipam = { type: 'host-local', subnet: '10.1.0.0/24' };
  expect(facts({ ...ipam, dataDir: '/d' }).ipamDir).toBe('/d/n');
  expect(facts(ipam).ipamDir).toBe('/var/lib/cni/networks/n');
  expect(facts({ ...ipam, dataDir: '' }).ipamDir).toBe('/var/lib/cni/networks/n');
  expect(facts({ type: 'static', addresses: [] }).ipamDir).toBeUndefined();
});

describe('ipv4Only', () => {
  const v4 = { type: 'host-local', ranges: [[{ subnet: '10.1.0.0/24' }]] };

  it('holds when every IPAM is host-local and every subnet of theirs IPv4', () => {
    expect(facts(v4).ipv4Only).toBe(true);
    expect(facts({ type: 'host-local', subnet: '10.1.0.0/24' }).ipv4Only).toBe(true);
    expect(
      facts({
        type: 'host-local',
        ranges: [[{ subnet: '10.1.0.0/24' }], [{ subnet: '10.2.0.0/24' }]],
      }).ipv4Only,
    ).toBe(true);
  });

  it('does not hold with an IPv6 range, another IPAM, no subnet, or ranges a runtime may swap', () => {
    expect(
      facts({
        type: 'host-local',
        ranges: [[{ subnet: '10.1.0.0/24' }], [{ subnet: 'fd00::/64' }]],
      }).ipv4Only,
    ).toBe(false);
    expect(facts({ type: 'static', addresses: [{ address: '10.1.0.2/24' }] }).ipv4Only).toBe(false);
    expect(facts({ type: 'dhcp' }).ipv4Only).toBe(false);
    expect(facts({ type: 'host-local' }).ipv4Only).toBe(false);
    const swappable = networkFacts(
      parseNetworkConfig(
        {
          cniVersion: '1.0.0',
          name: 'n',
          plugins: [{ type: 'bridge', capabilities: { ipRanges: true }, ipam: v4 }],
        },
        'test',
      ),
    );
    expect(swappable.ipv4Only).toBe(false);
  });

  it('does not hold when a second plugin’s IPAM is not host-local', () => {
    const two = networkFacts(
      parseNetworkConfig(
        {
          cniVersion: '1.0.0',
          name: 'n',
          plugins: [
            { type: 'bridge', ipam: v4 },
            { type: 'tuning', ipam: { type: 'dhcp' } },
          ],
        },
        'test',
      ),
    );
    expect(two.ipv4Only).toBe(false);
  });
});
