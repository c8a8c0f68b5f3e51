import { decodeSpec } from '@allocnet/alloc-runner';
import { answerCode } from './answer.js';
import { CniFault } from './errors.js';
import { attachmentAllocId, requestFieldOf, runtimeOf, specOfAdd } from './add-spec.js';
import { decodeCniRequest } from './request.js';

const CONTAINERD_ID = 'a'.repeat(64);

function body(env: Record<string, unknown> = {}, config: Record<string, unknown> = {}) {
  return {
    env: {
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: CONTAINERD_ID,
      CNI_NETNS: '/var/run/netns/cni-1234',
      CNI_IFNAME: 'eth0',
      CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0',
      CNI_PATH: '/opt/cni/bin',
      ...env,
    },
    config: { cniVersion: '1.0.0', name: 'allocnet', type: 'allocnet-cni', ...config },
  };
}

function fault(value: unknown): CniFault {
  try {
    decodeCniRequest(value);
  } catch (error) {
    if (error instanceof CniFault) return error;
    throw error;
  }
  throw new Error('the request was accepted');
}

describe('decodeCniRequest', () => {
  it.each([
    ['no env', { config: body().config }, 7, 'env is missing'],
    ['env not an object', { env: 'ADD', config: body().config }, 7, 'env should be an object'],
    ['unknown command', body({ CNI_COMMAND: 'START' }), 7, 'env.CNI_COMMAND should be one of'],
    [
      'missing container id',
      body({ CNI_CONTAINERID: undefined }),
      7,
      'env.CNI_CONTAINERID is missing',
    ],
    ['bad container id', body({ CNI_CONTAINERID: '../x' }), 7, 'env.CNI_CONTAINERID "../x" has'],
    ['ADD without netns', body({ CNI_NETNS: '' }), 7, 'env.CNI_NETNS is missing or empty'],
    [
      'relative netns',
      body({ CNI_NETNS: 'netns/x' }),
      7,
      'env.CNI_NETNS "netns/x" is not an absolute path',
    ],
    [
      'netns with ..',
      body({ CNI_NETNS: '/run/../etc' }),
      7,
      'env.CNI_NETNS "/run/../etc" is not a clean absolute path (no "." or ".." segment, no NUL, under 4096 characters)',
    ],
    [
      'netns with .',
      body({ CNI_NETNS: '/run/./netns/x' }),
      7,
      'env.CNI_NETNS "/run/./netns/x" is not a clean absolute path (no "." or ".." segment, no NUL, under 4096 characters)',
    ],
    ['ifname too long', body({ CNI_IFNAME: 'eth0123456789012' }), 7, 'env.CNI_IFNAME "eth0123'],
    ['ifname with a slash', body({ CNI_IFNAME: 'a/b' }), 7, 'env.CNI_IFNAME "a/b"'],
    ['args not K=V', body({ CNI_ARGS: 'IgnoreUnknown=1;junk' }), 7, 'env.CNI_ARGS part 2'],
    ['env value not text', body({ CNI_ARGS: 5 }), 7, 'env.CNI_ARGS should be a string'],
    ['no cniVersion', body({}, { cniVersion: undefined }), 4, 'config.cniVersion is missing'],
    ['cniVersion not a version', body({}, { cniVersion: 'new' }), 4, 'config.cniVersion "new"'],
    ['unsupported cniVersion', body({}, { cniVersion: '2.0.0' }), 1, 'config.cniVersion "2.0.0"'],
    ['bad network name', body({}, { name: 'a b' }), 4, 'config.name "a b"'],
    ['bad delegate', body({}, { delegate: '-x' }), 4, 'config.delegate "-x"'],
    [
      'a bad name in delegates',
      body({}, { delegates: ['nomad', 'a b'] }),
      4,
      'config.delegates[1] "a b" should be a name matching',
    ],
    ['delegates not a list', body({}, { delegates: 'nomad' }), 4, 'config.delegates should be'],
    [
      'delegates with delegate',
      body({}, { delegate: 'nomad', delegates: ['storage'] }),
      4,
      'config.delegates cannot be given with config.delegate: name every network in delegates',
    ],
    [
      'empty delegates',
      body({}, { delegates: [] }),
      4,
      'config.delegates is empty; it should name at least one network',
    ],
    [
      'a network twice in delegates',
      body({}, { delegates: ['nomad', 'storage', 'nomad'] }),
      4,
      'config.delegates[2] "nomad" is named twice (config.delegates[0]); each network can be attached once',
    ],
    [
      'more than 64 delegates',
      body({}, { delegates: Array.from({ length: 65 }, (_, i) => `n${i}`) }),
      4,
      'config.delegates names 65 networks; at most 64',
    ],
    [
      'port mappings not a list',
      body({}, { runtimeConfig: { portMappings: {} } }),
      4,
      'config.runtimeConfig.portMappings should be a list',
    ],
    [
      'host port out of range',
      body({}, { runtimeConfig: { portMappings: [{ hostPort: 70000, containerPort: 80 }] } }),
      4,
      'config.runtimeConfig.portMappings[0].hostPort should be a port number from 0 to 65535',
    ],
    [
      'container port 0 (go-cni spelling)',
      body({}, { runtimeConfig: { portMappings: [{ HostPort: 8080, ContainerPort: 0 }] } }),
      4,
      'config.runtimeConfig.portMappings[0].ContainerPort should be a port number from 1',
    ],
    [
      'unknown protocol',
      body(
        {},
        { runtimeConfig: { portMappings: [{ hostPort: 1, containerPort: 1, protocol: 'icmp' }] } },
      ),
      4,
      'config.runtimeConfig.portMappings[0].protocol should be "tcp" or "udp"',
    ],
    [
      'bad host IP',
      body(
        {},
        { runtimeConfig: { portMappings: [{ hostPort: 1, containerPort: 1, hostIP: 'me' }] } },
      ),
      4,
      'config.runtimeConfig.portMappings[0].hostIP "me" is not an IP address',
    ],
    [
      'GC without valid attachments',
      body({ CNI_COMMAND: 'GC' }, { cniVersion: '1.1.0' }),
      4,
      'config.cni.dev/valid-attachments is missing',
    ],
  ])('refuses %s, naming the field', (_what, value, code, message) => {
    const f = fault(value);
    expect(answerCode(f).code).toBe(code);
    expect(f.message).toContain(message);
  });

  it("reads go-cni's capitalised port mappings, skips container-only ones, keeps the protocol", () => {
    const call = decodeCniRequest(
      body(
        {},
        {
          runtimeConfig: {
            portMappings: [
              { HostPort: 18080, ContainerPort: 80, Protocol: 'tcp', HostIP: '' },
              { HostPort: 18080, ContainerPort: 80, Protocol: 'udp', HostIP: '' },
              { hostPort: 0, containerPort: 9000, protocol: 'TCP' },
              { containerPort: 9001 },
              { hostPort: 5353, containerPort: 53, protocol: 'udp', hostIP: '127.0.0.1' },
            ],
          },
        },
      ),
    );
    expect(call.portMappings).toEqual([
      { hostPort: 18080, containerPort: 80, protocol: 'tcp', hostIP: '', index: 0 },
      { hostPort: 18080, containerPort: 80, protocol: 'udp', hostIP: '', index: 1 },
      { hostPort: 5353, containerPort: 53, protocol: 'udp', hostIP: '127.0.0.1', index: 4 },
    ]);
  });

  it("takes containerd's second DEL: no netns, no prevResult", () => {
    const call = decodeCniRequest(body({ CNI_COMMAND: 'DEL', CNI_NETNS: '' }));
    expect(call).toMatchObject({ command: 'DEL', netns: '', containerId: CONTAINERD_ID });
  });

  it('reads GC valid attachments', () => {
    const call = decodeCniRequest(
      body(
        { CNI_COMMAND: 'GC' },
        {
          cniVersion: '1.1.0',
          'cni.dev/valid-attachments': [{ containerID: 'c1', ifname: 'eth0' }],
        },
      ),
    );
    expect(call.validAttachments).toEqual([{ containerId: 'c1', ifName: 'eth0' }]);
  });
});

describe('specOfAdd', () => {
  it('makes a containerd pod a spec the runner accepts, in the runtime netns, with the args passed on', () => {
    const call = decodeCniRequest(
      body(
        {},
        {
          runtimeConfig: {
            portMappings: [{ HostPort: 18080, ContainerPort: 80, Protocol: 'tcp', HostIP: '' }],
          },
        },
      ),
    );
    const spec = decodeSpec(specOfAdd(call));
    expect(spec).toMatchObject({
      allocId: CONTAINERD_ID,
      namespace: 'default',
      jobId: 'web-0',
      groupName: 'kubernetes',
      netnsPath: '/var/run/netns/cni-1234',
      ifName: 'eth0',
      cniArgs: { K8S_POD_NAMESPACE: 'default', K8S_POD_NAME: 'web-0' },
      ports: [{ label: 'tcp/80', value: 18080, to: 80, protocol: 'tcp' }],
      origin: { runtime: 'kubernetes', containerId: CONTAINERD_ID, ifName: 'eth0' },
    });
  });

  it("takes Nomad's identity from its NOMAD_* labels, which the configurator sets itself", () => {
    const call = decodeCniRequest(
      body({
        CNI_CONTAINERID: '3f2a0c1e-0000-4000-8000-000000000001',
        CNI_ARGS:
          'IgnoreUnknown=1;NOMAD_REGION=eu;NOMAD_NAMESPACE=prod;NOMAD_JOB_ID=api;NOMAD_GROUP_NAME=web;NOMAD_ALLOC_ID=3f2a0c1e-0000-4000-8000-000000000001',
      }),
    );
    const spec = decodeSpec(specOfAdd(call));
    expect(spec).toMatchObject({ region: 'eu', namespace: 'prod', jobId: 'api', groupName: 'web' });
    expect(spec.cniArgs).toBeUndefined();
    expect(spec.origin?.runtime).toBe('nomad');
  });
});

describe('attachment ids and runtimes', () => {
  it('uses the container id for eth0, a hash otherwise, stable for the pair', () => {
    expect(attachmentAllocId('c1', 'eth0')).toBe('c1');
    const other = attachmentAllocId('c1', 'net1');
    expect(other).toMatch(/^cni-[0-9a-f]{40}$/);
    expect(attachmentAllocId('c1', 'net1')).toBe(other);
    expect(attachmentAllocId('c2', 'net1')).not.toBe(other);
    expect(attachmentAllocId('x'.repeat(65), 'eth0')).toMatch(/^cni-/);
  });

  it('tells runtimes by their CNI_ARGS', () => {
    expect(runtimeOf(new Map([['NOMAD_ALLOC_ID', 'a']]))).toBe('nomad');
    expect(
      runtimeOf(
        new Map([
          ['K8S_POD_NAMESPACE', 'd'],
          ['K8S_POD_NAME', 'p'],
        ]),
      ),
    ).toBe('kubernetes');
    expect(runtimeOf(new Map([['K8S_POD_NAME', 'p']]))).toBe('podman');
    expect(runtimeOf(new Map())).toBe('cni');
  });

  it("names the request's field for a runner's spec field", () => {
    const call = decodeCniRequest(
      body(
        {},
        {
          runtimeConfig: {
            portMappings: [
              { hostPort: 0, containerPort: 1 },
              { hostPort: 9, containerPort: 1 },
            ],
          },
        },
      ),
    );
    expect(requestFieldOf(['spec', 'ports', 0, 'value'], call)).toEqual([
      'config',
      'runtimeConfig',
      'portMappings',
      1,
      'hostPort',
    ]);
    expect(requestFieldOf(['spec', 'network'], call)).toEqual(['config', 'delegate']);
    expect(requestFieldOf(['spec', 'cniArgs', 'K'], call)).toEqual(['env', 'CNI_ARGS']);
    expect(requestFieldOf(['spec', 'netnsPath'], call)).toEqual(['env', 'CNI_NETNS']);
  });
});
