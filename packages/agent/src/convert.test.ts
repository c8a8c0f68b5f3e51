// Records as AllocNetworkStatus: every attachment, the primary first, with what its recorded CNI
// result says about its interface.
import type { AllocRecord, ExtraAttachment } from '@allocnet/alloc-runner';
import type { CniResult } from '@allocnet/cni';
import type { AllocAttachment, AllocNetworkStatus } from '@allocnet/cni-configurator';
import { statusMessage } from './convert.js';

const NETNS = '/run/netns/alloc-a1';
const SPEC = { allocId: 'a1', namespace: 'default', jobId: 'web', groupName: 'api' };

function attachmentOf(network: string, ifName: string, result?: CniResult): AllocAttachment {
  return {
    allocId: 'a1',
    network: { name: network, config: '{}' },
    netns: NETNS,
    ifName,
    args: [],
    portMappings: [],
    addresses: [],
    ...(result === undefined ? {} : { result }),
  };
}

function statusOf(network: string, ifName: string, address: string): AllocNetworkStatus {
  return {
    allocId: 'a1',
    network,
    interfaceName: ifName,
    address,
    addressIpv6: '',
    dns: undefined,
    portMappings: [],
    attempts: 1,
  };
}

// bridge's result: the bridge and the host veth first, the sandbox's eth0 last.
const bridgeResult: CniResult = {
  cniVersion: '1.0.0',
  interfaces: [
    { name: 'nomad', mac: '9a:00:00:00:00:01' },
    { name: 'veth1234', mac: '9a:00:00:00:00:02' },
    { name: 'eth0', mac: '0a:58:ac:1a:40:05', sandbox: NETNS },
  ],
  ips: [
    { address: '172.26.64.5/20', gateway: '172.26.64.1', interface: 2 },
    { address: 'fd00:a::5/64', gateway: 'fd00:a::1', interface: 2 },
  ],
  routes: [{ dst: '0.0.0.0/0' }],
  dns: { nameservers: ['172.26.64.1'] },
};

// macvlan's: the one interface, in the sandbox.
const macvlanResult: CniResult = {
  cniVersion: '1.0.0',
  interfaces: [{ name: 'net1', mac: '0a:58:0a:09:00:07', sandbox: NETNS }],
  ips: [{ address: '10.9.0.7/24', interface: 0 }],
  routes: [],
  dns: {},
};

function record(extra: readonly ExtraAttachment[] | undefined): AllocRecord {
  return {
    schema: 1,
    allocId: 'a1',
    spec: SPEC,
    phase: 'ready',
    netnsPath: NETNS,
    netnsCreated: true,
    attachment: attachmentOf('nomad', 'eth0', bridgeResult),
    status: {
      ...statusOf('nomad', 'eth0', '172.26.64.5'),
      addressIpv6: 'fd00:a::5',
      dns: { servers: ['172.26.64.1'], searches: [], options: [] },
      portMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp' }],
    },
    updatedAtMs: 1,
    ...(extra === undefined ? {} : { extra }),
  };
}

const emptyDns = { servers: [], searches: [], options: [] };

describe('statusMessage', () => {
  it('lists every attachment, primary first, from the recorded results', () => {
    const status = statusMessage(
      record([
        {
          spec: {
            allocId: 'a1',
            namespace: 'default',
            jobId: 'web',
            groupName: 'api',
            network: 'storage',
            ifName: 'net1',
          },
          phase: 'ready',
          attached: false,
          attachment: attachmentOf('storage', 'net1', macvlanResult),
          status: statusOf('storage', 'net1', '10.9.0.7'),
        },
        {
          spec: {
            allocId: 'a1',
            namespace: 'default',
            jobId: 'web',
            groupName: 'api',
            network: 'vlan10',
            ifName: 'net2',
          },
          phase: 'setting-up',
          attached: true,
        },
      ]),
      'nomad',
    );
    // The top-level fields stay the primary's.
    expect([status.network, status.interfaceName, status.address]).toEqual([
      'nomad',
      'eth0',
      '172.26.64.5',
    ]);
    expect(status.attachments).toEqual([
      {
        network: 'nomad',
        interfaceName: 'eth0',
        phase: 'PHASE_READY',
        addresses: ['172.26.64.5/20', 'fd00:a::5/64'],
        mac: '0a:58:ac:1a:40:05',
        gateways: ['172.26.64.1', 'fd00:a::1'],
        dns: { servers: ['172.26.64.1'], searches: [], options: [] },
        portMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp', hostIp: '' }],
        attached: false,
      },
      {
        network: 'storage',
        interfaceName: 'net1',
        phase: 'PHASE_READY',
        addresses: ['10.9.0.7/24'],
        mac: '0a:58:0a:09:00:07',
        gateways: [],
        dns: emptyDns,
        portMappings: [],
        attached: false,
      },
      {
        network: 'vlan10',
        interfaceName: 'net2',
        phase: 'PHASE_SETTING_UP',
        addresses: [],
        mac: '',
        gateways: [],
        dns: emptyDns,
        portMappings: [],
        attached: true,
      },
    ]);
  });

  it("reads a record written before several networks as one attachment; without a result, the status' addresses", () => {
    const status = statusMessage(
      { ...record(undefined), attachment: attachmentOf('nomad', 'eth0') },
      'nomad',
    );
    expect(status.attachments).toEqual([
      expect.objectContaining({
        network: 'nomad',
        interfaceName: 'eth0',
        addresses: ['172.26.64.5', 'fd00:a::5'],
        mac: '',
        gateways: [],
      }),
    ]);
  });

  it("names a record's networks before they are set up, from its spec, and shows every attachment restoring", () => {
    const bare: AllocRecord = {
      schema: 1,
      allocId: 'a1',
      spec: { ...SPEC, attachments: [{ ifName: 'data0' }] },
      phase: 'setting-up',
      netnsPath: NETNS,
      netnsCreated: true,
      updatedAtMs: 1,
    };
    const status = statusMessage(bare, 'nomad', true);
    expect(status.network).toBe('nomad');
    expect(
      statusMessage({ ...bare, spec: { ...SPEC, network: 'storage' } }, 'nomad').attachments,
    ).toMatchObject([{ network: 'storage', interfaceName: 'eth0', phase: 'PHASE_SETTING_UP' }]);
    expect(status.attachments).toEqual([
      {
        network: 'nomad',
        interfaceName: 'data0',
        phase: 'PHASE_RESTORING',
        addresses: [],
        mac: '',
        gateways: [],
        dns: emptyDns,
        portMappings: [],
        attached: false,
      },
    ]);
  });
});
