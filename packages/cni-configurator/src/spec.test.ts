import { decodeSpec } from './spec.js';

const valid = {
  allocId: '6b235529-8111-4bbe-520b-d639b1d2a94e',
  namespace: 'default',
  jobId: 'web',
  groupName: 'g',
};

describe('decodeSpec', () => {
  it('accepts a full spec', () => {
    const spec = {
      ...valid,
      region: 'eu',
      network: 'mynet',
      ports: [{ label: 'http', value: 8080, to: 80, hostIp: 'fd00::1' }],
      legacyNetworks: [{ reservedPorts: [{ label: 'r', value: 22 }], dynamicPorts: [] }],
      cniArgs: { Foo: 'bar', Empty: '' },
      ips: ['10.88.0.9', '10.88.0.10/24', 'fd88::9/64'],
      mac: '02:a2:9c:00:00:01',
      defaultRoute: false,
    };
    expect(decodeSpec(spec)).toEqual(spec);
  });

  it.each([
    ['allocId is empty', { ...valid, allocId: '' }],
    [
      'allocId "a/b" has characters other than [a-zA-Z0-9_.-] or starts with one of "_.-"',
      { ...valid, allocId: 'a/b' },
    ],
    ['allocId is 65 characters long; at most 64', { ...valid, allocId: 'x'.repeat(65) }],
    [
      'jobId "a;b" contains ";", "=" or a NUL character, which CNI_ARGS cannot carry',
      { ...valid, jobId: 'a;b' },
    ],
    ['namespace is empty', { ...valid, namespace: '' }],
    ['groupName is missing', { ...valid, groupName: undefined }],
    [
      'network "no/slash" does not match ^[a-zA-Z0-9][a-zA-Z0-9_.-]*$',
      { ...valid, network: 'no/slash' },
    ],
    [
      'ports[0].value should be a port number from 1 to 65535, got 0',
      { ...valid, ports: [{ label: 'a', value: 0 }] },
    ],
    [
      'ports[0].value should be a port number from 1 to 65535, got 70000',
      { ...valid, ports: [{ label: 'a', value: 70000 }] },
    ],
    [
      'ports[0].to should be a port number up to 65535 (below 1: the host port), got 65536',
      { ...valid, ports: [{ label: 'a', value: 80, to: 65536 }] },
    ],
    [
      'ports[0].value should be a port number from 1 to 65535, got 8.5',
      { ...valid, ports: [{ label: 'a', value: 8.5 }] },
    ],
    ['ports[0].label is empty', { ...valid, ports: [{ label: '', value: 80 }] }],
    [
      'ips[1] "10.0.0.300" is not an IPv4 or IPv6 address (with or without a prefix length)',
      { ...valid, ips: ['10.0.0.3', '10.0.0.300'] },
    ],
    [
      'ips[0] "fe80::1%eth0" is not an IPv4 or IPv6 address (with or without a prefix length)',
      { ...valid, ips: ['fe80::1%eth0'] },
    ],
    [
      'ips[0] "10.0.0.3/33" has a prefix length other than 0 to 32',
      { ...valid, ips: ['10.0.0.3/33'] },
    ],
    [
      'ips[0] "fd00::3/x" has a prefix length other than 0 to 128',
      { ...valid, ips: ['fd00::3/x'] },
    ],
    ['ips has 17 addresses; at most 16', { ...valid, ips: Array(17).fill('10.0.0.1') }],
    ['ips should be a list of addresses, got "10.0.0.1"', { ...valid, ips: '10.0.0.1' }],
    [
      'mac "02:00:00:00:00" is not a MAC address (six colon-separated pairs of hex digits)',
      { ...valid, mac: '02:00:00:00:00' },
    ],
    [
      'mac "01:00:5e:00:00:01" is a multicast address; an interface needs a unicast one',
      { ...valid, mac: '01:00:5e:00:00:01' },
    ],
    ['defaultRoute should be boolean, got "no"', { ...valid, defaultRoute: 'no' }],
    [
      'ports[0].hostIp "10.0.0.300" is not an IPv4 or IPv6 address',
      { ...valid, ports: [{ label: 'a', value: 80, hostIp: '10.0.0.300' }] },
    ],
    [
      'legacyNetworks[0].dynamicPorts[0].value should be a port number from 1 to 65535, got -3',
      { ...valid, legacyNetworks: [{ dynamicPorts: [{ label: 'd', value: -3 }] }] },
    ],
    [
      'cniArgs.NOMAD_ALLOC_ID is set by allocnet and cannot be given',
      { ...valid, cniArgs: { NOMAD_ALLOC_ID: 'x' } },
    ],
    [
      'cniArgs.IgnoreUnknown is set by allocnet and cannot be given',
      { ...valid, cniArgs: { IgnoreUnknown: '0' } },
    ],
    [
      'cniArgs.A=B "A=B" contains ";", "=" or a NUL character, which CNI_ARGS cannot carry',
      { ...valid, cniArgs: { 'A=B': 'x' } },
    ],
    [
      'cniArgs.K "v;w" contains ";", "=" or a NUL character, which CNI_ARGS cannot carry',
      { ...valid, cniArgs: { K: 'v;w' } },
    ],
    ['cniArgs.K should be a string, got 3', { ...valid, cniArgs: { K: 3 } }],
    [
      'ports has 1025 ports; at most 1024',
      {
        ...valid,
        ports: Array.from({ length: 1025 }, (_, i) => ({ label: `p${i}`, value: 1 + i })),
      },
    ],
  ])('refuses it: %s', (message, spec) => {
    expect(() => decodeSpec(spec)).toThrow(message);
    try {
      decodeSpec(spec);
    } catch (error) {
      expect(error).toMatchObject({ code: 'invalid-argument', message });
    }
  });
});
