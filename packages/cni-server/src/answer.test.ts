import { ERROR_KINDS } from '@allocnet/base';
import type { ErrorKind } from '@allocnet/base';
import { RunnerError } from '@allocnet/alloc-runner';
import type { AllocRecord } from '@allocnet/alloc-runner';
import type { CniResult } from '@allocnet/cni';
import type { AllocAttachment } from '@allocnet/cni-configurator';
import { KIND_ANSWER, answerCode, cniResultOf, faultAnswer, faultOf } from './answer.js';
import { CniFault, badField, isCniFault } from './errors.js';
import { decodeCniRequest } from './request.js';

/** An error of another package with this kind, as the runner's wrapped failures carry it. */
function failureOf(kind: ErrorKind): Error {
  return Object.assign(new Error(`a ${kind} failure`), { kind });
}

const call = decodeCniRequest({
  env: {
    CNI_COMMAND: 'ADD',
    CNI_CONTAINERID: 'c1',
    CNI_NETNS: '/run/netns/x',
    CNI_IFNAME: 'eth0',
  },
  config: { cniVersion: '0.4.0', name: 'allocnet', type: 'allocnet-cni' },
});

describe('the CNI answer of each kind', () => {
  it.each<[ErrorKind, number, number]>([
    ['invalid', 4, 400],
    ['not-found', 101, 404],
    ['conflict', 100, 409],
    ['unavailable', 11, 503],
    ['aborted', 11, 503],
    ['broken', 102, 500],
    ['exhausted', 11, 503],
    ['internal', 999, 500],
  ])('answers %s with code %i, HTTP %i', (kind, code, status) => {
    expect(KIND_ANSWER[kind]).toEqual({ code, status });
    const fault = faultOf(failureOf(kind), call);
    expect(fault).toMatchObject({ code: 'failed', kind });
    expect(faultAnswer(fault, '0.4.0')).toEqual({
      status,
      body: { cniVersion: '0.4.0', code, msg: `a ${kind} failure` },
    });
  });

  it('has an answer for every kind there is', () => {
    expect(Object.keys(KIND_ANSWER).sort()).toEqual([...ERROR_KINDS].sort());
  });

  it('answers an error without a kind as internal (999)', () => {
    expect(faultAnswer(faultOf(new Error('boom'), call), undefined)).toEqual({
      status: 500,
      body: { cniVersion: '1.1.0', code: 999, msg: 'boom' },
    });
  });
});

describe('the refinements of bad input', () => {
  it.each<[string, CniFault, string | undefined, number, number]>([
    ['a config field: 4', badField(['config', 'delegate'], '"-x" is bad'), undefined, 4, 400],
    ['an env field: 7', badField(['env', 'CNI_IFNAME'], 'is missing'), undefined, 7, 400],
    [
      'a cniVersion allocnet cannot answer in: 1',
      badField(['config', 'cniVersion'], '"2.0.0" is not', 'incompatible-version'),
      undefined,
      1,
      400,
    ],
    [
      'a body over the limit: 4, HTTP 413',
      new CniFault('the request body is over 256 bytes', {
        code: 'body-too-large',
        path: ['body'],
      }),
      undefined,
      4,
      413,
    ],
    ['not ready: 11', new CniFault('not yet', { code: 'not-ready' }), 'ADD', 11, 503],
    [
      'not ready, for STATUS: 50',
      new CniFault('not yet', { code: 'not-ready' }),
      'STATUS',
      50,
      503,
    ],
  ])('%s', (_what, fault, command, code, status) => {
    expect(answerCode(fault, command)).toEqual({ code, status });
  });

  it("names the request's field for the runner's bad input, its message in details", () => {
    const error = new RunnerError('invalid allocation spec: spec.netnsPath "x" is not there', {
      code: 'invalid-argument',
      path: ['spec', 'netnsPath'],
      problem: ['"x" is not there'],
    });
    const fault = faultOf(error, call);
    expect(isCniFault(fault)).toBe(true);
    expect(fault).toMatchObject({
      code: 'invalid-request',
      kind: 'invalid',
      path: ['env', 'CNI_NETNS'],
    });
    expect(faultAnswer(fault, call.cniVersion)).toEqual({
      status: 400,
      body: {
        cniVersion: '0.4.0',
        code: 7,
        msg: `env.CNI_NETNS "x" is not there (the agent opens CNI_NETNS in its own mount namespace: it must run in the runtime's; docs/cni-plugin.md)`,
        details: 'invalid allocation spec: spec.netnsPath "x" is not there',
      },
    });
  });
});

describe('cniResultOf an allocation', () => {
  const NETNS = '/var/run/netns/cni-1';

  /** An attachment on `ifName` of `network` whose chain gave `result`. */
  function attachmentOf(network: string, ifName: string, result?: CniResult): AllocAttachment {
    return {
      allocId: 'c1',
      network: { name: network, config: '{}' },
      netns: NETNS,
      ifName,
      args: [],
      portMappings: [],
      addresses: [],
      ...(result === undefined ? {} : { result }),
    };
  }

  /** A bridge chain's result: the bridge, the host veth, the sandbox's interface (index 2). */
  function bridgeResult(bridge: string, ifName: string, address: string, gw: string): CniResult {
    return {
      cniVersion: '1.0.0',
      interfaces: [
        { name: bridge, mac: '02:00:00:00:00:01' },
        { name: `veth-${bridge}`, mac: '02:00:00:00:00:02' },
        { name: ifName, mac: '02:00:00:00:00:03', sandbox: NETNS },
      ],
      ips: [{ address, gateway: gw, interface: 2 }],
      routes: [{ dst: '0.0.0.0/0', gw }],
      dns: { nameservers: [gw] },
    };
  }

  const primary = bridgeResult('nomad', 'eth0', '172.26.64.2/20', '172.26.64.1');
  // A secondary's default route is gone from its recorded result (defaultRoute: false).
  const storage: CniResult = {
    ...bridgeResult('storage', 'net1', '10.77.0.2/24', '10.77.0.1'),
    routes: [{ dst: '10.99.0.0/16', gw: '10.77.0.1' }],
    dns: { nameservers: ['10.77.0.53'] },
  };

  function recordOf(extra: AllocRecord['extra']): AllocRecord {
    return {
      schema: 1,
      allocId: 'c1',
      spec: { allocId: 'c1', namespace: 'default', jobId: 'j', groupName: 'g' },
      phase: 'ready',
      netnsPath: NETNS,
      netnsCreated: false,
      attachment: attachmentOf('nomad', 'eth0', primary),
      ...(extra === undefined ? {} : { extra }),
      updatedAtMs: 0,
    };
  }

  const extraOf = (result?: CniResult): NonNullable<AllocRecord['extra']>[number] => ({
    spec: { allocId: 'c1', namespace: 'default', jobId: 'j', groupName: 'g', network: 'storage' },
    phase: 'ready',
    attached: false,
    attachment: attachmentOf('storage', 'net1', result),
  });

  it("answers one attachment's result as its chain gave it", () => {
    expect(cniResultOf(recordOf(undefined))).toBe(primary);
  });

  it("lists every attachment's interfaces and addresses, the primary's first, with the indexes moved", () => {
    expect(cniResultOf(recordOf([extraOf(storage)]))).toEqual({
      cniVersion: '1.0.0',
      interfaces: [...primary.interfaces, ...storage.interfaces],
      ips: [
        { address: '172.26.64.2/20', gateway: '172.26.64.1', interface: 2 },
        { address: '10.77.0.2/24', gateway: '10.77.0.1', interface: 5 },
      ],
      routes: [
        { dst: '0.0.0.0/0', gw: '172.26.64.1' },
        { dst: '10.99.0.0/16', gw: '10.77.0.1' },
      ],
      dns: { nameservers: ['172.26.64.1'] },
    });
  });

  it('lists a route two attachments both have once, and keeps an address without an interface as it is', () => {
    const bare: CniResult = {
      cniVersion: '1.0.0',
      interfaces: [],
      ips: [{ address: '10.78.0.2/24' }],
      routes: [{ dst: '0.0.0.0/0', gw: '172.26.64.1' }],
      dns: {},
    };
    const merged = cniResultOf(recordOf([extraOf(bare)]));
    expect(merged?.ips).toEqual([...primary.ips, { address: '10.78.0.2/24' }]);
    expect(merged?.routes).toEqual(primary.routes);
  });

  it('has none when an attachment has no result', () => {
    expect(cniResultOf(recordOf([extraOf(undefined)]))).toBeUndefined();
    expect(cniResultOf({ ...recordOf(undefined), attachment: attachmentOf('nomad', 'eth0') })).toBe(
      undefined,
    );
  });
});
