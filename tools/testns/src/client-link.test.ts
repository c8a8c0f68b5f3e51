import { DEFAULT_CLIENT_SUBNET, clientLinkAddresses } from './client-link.js';

describe('clientLinkAddresses', () => {
  it('puts the node on .1 and the client on .2, 10.99.0.0/24 unless told', () => {
    expect(clientLinkAddresses(DEFAULT_CLIENT_SUBNET)).toEqual({
      node: '10.99.0.1',
      client: '10.99.0.2',
    });
    expect(clientLinkAddresses('192.0.2.0/24')).toEqual({ node: '192.0.2.1', client: '192.0.2.2' });
  });

  it.each([
    '10.99.0.0/16',
    '10.99.0.5/24',
    '10.99.0.0',
    '256.1.1.0/24',
    '010.1.1.0/24',
    'fd00::/64',
  ])('refuses %s', (subnet) => {
    expect(() => clientLinkAddresses(subnet)).toThrow(
      `client subnet "${subnet}" is not an IPv4 /24 written as its network address (a.b.c.0/24)`,
    );
  });
});
