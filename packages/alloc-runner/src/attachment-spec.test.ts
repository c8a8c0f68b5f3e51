// A spec's attachments (attachment-spec.ts through decodeSpec): the configurator spec of each,
// every rule across the list naming its field exactly, the limits, the canonical form.
import { canonicalSpec, specDifferences } from './canonical.js';
import { isRunnerError } from './errors.js';
import { configuratorSpecsOf, decodeSpec } from './spec.js';
import type { RunnerSpec, SpecLimits } from './spec.js';

const BASE = { allocId: 'a1', namespace: 'default', jobId: 'web', groupName: 'g' };
const PORT = { label: 'http', value: 28080, to: 8080 };

function refusal(value: unknown, limits?: SpecLimits): [string | undefined, string] {
  try {
    decodeSpec(value, limits);
  } catch (error) {
    if (!isRunnerError(error)) throw error;
    expect(error.code).toBe('invalid-argument');
    return [error.field, error.message.replace('invalid allocation spec: ', '')];
  }
  throw new Error('decodeSpec accepted it');
}

describe('the configurator spec of each attachment', () => {
  it('puts the spec’s ports on the first, its CNI args on every one, and names the interfaces', () => {
    const spec = decodeSpec({
      ...BASE,
      region: 'eu',
      ports: [PORT],
      cniArgs: { team: 'a', zone: 'z1' },
      attachments: [
        {},
        { network: 'storage', cniArgs: { zone: 'z2' } },
        { network: 'vlan', ifName: 'vlan0', ips: ['10.9.0.5/24'], mac: '02:00:00:00:00:05' },
      ],
    });
    expect(configuratorSpecsOf(spec)).toEqual([
      { ...BASE, region: 'eu', ifName: 'eth0', ports: [PORT], cniArgs: { team: 'a', zone: 'z1' } },
      {
        ...BASE,
        region: 'eu',
        network: 'storage',
        ifName: 'net1',
        cniArgs: { team: 'a', zone: 'z2' },
        defaultRoute: false,
      },
      {
        ...BASE,
        region: 'eu',
        network: 'vlan',
        ifName: 'vlan0',
        cniArgs: { team: 'a', zone: 'z1' },
        ips: ['10.9.0.5/24'],
        mac: '02:00:00:00:00:05',
        defaultRoute: false,
      },
    ]);
  });

  it('moves the default route to the one attachment that asks for it', () => {
    const spec = decodeSpec({
      ...BASE,
      attachments: [{ network: 'a' }, { network: 'b', defaultRoute: true }, { network: 'c' }],
    });
    expect(configuratorSpecsOf(spec).map((s) => s.defaultRoute)).toEqual([false, true, false]);
  });

  it('is the spec itself in the single form (nothing changes for one network)', () => {
    const single = { ...BASE, network: 'nomad', ports: [PORT], ifName: 'eth1' };
    expect(configuratorSpecsOf(decodeSpec(single))).toEqual([single]);
    expect(configuratorSpecsOf(decodeSpec({ ...single, attachments: [] }))).toEqual([single]);
  });
});

describe('the rules across the list', () => {
  it.each<[string, unknown, string, string]>([
    [
      'a top-level network',
      { ...BASE, network: 'x', attachments: [{}] },
      'spec.network',
      'spec.network must be empty when attachments are given (set it on spec.attachments[0].network)',
    ],
    [
      'a top-level interface',
      { ...BASE, ifName: 'eth1', attachments: [{}] },
      'spec.ifName',
      'spec.ifName must be empty when attachments are given (set it on spec.attachments[0].ifName)',
    ],
    [
      'ports on the spec and on the first',
      { ...BASE, ports: [PORT], attachments: [{ ports: [{ label: 'x', value: 1 }] }] },
      'spec.attachments[0].ports',
      'spec.attachments[0].ports cannot be given with spec.ports (those ride on the first attachment)',
    ],
    [
      'one interface twice',
      { ...BASE, attachments: [{}, { network: 's', ifName: 'eth0' }] },
      'spec.attachments[1].ifName',
      'spec.attachments[1].ifName is "eth0", the interface of spec.attachments[0].ifName',
    ],
    [
      'one network twice (the default, named by nothing and by an empty name)',
      { ...BASE, attachments: [{}, { network: '' }] },
      'spec.attachments[1].network',
      'spec.attachments[1].network is "", the network of spec.attachments[0].network (every attachment is in a different network)',
    ],
    [
      'two default routes',
      {
        ...BASE,
        attachments: [
          { defaultRoute: true },
          { network: 's' },
          { network: 't', defaultRoute: true },
        ],
      },
      'spec.attachments[2].defaultRoute',
      'spec.attachments[2].defaultRoute is true, as spec.attachments[0].defaultRoute (at most one)',
    ],
    [
      'a host port on two attachments',
      {
        ...BASE,
        ports: [PORT],
        attachments: [{}, { network: 's', ports: [{ label: 'x', value: 28080 }] }],
      },
      'spec.attachments[1].ports[0].value',
      'spec.attachments[1].ports[0].value maps host port 28080/tcp, as spec.ports[0].value does (a host port goes to one attachment)',
    ],
    [
      'an unknown field of an attachment',
      { ...BASE, attachments: [{}, { network: 's', interface: 'x' }] },
      'spec.attachments[1].interface',
      'spec.attachments[1].interface is not a known field',
    ],
    [
      'a bad interface name',
      { ...BASE, attachments: [{}, { network: 's', ifName: 'a/b' }] },
      'spec.attachments[1].ifName',
      'spec.attachments[1].ifName "a/b" is not an interface name (1 to 15 of [A-Za-z0-9_.-], not "." or "..")',
    ],
    [
      'ips that are not a list',
      { ...BASE, attachments: [{}, { network: 's', ips: '10.0.0.1' }] },
      'spec.attachments[1].ips',
      'spec.attachments[1].ips should be Array<string>, got "10.0.0.1"',
    ],
    [
      'a reserved CNI arg of an attachment',
      { ...BASE, attachments: [{}, { network: 's', cniArgs: { NOMAD_ALLOC_ID: 'x' } }] },
      'spec.attachments[1].cniArgs.NOMAD_ALLOC_ID',
      'spec.attachments[1].cniArgs.NOMAD_ALLOC_ID is set by allocnet and cannot be given',
    ],
    [
      'attachments that are not a list',
      { ...BASE, attachments: { network: 's' } },
      'spec.attachments',
      'spec.attachments should be a list of attachments',
    ],
  ])('refuses %s', (_what, value, field, message) => {
    expect(refusal(value)).toEqual([field, message]);
  });

  it('refuses more attachments than the agent’s limit (8 by default), and than the decoder’s', () => {
    const many = (n: number) => ({
      ...BASE,
      attachments: Array.from({ length: n }, (_, k) => ({ network: `n${k}` })),
    });
    const limits = { maxPorts: 16, maxCniArgs: 8 };
    expect(decodeSpec(many(8), limits).attachments).toHaveLength(8);
    expect(refusal(many(9), limits)).toEqual([
      'spec.attachments',
      "spec.attachments has 9 attachments, more than the agent's limit of 8 (limits.maxAttachments)",
    ]);
    expect(refusal(many(3), { ...limits, maxAttachments: 2 })[0]).toBe('spec.attachments');
    expect(refusal(many(33))).toEqual([
      'spec.attachments',
      'spec.attachments has 33 attachments; at most 32',
    ]);
  });

  it('counts the ports and CNI args of each attachment against the limits, naming it', () => {
    const limits = { maxPorts: 1, maxCniArgs: 1, maxAttachments: 8 };
    expect(
      refusal(
        {
          ...BASE,
          attachments: [
            {},
            {
              network: 's',
              ports: [
                { label: 'a', value: 1 },
                { label: 'b', value: 2 },
              ],
            },
          ],
        },
        limits,
      )[0],
    ).toBe('spec.attachments[1].ports');
    expect(
      refusal(
        { ...BASE, cniArgs: { a: '1' }, attachments: [{}, { network: 's', cniArgs: { b: '2' } }] },
        limits,
      )[0],
    ).toBe('spec.attachments[1].cniArgs');
  });
});

describe('the canonical form of the list', () => {
  it('writes what means the same the same way', () => {
    const a = decodeSpec({
      ...BASE,
      ports: [PORT],
      cniArgs: { t: '1' },
      attachments: [{}, { network: 's' }],
    });
    const b = decodeSpec({
      ...BASE,
      attachments: [
        { ifName: 'eth0', ports: [{ ...PORT }], cniArgs: { t: '1' } },
        { network: 's', ifName: 'net1', cniArgs: { t: '1' }, defaultRoute: false },
      ],
    });
    expect(canonicalSpec(a)).toEqual(canonicalSpec(b));
    expect(specDifferences(a, b)).toEqual([]);
    expect(canonicalSpec(decodeSpec(canonicalSpec(a)))).toEqual(canonicalSpec(a));
    const other = decodeSpec({
      ...BASE,
      attachments: [{}, { network: 's', mac: '02:00:00:00:00:01' }],
    });
    expect(specDifferences(a, other)).toEqual(['attachments']);
    const single: RunnerSpec = { ...BASE, ports: [PORT] };
    expect(
      specDifferences(single, decodeSpec({ ...BASE, attachments: [{ ports: [PORT] }] })),
    ).toEqual(['attachments', 'ports']);
  });
});
