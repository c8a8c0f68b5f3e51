import { ERROR_KINDS } from '@allocnet/base';
import type { ErrorKind } from '@allocnet/base';
import { RunnerError } from '@allocnet/alloc-runner';
import { KIND_ANSWER, answerCode, faultAnswer, faultOf } from './answer.js';
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
