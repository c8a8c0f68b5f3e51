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
