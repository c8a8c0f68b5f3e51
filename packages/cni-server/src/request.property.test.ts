// Properties of the CNI server's request decoding (the body allocnet-cni posts: the runtime's
// CNI_* environment and its conflist entry): any JSON body is a call or a `CniFault` with the
// spec's code for what is wrong, naming a field of the body; an ADD's call becomes a runner spec
// or a refusal that `faultOf` names as a field of the body too.
import fc from 'fast-check';
import { decodeSpec } from '@allocnet/alloc-runner';
import { RESULT_VERSIONS } from '@allocnet/cni';
import { formatPath } from '@allocnet/base';
import { mutateAt, propertyParameters, valueAt } from '@allocnet/cni/testing';
import { answerCode, faultOf } from './answer.js';
import { CniFault } from './errors.js';
import { specOfAdd } from './add-spec.js';
import { decodeCniRequest } from './request.js';
import type { CniCall } from './request.js';

const SEED = 16_2010;

const name = fc.stringMatching(/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,15}$/);
const args = fc.oneof(
  fc.constant(''),
  fc.constant('IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0'),
  fc
    .tuple(name, name, name)
    .map(
      ([ns, job, group]) => `NOMAD_NAMESPACE=${ns};NOMAD_JOB_ID=${job};NOMAD_GROUP_NAME=${group}`,
    ),
  fc
    .array(
      fc.tuple(
        name,
        fc.string({ maxLength: 8 }).filter((s) => !/[;=\0]/.test(s)),
      ),
      { maxLength: 3 },
    )
    .map((pairs) => pairs.map(([k, v]) => `${k}=${v}`).join(';')),
);
const mapping = fc.record(
  {
    hostPort: fc.integer({ min: 0, max: 65535 }),
    containerPort: fc.integer({ min: 1, max: 65535 }),
    protocol: fc.constantFrom('tcp', 'udp', 'TCP', ''),
    hostIP: fc.oneof(fc.constant(''), fc.ipV4(), fc.ipV6()),
  },
  { requiredKeys: ['containerPort'] },
);

/** A body as allocnet-cni posts it, for any verb. */
const validBody = fc.record({
  env: fc.record(
    {
      CNI_COMMAND: fc.constantFrom('ADD', 'DEL', 'CHECK', 'STATUS', 'GC', 'VERSION'),
      CNI_CONTAINERID: fc.oneof(name, fc.constant('a'.repeat(64))),
      CNI_NETNS: fc.constantFrom('/run/netns/cni-1', '/proc/42/ns/net'),
      CNI_IFNAME: fc.constantFrom('eth0', 'eth1', 'net1'),
      CNI_ARGS: args,
      CNI_PATH: fc.constant('/opt/cni/bin'),
    },
    { requiredKeys: ['CNI_COMMAND', 'CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME'] },
  ),
  config: fc.record(
    {
      cniVersion: fc.constantFrom(...RESULT_VERSIONS),
      name,
      type: fc.constant('allocnet-cni'),
      delegate: name,
      runtimeConfig: fc.record({ portMappings: fc.array(mapping, { maxLength: 3 }) }),
      'cni.dev/valid-attachments': fc.array(
        fc.record({ containerID: name, ifname: fc.constant('eth0') }),
        { maxLength: 2 },
      ),
    },
    { requiredKeys: ['cniVersion', 'name', 'type', 'cni.dev/valid-attachments'] },
  ),
});

const change = fc.oneof(
  fc.constant('delete' as const),
  fc.jsonValue({ maxDepth: 2 }).map((replace) => ({ replace })),
  fc
    .constantFrom('', 'x'.repeat(300), 'a;b', '../x', -1, 0, 1.5, 70_000, 'SCTP', '0.2.0', '\u0000')
    .map((replace) => ({ replace })),
);
const mutatedBody = fc
  .tuple(validBody, fc.nat(), change)
  .map(([body, pick, c]) => mutateAt(body, pick, c));

/** Checks a fault: the spec's code for its part of the body, and a field the body has. */
function checkFault(fault: CniFault, body: unknown): void {
  const path = fault.path ?? [];
  expect(path.length).toBeGreaterThan(0);
  expect(fault.message.startsWith(`${formatPath(path)} `)).toBe(true);
  // A body that is not an object is named as the server names a body that is not JSON.
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    expect(path).toEqual(['body']);
    return;
  }
  const { code } = answerCode(fault);
  expect([1, 4, 7]).toContain(code);
  if (code === 7) expect(path[0] === 'env' || path[0] === 'body').toBe(true);
  if (!valueAt(body, path).found) {
    expect(valueAt(body, path.slice(0, -1)).found).toBe(true);
    // "got nothing": the message of a missing GC attachment field (see the report of issue 16).
    expect(fault.message).toMatch(/ (is missing|got nothing)/);
  }
}

describe('CNI request properties', () => {
  it('reads any JSON body as a call or a CniFault naming a field of it', () => {
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue(), mutatedBody), (body) => {
        try {
          decodeCniRequest(body);
        } catch (error) {
          if (!(error instanceof CniFault)) throw error;
          checkFault(error, body);
        }
      }),
      propertyParameters(SEED, 600),
    );
  });

  it("makes any ADD's call a runner spec, or a fault naming a field of the body", () => {
    fc.assert(
      fc.property(fc.oneof(validBody, mutatedBody), (body) => {
        let call: CniCall;
        try {
          call = decodeCniRequest(body);
        } catch (error) {
          if (!(error instanceof CniFault)) throw error;
          return;
        }
        if (call.command !== 'ADD') return;
        try {
          decodeSpec(specOfAdd(call));
        } catch (error) {
          checkFault(faultOf(error, call), body);
        }
      }),
      propertyParameters(SEED, 600),
    );
  });
});

describe('CNI request examples the properties found', () => {
  const config = { cniVersion: '1.0.0', name: 'allocnet', type: 'allocnet-cni' };

  it.each([5, null, [], 'ADD'])('names the body when it is %j, not an object', (body) => {
    let fault: unknown;
    try {
      decodeCniRequest(body);
    } catch (error) {
      fault = error;
    }
    expect(fault).toBeInstanceOf(CniFault);
    expect(fault).toMatchObject({
      code: 'invalid-request',
      kind: 'invalid',
      path: ['body'],
      message: `body should be an object with env and config, got ${JSON.stringify(body)}`,
    });
    expect(answerCode(fault as CniFault).code).toBe(4);
  });

  it('names env when it is a list nested 10,000 deep (a 20 kB body)', () => {
    const env = JSON.parse(`${'['.repeat(10_000)}${']'.repeat(10_000)}`) as unknown;
    let fault: unknown;
    try {
      decodeCniRequest({ env, config });
    } catch (error) {
      fault = error;
    }
    expect(fault).toBeInstanceOf(CniFault);
    expect(fault).toMatchObject({ code: 'invalid-request', path: ['env'] });
    expect(answerCode(fault as CniFault).code).toBe(7);
  });
});
