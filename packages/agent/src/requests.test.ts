import type { NetworkCatalog } from '@allocnet/cni-configurator';
import type { SetupAllocNetworkRequest__Output } from '@allocnet/proto';
import { isAgentError } from './errors.js';
import {
  decodeForceCleanupRequest,
  decodeReapRequest,
  decodeSetupRequest,
  decodeTeardownRequest,
} from './requests.js';

const catalog: NetworkCatalog = {
  networks: [
    { name: 'nomad', source: 'default', plugins: ['bridge'] },
    { name: 'ptp-net', source: '/etc/cni/net.d/20-ptp.conflist', plugins: ['ptp'] },
  ],
  invalid: [],
};
const context = {
  catalog: () => catalog,
  reload: () => Promise.resolve(catalog),
  ignoreHostIps: false,
};

/** A request as grpc-js gives it: every field there, with the proto defaults. */
function request(
  extra: Partial<SetupAllocNetworkRequest__Output> = {},
): SetupAllocNetworkRequest__Output {
  return {
    allocId: 'a1',
    region: '',
    namespace: 'default',
    jobId: 'web',
    groupName: 'api',
    network: '',
    ports: [],
    networks: [],
    cniArgs: {},
    netnsPath: '',
    ...extra,
  };
}

describe('decodeSetupRequest', () => {
  it('reads the proto defaults as "not set"', async () => {
    expect(await decodeSetupRequest(request(), context)).toEqual({
      allocId: 'a1',
      namespace: 'default',
      jobId: 'web',
      groupName: 'api',
    });
  });

  it('keeps what is set, ports with a `to` of 0 meaning the host port', async () => {
    const spec = await decodeSetupRequest(
      request({
        region: 'eu',
        network: 'ptp-net',
        ports: [
          { label: 'http', value: 8080, to: 0, hostIp: '' },
          { label: 'dns', value: 53, to: 5353, hostIp: '10.0.0.1' },
        ],
        networks: [
          {
            reservedPorts: [{ label: 'r', value: 9000, to: 0 }],
            dynamicPorts: [],
          },
        ],
        cniArgs: { IP: '10.1.0.9' },
        netnsPath: '/proc/1/ns/net',
      }),
      context,
    );
    expect(spec).toEqual({
      allocId: 'a1',
      region: 'eu',
      namespace: 'default',
      jobId: 'web',
      groupName: 'api',
      network: 'ptp-net',
      ports: [
        { label: 'http', value: 8080 },
        { label: 'dns', value: 53, to: 5353, hostIp: '10.0.0.1' },
      ],
      legacyNetworks: [{ reservedPorts: [{ label: 'r', value: 9000 }] }],
      cniArgs: { IP: '10.1.0.9' },
      netnsPath: '/proc/1/ns/net',
    });
  });

  it('refuses a message whose shape is wrong, naming the field as the .proto does', async () => {
    await expect(
      decodeSetupRequest(
        { ...request(), jobId: 7 } as unknown as SetupAllocNetworkRequest__Output,
        context,
      ),
    ).rejects.toThrow('job_id should be a string, got 7');
    await expect(
      decodeSetupRequest(
        request({
          networks: Array.from({ length: 17 }, () => ({ reservedPorts: [], dynamicPorts: [] })),
        }),
        context,
      ),
    ).rejects.toThrow('networks has 17 networks; at most 16');
  });

  it('ignores host IPs for duplicates when the agent ignores host IPs', async () => {
    const ports = [
      { label: 'a', value: 80, to: 0, hostIp: '10.0.0.1' },
      { label: 'b', value: 80, to: 0, hostIp: '10.0.0.2' },
    ];
    await expect(decodeSetupRequest(request({ ports }), context)).resolves.toBeDefined();
    await expect(
      decodeSetupRequest(request({ ports }), { ...context, ignoreHostIps: true }),
    ).rejects.toThrow(
      'ports[1].value ("b") claims host port 80, which ports[0].value ("a") already claims',
    );
  });
});

describe('other requests', () => {
  it('checks allocation ids', () => {
    expect(decodeTeardownRequest({ allocId: 'a-1' })).toBe('a-1');
    expect(() => decodeTeardownRequest({ allocId: '' })).toThrow('alloc_id is empty');
  });

  it('reads ForceCleanup, refusing a network name that could not be one', () => {
    expect(decodeForceCleanupRequest({ allocId: 'a1', network: '', dryRun: true })).toEqual({
      allocId: 'a1',
      network: undefined,
      dryRun: true,
    });
    let caught: unknown;
    try {
      decodeForceCleanupRequest({ allocId: 'a1', network: 'x y', dryRun: false });
    } catch (error) {
      caught = error;
    }
    expect(isAgentError(caught) && [caught.field, caught.message]).toEqual([
      'network',
      'network "x y" does not match ^[a-zA-Z0-9][a-zA-Z0-9_.-]*$',
    ]);
  });

  it('gives ReapLeaks its default batch size for 0', () => {
    expect(decodeReapRequest({ batchSize: 0, dryRun: false })).toEqual({
      batchSize: 500,
      dryRun: false,
    });
    expect(decodeReapRequest({ batchSize: 10000, dryRun: true })).toEqual({
      batchSize: 10000,
      dryRun: true,
    });
  });
});
