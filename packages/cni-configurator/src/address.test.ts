import { parseResult } from '@allocnet/cni';
import { NO_ADDRESS, dnsOf, pickAddress } from './address.js';

const result = (value: unknown) => parseResult(value, '1.0.0');

describe('pickAddress', () => {
  it('picks the first interface inside the sandbox that has an address, in result order', () => {
    const r = result({
      cniVersion: '1.0.0',
      interfaces: [
        { name: 'nomad' },
        { name: 'veth1' },
        { name: 'eth0', sandbox: '/run/netns/a' },
        { name: 'eth1', sandbox: '/run/netns/a' },
      ],
      ips: [
        { address: '172.26.64.1/20', interface: 0 },
        { address: '10.1.0.9/24', interface: 3 },
        { address: 'fd00::5/64', interface: 2 },
        { address: '172.26.64.7/20', interface: 2 },
        { address: '172.26.64.8/20', interface: 2 },
      ],
    });
    expect(pickAddress(r)).toEqual({
      interfaceName: 'eth0',
      address: '172.26.64.7',
      addressIpv6: 'fd00::5',
    });
  });

  it('falls back to the first interface with any address when none in the sandbox has one', () => {
    const r = result({
      cniVersion: '1.0.0',
      interfaces: [{ name: 'eth0', sandbox: '/run/netns/a' }, { name: 'br0' }, { name: 'br1' }],
      ips: [
        { address: '10.0.0.2/24', interface: 2 },
        { address: '10.0.1.2/24', interface: 1 },
      ],
    });
    expect(pickAddress(r)).toEqual({ interfaceName: 'br0', address: '10.0.1.2', addressIpv6: '' });
  });

  it('takes an IPv6-only interface', () => {
    const r = result({
      cniVersion: '1.0.0',
      interfaces: [{ name: 'eth0', sandbox: '/x' }],
      ips: [{ address: 'fd00:a:b::2/64', interface: 0 }],
    });
    expect(pickAddress(r)).toEqual({
      interfaceName: 'eth0',
      address: '',
      addressIpv6: 'fd00:a:b::2',
    });
  });

  it('finds none when no interface has an address (addresses that name no interface do not count)', () => {
    const r = result({
      cniVersion: '1.0.0',
      interfaces: [{ name: 'eth0', sandbox: '/x' }],
      ips: [{ address: '10.0.0.2/24' }],
    });
    expect(pickAddress(r)).toBeUndefined();
    expect(NO_ADDRESS).toBe('no interface with an address');
  });
});

describe('dnsOf', () => {
  it('maps the result DNS, or nothing when it is empty', () => {
    expect(
      dnsOf(
        result({
          cniVersion: '1.0.0',
          dns: { nameservers: ['10.0.0.53'], search: ['svc'], options: ['ndots:2'] },
        }),
      ),
    ).toEqual({
      servers: ['10.0.0.53'],
      searches: ['svc'],
      options: ['ndots:2'],
    });
    expect(dnsOf(result({ cniVersion: '1.0.0' }))).toBeUndefined();
  });
});
