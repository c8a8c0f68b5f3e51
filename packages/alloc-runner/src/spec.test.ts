import { canonicalSpec, specDifferences } from './canonical.js';
import { configuratorSpec, decodeSpec } from './spec.js';
import type { RunnerSpec, SpecLimits } from './spec.js';
import { isRunnerError } from './errors.js';

const BASE = { allocId: 'a1', namespace: 'default', jobId: 'web', groupName: 'g' };

function refusal(
  value: unknown,
  limits?: SpecLimits,
): { message: string; field: string | undefined; code: string } {
  try {
    decodeSpec(value, limits);
  } catch (error) {
    if (!isRunnerError(error)) throw error;
    return { message: error.message, field: error.field, code: error.code };
  }
  throw new Error('decodeSpec accepted it');
}

describe('decodeSpec', () => {
  it.each<[string, unknown, string, string]>([
    ['a non-object', null, 'spec', 'spec should be an object, got null'],
    ['a missing id', { ...BASE, allocId: undefined }, 'spec.allocId', 'spec.allocId is missing'],
    [
      'a bad id',
      { ...BASE, allocId: '-x' },
      'spec.allocId',
      'spec.allocId "-x" has characters other than [a-zA-Z0-9_.-] or starts with one of "_.-"',
    ],
    [
      'a long id',
      { ...BASE, allocId: 'a'.repeat(65) },
      'spec.allocId',
      'spec.allocId is 65 characters long; at most 64',
    ],
    [
      'an unknown field',
      { ...BASE, netnsPth: '/x' },
      'spec.netnsPth',
      'spec.netnsPth is not a known field',
    ],
    [
      'a port out of range',
      { ...BASE, ports: [{ label: 'http', value: 0 }] },
      'spec.ports[0].value',
      'spec.ports[0].value should be a port number from 1 to 65535, got 0',
    ],
    [
      'a misspelt port field',
      { ...BASE, ports: [{ label: 'http', value: 80, hostIP: '10.0.0.1' }] },
      'spec.ports[0].hostIP',
      'spec.ports[0].hostIP is not a known field',
    ],
    [
      'an origin with a bad container id',
      { ...BASE, origin: { runtime: 'podman', containerId: 'a b', ifName: 'eth0' } },
      'spec.origin.containerId',
      'spec.origin.containerId "a b" is not 1 to 256 of [A-Za-z0-9_.-]',
    ],
    [
      'an origin without its runtime',
      { ...BASE, origin: { containerId: 'c1', ifName: 'eth0' } },
      'spec.origin.runtime',
      'spec.origin.runtime is missing',
    ],
    [
      'an interface name too long',
      { ...BASE, ifName: 'eth0123456789012' },
      'spec.ifName',
      'spec.ifName "eth0123456789012" is not an interface name (1 to 15 of [A-Za-z0-9_.-], not "." or "..")',
    ],
    [
      'an arg the agent sets',
      { ...BASE, cniArgs: { NOMAD_JOB_ID: 'x' } },
      'spec.cniArgs.NOMAD_JOB_ID',
      'spec.cniArgs.NOMAD_JOB_ID is set by allocnet and cannot be given',
    ],
    [
      'an arg that would break CNI_ARGS',
      { ...BASE, cniArgs: { a: 'x;y' } },
      'spec.cniArgs.a',
      'spec.cniArgs.a "x;y" contains ";", "=" or a NUL character, which CNI_ARGS cannot carry',
    ],
    [
      'a relative netns path',
      { ...BASE, netnsPath: 'run/netns/x' },
      'spec.netnsPath',
      'spec.netnsPath "run/netns/x" is not an absolute path',
    ],
    [
      'a netns path with a ".." segment',
      { ...BASE, netnsPath: '/run/netns/../x' },
      'spec.netnsPath',
      'spec.netnsPath "/run/netns/../x" is not a clean absolute path (no "." or ".." segment, no NUL, under 4096 characters)',
    ],
    [
      'a netns path with a repeated "/"',
      { ...BASE, netnsPath: '/run//netns/x' },
      'spec.netnsPath',
      'spec.netnsPath "/run//netns/x" is not a normalized path (no repeated "/")',
    ],
    [
      'a job id of the wrong type',
      { ...BASE, jobId: 3 },
      'spec.jobId',
      'spec.jobId should be a string, got 3',
    ],
    [
      'a job id that would break CNI_ARGS',
      { ...BASE, jobId: 'a=b' },
      'spec.jobId',
      'spec.jobId "a=b" contains ";", "=" or a NUL character, which CNI_ARGS cannot carry',
    ],
    [
      'an unknown interrupted-setup policy',
      { ...BASE, interruptedSetup: 'retry' },
      'spec.interruptedSetup',
      'spec.interruptedSetup should be "fail" or "finish", got "retry"',
    ],
    [
      'a legacy port of the wrong type',
      { ...BASE, legacyNetworks: [{ dynamicPorts: [{ label: 'x', value: 'y' }] }] },
      'spec.legacyNetworks[0].dynamicPorts[0].value',
      'spec.legacyNetworks[0].dynamicPorts[0].value should be a port number from 1 to 65535, got "y"',
    ],
  ])('refuses %s, naming the field', (_what, value, field, problem) => {
    expect(refusal(value)).toEqual({
      message: `invalid allocation spec: ${problem}`,
      field,
      code: 'invalid-argument',
    });
  });

  describe("with the agent's limits", () => {
    const limits: SpecLimits = { maxPorts: 2, maxCniArgs: 1 };
    const port = (value: number) => ({ label: `p${value}`, value });

    it.each<[string, unknown, string, string]>([
      [
        'more ports',
        { ...BASE, ports: [port(1), port(2), port(3)] },
        'spec.ports',
        "spec.ports has 3 ports, more than the agent's limit of 2 (limits.maxPorts)",
      ],
      [
        'more legacy ports, counted over every network and both lists',
        {
          ...BASE,
          legacyNetworks: [
            { reservedPorts: [port(1)], dynamicPorts: [port(2)] },
            { dynamicPorts: [port(3)] },
          ],
        },
        'spec.legacyNetworks',
        "spec.legacyNetworks has 3 ports, more than the agent's limit of 2 (limits.maxPorts)",
      ],
      [
        'more CNI args',
        { ...BASE, cniArgs: { a: '1', b: '2' } },
        'spec.cniArgs',
        "spec.cniArgs has 2 entries, more than the agent's limit of 1 (limits.maxCniArgs)",
      ],
    ])('refuses %s, naming the field and the setting', (_what, value, field, problem) => {
      expect(refusal(value, limits)).toEqual({
        message: `invalid allocation spec: ${problem}`,
        field,
        code: 'invalid-argument',
      });
      // Without limits (the store reading a record back) the same spec is valid.
      expect(() => decodeSpec(value)).not.toThrow();
    });

    it('accepts a spec at the limits; legacy ports do not count when there are ports', () => {
      const spec = {
        ...BASE,
        ports: [port(1), port(2)],
        legacyNetworks: [{ reservedPorts: [port(3), port(4), port(5)] }],
        cniArgs: { a: '1' },
      };
      expect(decodeSpec(spec, limits)).toEqual(spec);
      expect(decodeSpec(BASE, { maxPorts: 0, maxCniArgs: 0 })).toEqual(BASE);
    });

    it('checks a spec decoded before too', () => {
      const decoded = decodeSpec({ ...BASE, ports: [port(1), port(2), port(3)] });
      expect(refusal(decoded, limits).field).toBe('spec.ports');
    });
  });

  it('accepts a netns path with a trailing "/", as records written before the path rule may hold', () => {
    const spec = { ...BASE, netnsPath: '/run/netns/x/' };
    expect(decodeSpec(spec)).toEqual(spec);
  });

  it('accepts a full spec and gives it back as it was', () => {
    const spec = {
      ...BASE,
      region: 'eu',
      network: 'nomad',
      ports: [{ label: 'http', value: 8080, to: 80, hostIp: '10.0.0.1' }],
      legacyNetworks: [{ reservedPorts: [{ label: 'x', value: 9000 }] }],
      cniArgs: { IP: '172.26.64.9' },
      netnsPath: '/proc/42/ns/net',
      interruptedSetup: 'finish',
    };
    expect(decodeSpec(spec)).toEqual(spec);
    // What the agent's CNI server asks for: one protocol per port, the runtime's ifname, origin.
    const cni = {
      ...BASE,
      ports: [{ label: 'tcp/80', value: 18080, to: 80, protocol: 'tcp' }],
      ifName: 'eth0',
      netnsPath: '/var/run/netns/cni-1',
      origin: { runtime: 'kubernetes', containerId: 'c'.repeat(64), ifName: 'eth0' },
    };
    expect(decodeSpec(cni)).toEqual(cni);
  });
});

describe('canonicalSpec and specDifferences', () => {
  it('writes what means the same the same way', () => {
    const a: RunnerSpec = {
      ...BASE,
      network: '',
      ports: [{ label: 'h', value: 80, to: -1, hostIp: '' }],
      legacyNetworks: [{ dynamicPorts: [{ label: 'old', value: 9 }] }],
      cniArgs: {},
    };
    const b: RunnerSpec = {
      groupName: 'g',
      jobId: 'web',
      namespace: 'default',
      allocId: 'a1',
      ports: [{ value: 80, label: 'h', to: 80 }],
      interruptedSetup: 'fail',
    };
    expect(JSON.stringify(canonicalSpec(a))).toBe(
      '{"allocId":"a1","groupName":"g","interruptedSetup":"fail","jobId":"web","namespace":"default","ports":[{"label":"h","to":80,"value":80}]}',
    );
    expect(specDifferences(a, b)).toEqual([]);
  });

  it('names the fields that differ', () => {
    expect(
      specDifferences(
        { ...BASE, ports: [{ label: 'h', value: 80 }] },
        { ...BASE, ports: [{ label: 'h', value: 81 }], netnsPath: '/proc/1/ns/net' },
      ),
    ).toEqual(['netnsPath', 'ports']);
    const origin = { runtime: 'podman', containerId: 'c1', ifName: 'eth0' };
    expect(
      specDifferences(
        { ...BASE, origin, ports: [{ label: 'h', value: 80, protocol: 'tcp' }] },
        { ...BASE, origin: { ...origin, ifName: 'net1' }, ports: [{ label: 'h', value: 80 }] },
      ),
    ).toEqual(['origin', 'ports']);
  });

  it('gives the configurator the spec without the runner’s fields', () => {
    expect(
      configuratorSpec({
        ...BASE,
        netnsPath: '/proc/1/ns/net',
        interruptedSetup: 'finish',
        origin: { runtime: 'cni', containerId: 'c1', ifName: 'eth0' },
      }),
    ).toEqual(BASE);
  });
});
