// An ADD through a conflist with `delegates` as the runner's spec: one attachment per network in
// the conflist's order, the first on CNI_IFNAME with the runtime's mappings, the others on net1…;
// and an error about an attachment's field named as the request's field.
import { delegateIfNames, requestFieldOf, specOfAdd } from './add-spec.js';
import { decodeCniRequest } from './request.js';

const ID = 'b'.repeat(64);
const NETNS = '/var/run/netns/cni-5678';

function addWith(config: Record<string, unknown>, ifName = 'eth0') {
  return decodeCniRequest({
    env: {
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: ID,
      CNI_NETNS: NETNS,
      CNI_IFNAME: ifName,
      CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0',
    },
    config: { cniVersion: '1.0.0', name: 'allocnet', type: 'allocnet-cni', ...config },
  });
}

const MAPPINGS = {
  runtimeConfig: {
    portMappings: [
      { HostPort: 0, ContainerPort: 9000, Protocol: 'tcp' },
      { HostPort: 18080, ContainerPort: 80, Protocol: 'tcp' },
    ],
  },
};

describe('specOfAdd with delegates', () => {
  it('makes one attachment per delegate: the first on CNI_IFNAME, the others on net1…; the mappings and args as in the single form', () => {
    const call = addWith({ delegates: ['nomad', 'storage', 'backup'], ...MAPPINGS });
    expect(call.delegates).toEqual(['nomad', 'storage', 'backup']);
    expect(specOfAdd(call)).toEqual({
      allocId: ID,
      namespace: 'default',
      jobId: 'web-0',
      groupName: 'kubernetes',
      // Top-level: the runner puts them on the first attachment.
      ports: [{ label: 'tcp/80', value: 18080, to: 80, protocol: 'tcp' }],
      // Top-level: the runner gives them to every attachment.
      cniArgs: { K8S_POD_NAMESPACE: 'default', K8S_POD_NAME: 'web-0' },
      attachments: [
        { network: 'nomad', ifName: 'eth0' },
        { network: 'storage', ifName: 'net1' },
        { network: 'backup', ifName: 'net2' },
      ],
      netnsPath: NETNS,
      origin: { runtime: 'kubernetes', containerId: ID, ifName: 'eth0' },
    });
  });

  it('keeps the single form for one delegate (and for none: the default network)', () => {
    expect(specOfAdd(addWith({ delegate: 'storage' }))).toMatchObject({
      network: 'storage',
      ifName: 'eth0',
    });
    const none = specOfAdd(addWith({}));
    expect(none).toMatchObject({ ifName: 'eth0' });
    expect(none.network).toBeUndefined();
    expect(none.attachments).toBeUndefined();
  });

  it('takes the allocation id and origin from CNI_IFNAME, as the single form does', () => {
    const spec = specOfAdd(addWith({ delegates: ['nomad', 'storage'] }, 'net1'));
    expect(spec.allocId).toMatch(/^cni-[0-9a-f]{40}$/);
    expect(spec.origin).toEqual({ runtime: 'kubernetes', containerId: ID, ifName: 'net1' });
    // CNI_IFNAME is net1: the second delegate takes the next free name.
    expect(spec.attachments).toEqual([
      { network: 'nomad', ifName: 'net1' },
      { network: 'storage', ifName: 'net2' },
    ]);
  });
});

describe('delegateIfNames', () => {
  it.each<[string, number, string[]]>([
    ['eth0', 1, ['eth0']],
    ['eth0', 3, ['eth0', 'net1', 'net2']],
    ['net2', 4, ['net2', 'net1', 'net3', 'net4']],
  ])('names %s and %i networks', (ifName, count, names) => {
    expect(delegateIfNames(ifName, count)).toEqual(names);
  });
});

describe("requestFieldOf an attachment's field", () => {
  const call = addWith({ delegates: ['nomad', 'storage'], ...MAPPINGS });

  it.each<[string, (string | number)[], (string | number)[]]>([
    ['the k-th network', ['spec', 'attachments', 1, 'network'], ['config', 'delegates', 1]],
    ['the k-th attachment', ['spec', 'attachments', 1], ['config', 'delegates', 1]],
    ['the list', ['spec', 'attachments'], ['config', 'delegates']],
    ['the first interface', ['spec', 'attachments', 0, 'ifName'], ['env', 'CNI_IFNAME']],
    ['a later interface', ['spec', 'attachments', 1, 'ifName'], ['config', 'delegates', 1]],
    ['its args', ['spec', 'attachments', 1, 'cniArgs', 'K'], ['env', 'CNI_ARGS']],
    [
      "the first's ports",
      ['spec', 'attachments', 0, 'ports', 0, 'value'],
      ['config', 'runtimeConfig', 'portMappings', 1, 'hostPort'],
    ],
    [
      'a top-level port',
      ['spec', 'ports', 0, 'to'],
      ['config', 'runtimeConfig', 'portMappings', 1, 'containerPort'],
    ],
    ['the top-level network', ['spec', 'network'], ['config', 'delegates']],
  ])('names %s as the request does', (_what, path, field) => {
    expect(requestFieldOf(path, call)).toEqual(field);
  });
});
