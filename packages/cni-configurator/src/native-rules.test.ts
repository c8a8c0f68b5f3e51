import { parseNetworkConfig } from '@allocnet/cni';
import { nativePlugins, portmapWrite } from './native-rules.js';

/** Nomad's chain with the firewall's and portmap's configs replaced by `firewall` and `portmap`. */
function chain(
  firewall: Record<string, unknown>,
  portmap: Record<string, unknown>,
  extra: Record<string, unknown> = {},
) {
  return parseNetworkConfig(
    {
      cniVersion: '1.0.0',
      name: 'net',
      ...extra,
      plugins: [
        { type: 'loopback' },
        {
          type: 'bridge',
          bridge: 'br0',
          ipMasq: true,
          ipam: { type: 'host-local', subnet: '10.9.0.0/24' },
        },
        { type: 'firewall', ...firewall },
        { type: 'portmap', ...portmap },
      ],
    },
    'test',
  );
}

const FIREWALL = { backend: 'iptables', iptablesAdminChainName: 'NOMAD-ADMIN' };
const PORTMAP = { capabilities: { portMappings: true }, snat: true };

describe('nativePlugins', () => {
  it('writes Nomad’s firewall and portmap natively, with their defaults', () => {
    expect(nativePlugins(chain(FIREWALL, PORTMAP))).toEqual({
      firewall: { adminChain: 'NOMAD-ADMIN' },
      portmap: { snat: true, markBit: 13 },
      fallbacks: [],
    });
    expect(
      nativePlugins(chain({ backend: 'iptables' }, { ...PORTMAP, snat: false, markMasqBit: 5 })),
    ).toEqual({
      firewall: { adminChain: 'CNI-ADMIN' },
      portmap: { snat: false, markBit: 5 },
      fallbacks: [],
    });
  });

  it.each([
    [
      'no backend (firewalld when it runs)',
      {},
      'backend: undefined is not what the native path writes',
    ],
    [
      'firewalld',
      { backend: 'firewalld' },
      'backend: "firewalld" is not what the native path writes',
    ],
    [
      'an ingress policy',
      { ...FIREWALL, ingressPolicy: 'same-bridge' },
      'ingressPolicy: "same-bridge" is not what the native path writes',
    ],
    [
      'an admin chain it does not expect',
      { ...FIREWALL, iptablesAdminChainName: 'FORWARD' },
      'iptablesAdminChainName: "FORWARD" is not an admin chain the native path expects',
    ],
    [
      'an admin chain name iptables cannot hold',
      { ...FIREWALL, iptablesAdminChainName: 'bad name' },
      'iptablesAdminChainName: "bad name" is not an admin chain the native path expects',
    ],
    ['an unknown key', { ...FIREWALL, futureKey: 1 }, 'futureKey: not known to the native path'],
  ])('runs the firewall itself with %s', (_, firewall, reason) => {
    const found = nativePlugins(chain(firewall, PORTMAP));
    expect(found.firewall).toBeUndefined();
    expect(found.portmap).toEqual({ snat: true, markBit: 13 });
    expect(found.fallbacks).toEqual([{ type: 'firewall', reason }]);
  });

  it.each([
    [
      'conditionsV4',
      { ...PORTMAP, conditionsV4: ['-s', '1.2.3.4'] },
      'conditionsV4: not known to the native path',
    ],
    [
      'conditionsV6',
      { ...PORTMAP, conditionsV6: ['-s', '::1'] },
      'conditionsV6: not known to the native path',
    ],
    ['masqAll', { ...PORTMAP, masqAll: true }, 'masqAll: not known to the native path'],
    [
      'externalSetMarkChain',
      { ...PORTMAP, externalSetMarkChain: 'KUBE-MARK-MASQ' },
      'externalSetMarkChain: not known to the native path',
    ],
    ['a backend', { ...PORTMAP, backend: 'nftables' }, 'backend: not known to the native path'],
    ['an unknown key', { ...PORTMAP, futureKey: 'x' }, 'futureKey: not known to the native path'],
    [
      'a mark bit out of range',
      { ...PORTMAP, markMasqBit: 32 },
      'markMasqBit: 32 is not what the native path writes',
    ],
    [
      'snat that is not a boolean',
      { ...PORTMAP, snat: 'yes' },
      'snat: "yes" is not what the native path writes',
    ],
    [
      'no portMappings capability',
      { snat: true },
      'capabilities: undefined is not what the native path writes',
    ],
  ])('runs portmap itself with %s', (_, portmap, reason) => {
    const found = nativePlugins(chain(FIREWALL, portmap));
    expect(found.portmap).toBeUndefined();
    expect(found.firewall).toEqual({ adminChain: 'NOMAD-ADMIN' });
    expect(found.fallbacks).toEqual([{ type: 'portmap', reason }]);
  });

  it('runs the firewall itself at a version it does not share with the chain', () => {
    const found = nativePlugins(chain(FIREWALL, PORTMAP, { cniVersion: '0.3.1' }));
    expect(found.firewall).toBeUndefined();
    expect(found.fallbacks).toEqual([
      {
        type: 'firewall',
        reason: 'cniVersion: the network offers 0.3.1; the firewall speaks 0.4.0 and 1.0.0',
      },
    ]);
  });

  it('runs both itself when another plugin runs between them and the main plugin', () => {
    const network = parseNetworkConfig(
      {
        cniVersion: '1.0.0',
        name: 'net',
        plugins: [
          { type: 'bridge', ipam: { type: 'host-local', subnet: '10.9.0.0/24' } },
          { type: 'tuning' },
          { type: 'firewall', ...FIREWALL },
          { type: 'portmap', ...PORTMAP },
        ],
      },
      'test',
    );
    const reason = 'plugin "tuning" runs between it and the main plugin';
    expect(nativePlugins(network)).toEqual({
      fallbacks: [
        { type: 'firewall', reason },
        { type: 'portmap', reason },
      ],
    });
  });
});

describe('portmapWrite', () => {
  const mappings = [
    { hostPort: 8080, containerPort: 80, protocol: 'tcp' as const },
    { hostPort: 53, containerPort: 5353, protocol: 'udp' as const, hostIP: '10.1.2.3' },
    { hostPort: 9090, containerPort: 90, protocol: 'tcp' as const, hostIP: 'fd00:1::5' },
  ];

  it('writes per mapping of the family its mark rules and DNAT, and per protocol every port', () => {
    const w = portmapWrite('net', 'id1', mappings, '10.9.0.5/24', { snat: true, markBit: 13 });
    expect(w.rules.map((r) => r.join(' '))).toEqual([
      '-s 10.9.0.0/24 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK',
      '-s 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK',
      '-p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.9.0.5:80',
      '-s 10.9.0.0/24 -d 10.1.2.3/32 -p udp -m udp --dport 53 -j CNI-HOSTPORT-SETMARK',
      '-s 127.0.0.1/32 -d 10.1.2.3/32 -p udp -m udp --dport 53 -j CNI-HOSTPORT-SETMARK',
      '-d 10.1.2.3/32 -p udp -m udp --dport 53 -j DNAT --to-destination 10.9.0.5:5353',
    ]);
    // The jumps name every mapping's port, the other family's too, as portmap 1.1.1 does.
    expect(w.entries.map((e) => [e[1], e[9]])).toEqual([
      ['tcp', '8080,9090'],
      ['udp', '53'],
    ]);
  });

  it('writes IPv6 without the localhost rule, and without snat no mark rules at all', () => {
    const v6 = portmapWrite('net', 'id1', mappings, 'fd00:a::5/64', { snat: true, markBit: 13 });
    expect(v6.rules.map((r) => r.join(' '))).toEqual([
      '-s fd00:a::/64 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK',
      '-p tcp -m tcp --dport 8080 -j DNAT --to-destination [fd00:a::5]:80',
      '-s fd00:a::/64 -d fd00:1::5/128 -p tcp -m tcp --dport 9090 -j CNI-HOSTPORT-SETMARK',
      '-d fd00:1::5/128 -p tcp -m tcp --dport 9090 -j DNAT --to-destination [fd00:a::5]:90',
    ]);
    const plain = portmapWrite('net', 'id1', mappings, '10.9.0.5/24', { snat: false, markBit: 13 });
    expect(plain.rules.every((r) => r.at(-3) === 'DNAT')).toBe(true);
  });
});
