import { encodeResult, ipFamily, parseResult } from './result.js';

// The Debian bridge plugin's ADD result at 1.0.0 (measured), and loopback's at 0.4.0.
const BRIDGE = {
  cniVersion: '1.0.0',
  interfaces: [
    { name: 'nomad', mac: '82:70:84:6d:04:ff' },
    { name: 'vetha72bb5bd', mac: 'be:8f:e9:44:84:69' },
    { name: 'eth0', mac: 'fa:14:2a:af:f5:16', sandbox: '/run/netns/c1' },
  ],
  ips: [{ interface: 2, address: '172.26.64.2/20', gateway: '172.26.64.1' }],
  routes: [{ dst: '0.0.0.0/0' }],
  dns: {},
};
const LOOPBACK_040 = {
  cniVersion: '0.4.0',
  interfaces: [{ name: 'lo', mac: '00:00:00:00:00:00', sandbox: '/run/netns/c1' }],
  ips: [
    { interface: 0, address: '127.0.0.1/8' },
    { interface: 0, address: '::1/128' },
  ],
  dns: {},
};

describe('parseResult', () => {
  it('keeps interfaces in the plugin’s order and drops nothing it knows', () => {
    const result = parseResult(BRIDGE, '1.0.0');
    expect(result.interfaces.map((i) => i.name)).toEqual(['nomad', 'vetha72bb5bd', 'eth0']);
    expect(result.ips).toEqual([
      { address: '172.26.64.2/20', gateway: '172.26.64.1', interface: 2 },
    ]);
    expect(result.routes).toEqual([{ dst: '0.0.0.0/0' }]);
  });

  it('reads a 0.4.0-labelled result without ips[].version (the Debian loopback plugin)', () => {
    const result = parseResult(LOOPBACK_040, '0.4.0');
    expect(result.cniVersion).toBe('0.4.0');
    expect(result.ips.map((ip) => ip.address)).toEqual(['127.0.0.1/8', '::1/128']);
  });

  it('labels an unlabelled result with the fallback version and reads null lists as empty', () => {
    expect(parseResult({ ips: null, interfaces: null, dns: null }, '1.0.0')).toEqual({
      cniVersion: '1.0.0',
      interfaces: [],
      ips: [],
      routes: [],
      dns: {},
    });
  });

  it.each([
    [
      { ...BRIDGE, ips: [{ interface: 3, address: '172.26.64.2/20' }] },
      'ips[0].interface 3 is not an index into interfaces (3 of them)',
    ],
    [
      { ...BRIDGE, ips: [{ interface: -1, address: '172.26.64.2/20' }] },
      'ips[0].interface -1 is not an index into interfaces (3 of them)',
    ],
    [
      { ...BRIDGE, ips: [{ address: '172.26.64.2' }] },
      'ips[0].address "172.26.64.2" is not a CIDR',
    ],
    [
      { ...BRIDGE, ips: [{ address: '172.26.64.2/20', gateway: 'x' }] },
      'ips[0].gateway "x" is not an address',
    ],
    [{ ...BRIDGE, routes: [{ dst: 'default' }] }, 'routes[0].dst "default" is not a CIDR'],
    [{ ...BRIDGE, interfaces: [{ mac: 'x' }] }, 'interfaces[0].name is missing'],
    [
      { cniVersion: '0.2.0', ip4: { ip: '10.0.0.2/24' } },
      'is a 0.1.0/0.2.0 result (ip4/ip6), which this runtime does not read',
    ],
  ])('refuses %j', (value, message) => {
    expect(() => parseResult(value, '1.0.0')).toThrow(message);
  });
});

describe('encodeResult', () => {
  const result = parseResult(BRIDGE, '1.0.0');

  it('writes 1.0.0 without ips[].version and without an empty dns', () => {
    expect(encodeResult(result, '1.0.0')).toEqual({
      cniVersion: '1.0.0',
      interfaces: BRIDGE.interfaces,
      ips: BRIDGE.ips,
      routes: BRIDGE.routes,
    });
  });

  it('writes 0.4.0 and 0.3.1 with ips[].version from the address, and dns always', () => {
    const lo = parseResult(LOOPBACK_040, '0.4.0');
    expect(encodeResult(lo, '0.3.1')).toEqual({
      cniVersion: '0.3.1',
      interfaces: LOOPBACK_040.interfaces,
      ips: [
        { version: '4', interface: 0, address: '127.0.0.1/8' },
        { version: '6', interface: 0, address: '::1/128' },
      ],
      dns: {},
    });
  });

  it('drops the 1.1 interface fields below 1.0.0 and round-trips 0.4.0 to 1.0.0', () => {
    const withMtu = parseResult(
      { ...BRIDGE, interfaces: [{ name: 'eth0', mtu: 1400, socketPath: '/s' }], ips: [] },
      '1.1.0',
    );
    expect(encodeResult(withMtu, '0.4.0').interfaces).toEqual([{ name: 'eth0' }]);
    expect(encodeResult(withMtu, '1.1.0').interfaces).toEqual([
      { name: 'eth0', mtu: 1400, socketPath: '/s' },
    ]);
    const back = parseResult(encodeResult(result, '0.4.0'), '0.4.0');
    expect(encodeResult(back, '1.0.0')).toEqual(encodeResult(result, '1.0.0'));
  });

  it('counts an IPv4-mapped IPv6 address as 4, as libcni does', () => {
    expect(ipFamily('::ffff:10.0.0.1/128')).toBe('4');
    expect(ipFamily('fd00::1/64')).toBe('6');
  });
});
