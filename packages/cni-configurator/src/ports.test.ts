import { portMappings, portMappingsOverlap, requestedPortMappings } from './ports.js';
import type { AllocNetworkSpec } from './types.js';

const base: AllocNetworkSpec = {
  allocId: 'a1',
  namespace: 'default',
  jobId: 'web',
  groupName: 'g',
};

describe('portMappings', () => {
  it('maps each port to tcp and udp; `to` < 1 means the value; host IPs are kept', () => {
    expect(
      portMappings(
        {
          ...base,
          ports: [
            { label: 'http', value: 8080, to: 80 },
            { label: 'admin', value: 9000, to: 0, hostIp: '10.0.0.5' },
            { label: 'raw', value: 9001, to: -1 },
            { label: 'plain', value: 9002 },
          ],
        },
        false,
      ),
    ).toEqual([
      { hostPort: 8080, containerPort: 80, protocol: 'tcp' },
      { hostPort: 8080, containerPort: 80, protocol: 'udp' },
      { hostPort: 9000, containerPort: 9000, protocol: 'tcp', hostIP: '10.0.0.5' },
      { hostPort: 9000, containerPort: 9000, protocol: 'udp', hostIP: '10.0.0.5' },
      { hostPort: 9001, containerPort: 9001, protocol: 'tcp' },
      { hostPort: 9001, containerPort: 9001, protocol: 'udp' },
      { hostPort: 9002, containerPort: 9002, protocol: 'tcp' },
      { hostPort: 9002, containerPort: 9002, protocol: 'udp' },
    ]);
  });

  it("maps a port with a protocol (a CNI runtime's mapping) to that protocol only", () => {
    const spec = {
      ...base,
      ports: [
        { label: 'dns-tcp', value: 53, protocol: 'tcp' as const },
        { label: 'dns-udp', value: 53, to: 5353, protocol: 'udp' as const },
      ],
    };
    expect(portMappings(spec, false)).toEqual([
      { hostPort: 53, containerPort: 53, protocol: 'tcp' },
      { hostPort: 53, containerPort: 5353, protocol: 'udp' },
    ]);
    // One host port, one protocol, twice: the second claim is refused, naming both.
    expect(() =>
      portMappings(
        {
          ...base,
          ports: [
            { label: 'a', value: 53, protocol: 'udp' },
            { label: 'b', value: 53 },
          ],
        },
        false,
      ),
    ).toThrow(
      'ports[1].value ("b") claims host port 53, which ports[0].value ("a") already claims',
    );
  });

  it('drops host IPs when the agent ignores them', () => {
    expect(
      portMappings({ ...base, ports: [{ label: 'a', value: 25, hostIp: '10.0.0.5' }] }, true),
    ).toEqual([
      { hostPort: 25, containerPort: 25, protocol: 'tcp' },
      { hostPort: 25, containerPort: 25, protocol: 'udp' },
    ]);
  });

  it('uses the legacy reserved then dynamic ports of every network, never with a host IP', () => {
    expect(
      portMappings(
        {
          ...base,
          legacyNetworks: [
            {
              reservedPorts: [{ label: 'r', value: 22, to: 2222 }],
              dynamicPorts: [{ label: 'd', value: 20000 }],
            },
            { dynamicPorts: [{ label: 'd2', value: 20001, to: 0 }] },
          ],
        },
        false,
      ),
    ).toEqual([
      { hostPort: 22, containerPort: 2222, protocol: 'tcp' },
      { hostPort: 22, containerPort: 2222, protocol: 'udp' },
      { hostPort: 20000, containerPort: 20000, protocol: 'tcp' },
      { hostPort: 20000, containerPort: 20000, protocol: 'udp' },
      { hostPort: 20001, containerPort: 20001, protocol: 'tcp' },
      { hostPort: 20001, containerPort: 20001, protocol: 'udp' },
    ]);
  });

  it('ignores the legacy ports when the allocation has ports', () => {
    expect(
      portMappings(
        {
          ...base,
          ports: [{ label: 'p', value: 1 }],
          legacyNetworks: [{ dynamicPorts: [{ label: 'd', value: 2 }] }],
        },
        false,
      ).map((m) => m.hostPort),
    ).toEqual([1, 1]);
  });

  it('has no mappings without ports', () => {
    expect(portMappings(base, false)).toEqual([]);
  });

  it('refuses two ports claiming the same host port, naming both labels', () => {
    expect(() =>
      portMappings(
        {
          ...base,
          ports: [
            { label: 'http', value: 8080 },
            { label: 'admin', value: 8080, to: 81 },
          ],
        },
        false,
      ),
    ).toThrow(
      'ports[1].value ("admin") claims host port 8080, which ports[0].value ("http") already claims',
    );
    expect(() =>
      portMappings(
        {
          ...base,
          ports: [
            { label: 'a', value: 80, hostIp: '10.0.0.1' },
            { label: 'b', value: 80 },
          ],
        },
        false,
      ),
    ).toThrow(
      'ports[1].value ("b") claims host port 80, which ports[0].value ("a") already claims',
    );
    expect(() =>
      portMappings(
        {
          ...base,
          legacyNetworks: [
            { reservedPorts: [{ label: 'r', value: 53 }] },
            { dynamicPorts: [{ label: 'd', value: 53 }] },
          ],
        },
        false,
      ),
    ).toThrow(
      'legacyNetworks[1].dynamicPorts[0].value ("d") claims host port 53, which legacyNetworks[0].reservedPorts[0].value ("r") already claims',
    );
  });

  it('lets one port number serve two different host addresses', () => {
    expect(
      portMappings(
        {
          ...base,
          ports: [
            { label: 'a', value: 80, hostIp: '10.0.0.1' },
            { label: 'b', value: 80, hostIp: '10.0.0.2' },
          ],
        },
        false,
      ),
    ).toHaveLength(4);
  });

  it('refuses two spellings of one host address, as portmap reads them', () => {
    expect(() =>
      portMappings(
        {
          ...base,
          ports: [
            { label: 'a', value: 80, hostIp: '10.0.0.1' },
            { label: 'b', value: 80, hostIp: '::ffff:10.0.0.1' },
          ],
        },
        false,
      ),
    ).toThrow(
      'ports[1].value ("b") claims host port 80, which ports[0].value ("a") already claims',
    );
  });
});

describe('requestedPortMappings', () => {
  it("gives each mapping the spec's field and label", () => {
    expect(
      requestedPortMappings(
        { ...base, ports: [{ label: 'dns', value: 53, protocol: 'udp', hostIp: 'fd00::1' }] },
        true,
      ),
    ).toEqual([
      {
        hostPort: 53,
        containerPort: 53,
        protocol: 'udp',
        field: ['ports', 0, 'value'],
        label: 'dns',
      },
    ]);
  });
});

describe('portMappingsOverlap', () => {
  const at = (hostIP?: string, protocol: 'tcp' | 'udp' = 'tcp', hostPort = 80) => ({
    hostPort,
    protocol,
    ...(hostIP === undefined ? {} : { hostIP }),
  });

  it.each([
    ['the same address', at('10.0.0.1'), at('10.0.0.1'), true],
    ['every address and one', at(), at('10.0.0.1'), true],
    ['an empty host IP and every address', at(''), at(), true],
    ['two spellings of one IPv6 address', at('fd00::1'), at('fd00:0:0::1'), true],
    ['two addresses', at('10.0.0.1'), at('10.0.0.2'), false],
    ['an IPv4 and an IPv6 address', at('10.0.0.1'), at('fd00::1'), false],
    ['tcp and udp', at(), at(undefined, 'udp'), false],
    ['two port numbers', at(), at(undefined, 'tcp', 81), false],
  ])('%s', (_what, a, b, expected) => {
    expect([portMappingsOverlap(a, b), portMappingsOverlap(b, a)]).toEqual([expected, expected]);
  });
});
