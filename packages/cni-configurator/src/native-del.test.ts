// Which plugins' state a teardown removes itself (native-del.ts), per network. What the removal
// does on iptables is in configurator.test.ts (teardown) and, on the real plugins, in the
// integration tests.
import { parseNetworkConfig } from '@allocnet/cni';
import type { ConfiguratorContext } from './context.js';
import { nativeDel } from './native-del.js';
import type { AllocAttachment } from './types.js';

const attachment = { allocId: 'a1', addresses: ['10.1.0.2'] } as unknown as AllocAttachment;
// Only `remove` uses the context; these tests never call it.
const ctx = {} as ConfiguratorContext;

function network(...plugins: Record<string, unknown>[]) {
  return parseNetworkConfig({ cniVersion: '1.0.0', name: 'n', plugins }, 'test');
}

const ipam = { type: 'host-local', subnet: '10.1.0.0/24' };

it('leaves portmap out and tells bridge or ptp not to un-masquerade, keeping the rest as is', () => {
  for (const main of ['bridge', 'ptp']) {
    const net = network(
      { type: 'loopback' },
      { type: main, ipMasq: true, ipam },
      { type: 'firewall' },
      { type: 'portmap', capabilities: { portMappings: true }, snat: true },
    );
    const planned = nativeDel(ctx, net, attachment);
    expect(planned?.network.plugins.map((p) => p.raw)).toEqual([
      { type: 'loopback' },
      { type: main, ipMasq: false, ipam },
      // No backend: the plugin picks firewalld when it runs, so it runs.
      { type: 'firewall' },
    ]);
    expect(planned?.network.name).toBe('n');
  }
});

it('leaves alone the plugins whose state is not iptables chains it knows', () => {
  // Without ipMasq, a backend other than iptables, or no such plugin at all: the plugins do it.
  expect(nativeDel(ctx, network({ type: 'bridge', ipam }), attachment)).toBeUndefined();
  expect(
    nativeDel(
      ctx,
      network(
        { type: 'bridge', ipMasq: true, ipMasqBackend: 'nftables', ipam },
        { type: 'portmap', backend: 'nftables', capabilities: { portMappings: true } },
      ),
      attachment,
    ),
  ).toBeUndefined();
  expect(
    nativeDel(ctx, network({ type: 'macvlan', master: 'eth0', ipam }), attachment),
  ).toBeUndefined();
  // Only the one it knows: portmap on iptables goes, the nftables masquerade stays the bridge's.
  const mixed = network(
    { type: 'bridge', ipMasq: true, ipMasqBackend: 'nftables', ipam },
    { type: 'portmap', backend: 'iptables', capabilities: { portMappings: true } },
  );
  expect(nativeDel(ctx, mixed, attachment)?.network.plugins.map((p) => p.raw)).toEqual([
    { type: 'bridge', ipMasq: true, ipMasqBackend: 'nftables', ipam },
  ]);
});

it('removes the firewall’s accepts itself only for a firewall the setup writes itself', () => {
  // Alone, on iptables: the firewall goes, the rest stays as is.
  const alone = nativeDel(
    ctx,
    network({ type: 'bridge', ipam }, { type: 'firewall', backend: 'iptables' }),
    attachment,
  );
  expect(alone?.network.plugins.map((p) => p.raw)).toEqual([{ type: 'bridge', ipam }]);
  // An option the native path does not know, firewalld, or no bridge or ptp before it: the plugin runs.
  for (const firewall of [
    { type: 'firewall' },
    { type: 'firewall', backend: 'firewalld' },
    { type: 'firewall', ingressPolicy: 'same-bridge' },
    { type: 'firewall', someKey: true },
  ])
    expect(nativeDel(ctx, network({ type: 'bridge', ipam }, firewall), attachment)).toBeUndefined();
  expect(
    nativeDel(ctx, network({ type: 'firewall' }, { type: 'bridge', ipam }), attachment),
  ).toBeUndefined();
});
