import type { NetworkCatalog } from '@allocnet/cni-configurator';
import type { SetupAllocNetworkRequest__Output } from '@allocnet/proto';
import * as grpc from '@grpc/grpc-js';
import { isAgentError } from './errors.js';
import {
  decodeForceCleanupRequest,
  decodeReapRequest,
  decodeSetupRequest,
  decodeTeardownRequest,
} from './requests.js';
import type { SetupContext } from './requests.js';
import { grpcFailure } from './status.js';
import { setupRequestOf } from './testing/requests.js';

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
const request = setupRequestOf;

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

describe("the agent's limits on one allocation", () => {
  const port = (value: number) => ({ label: `p${value}`, value, to: 0, hostIp: '' });
  const ports = (n: number) => Array.from({ length: n }, (_, i) => port(1000 + i));

  /** What a client sees for a request the decoder refuses: the status, its details, metadata. */
  async function refused(r: SetupAllocNetworkRequest__Output, ctx: SetupContext) {
    try {
      await decodeSetupRequest(r, ctx);
    } catch (error) {
      return grpcFailure(error, undefined);
    }
    throw new Error('the request was accepted');
  }

  it.each<[string, Partial<SetupAllocNetworkRequest__Output>, string, string]>([
    [
      'more ports than limits.maxPorts',
      { ports: ports(3) },
      'ports',
      "ports has 3 ports, more than the agent's limit of 2 (limits.maxPorts)",
    ],
    [
      'more legacy ports, over every network and list',
      {
        networks: [
          { reservedPorts: [port(1)], dynamicPorts: [port(2)] },
          { reservedPorts: [], dynamicPorts: [port(3)] },
        ],
      },
      'networks',
      "networks has 3 ports, more than the agent's limit of 2 (limits.maxPorts)",
    ],
    [
      'more CNI args than limits.maxCniArgs',
      { cniArgs: { a: '1', b: '2' } },
      'cni_args',
      "cni_args has 2 entries, more than the agent's limit of 1 (limits.maxCniArgs)",
    ],
  ])(
    'refuses %s with INVALID_ARGUMENT naming the field and the key, before the network is looked up',
    async (_what, extra, field, details) => {
      let reloads = 0;
      const ctx: SetupContext = {
        ...context,
        reload: () => {
          reloads++;
          return Promise.resolve(catalog);
        },
        limits: { maxPorts: 2, maxCniArgs: 1, maxAttachments: 8 },
      };
      // An unknown network would re-read the conf dir: the limit is checked first.
      expect(await refused(request({ ...extra, network: 'nowhere' }), ctx)).toEqual({
        code: grpc.status.INVALID_ARGUMENT,
        details,
        metadata: { 'allocnet-error': 'invalid-argument', 'allocnet-field': field },
      });
      expect(reloads).toBe(0);
    },
  );

  it('takes up to the limits; without limits in the context, the defaults (128 ports, 64 args)', async () => {
    const limits = { maxPorts: 2, maxCniArgs: 1, maxAttachments: 8 };
    await expect(
      decodeSetupRequest(request({ ports: ports(2), cniArgs: { a: '1' } }), {
        ...context,
        limits,
      }),
    ).resolves.toMatchObject({ ports: [{ value: 1000 }, { value: 1001 }], cniArgs: { a: '1' } });
    await expect(
      decodeSetupRequest(request({ ports: ports(128) }), context),
    ).resolves.toBeDefined();
    expect((await refused(request({ ports: ports(129) }), context)).details).toBe(
      "ports has 129 ports, more than the agent's limit of 128 (limits.maxPorts)",
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
