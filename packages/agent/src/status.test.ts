import * as grpc from '@grpc/grpc-js';
import { RunnerError, invalidInput } from '@allocnet/alloc-runner';
import { CniError } from '@allocnet/cni';
import { ERROR_KINDS } from '@allocnet/base';
import type { FieldPath } from '@allocnet/base';
import { ConfiguratorError, invalidField } from '@allocnet/cni-configurator';
import { IptablesError } from '@allocnet/iptables-node';
import { AgentError, invalidRequest } from './errors.js';
import { statusOfKind } from '@allocnet/proto';
import type { AbortCause } from '@allocnet/proto';
import { grpcFailure, protoField, statusName } from './status.js';

const bridgeFailed = new CniError(
  'plugin "bridge" failed (ADD) for "a1": failed to set bridge addr: could not add IP address',
  {
    code: 'plugin-error',
    specCode: 999,
    msg: 'failed to set bridge addr',
    plugin: 'bridge',
    verb: 'ADD',
  },
);
const setupFailed = new ConfiguratorError(
  `setting up "a1" in network "nomad" failed after 3 attempts: ${bridgeFailed.message}`,
  { code: 'setup-failed', allocId: 'a1', network: 'nomad', attempts: 3, cause: bridgeFailed },
);

function runner(code: RunnerError['code'], message: string, cause?: unknown) {
  return new RunnerError(message, {
    code,
    allocId: 'a1',
    ...(cause === undefined ? {} : { cause }),
  });
}

describe('grpcFailure', () => {
  const table: [
    string,
    unknown,
    AbortCause | undefined,
    grpc.status,
    string,
    Record<string, string>,
  ][] = [
    [
      "the runner's invalid-argument, with its own field",
      invalidInput(
        'invalid allocation spec',
        ['spec', 'netnsPath'],
        ['"/x" is not a network namespace'],
        { allocId: 'a1' },
      ),
      undefined,
      grpc.status.INVALID_ARGUMENT,
      'netns_path "/x" is not a network namespace',
      { 'allocnet-error': 'invalid-argument', 'allocnet-field': 'netns_path' },
    ],
    [
      "the runner's invalid-argument found by the configurator's decoder",
      invalidInput(
        'invalid allocation spec',
        ['spec', 'legacyNetworks', 0, 'reservedPorts', 1, 'value'],
        ['should be a port number from 1 to 65535, got 0'],
        {
          allocId: 'a1',
          cause: invalidField(
            ['legacyNetworks', 0, 'reservedPorts', 1, 'value'],
            'should be a port number from 1 to 65535, got 0',
          ),
        },
      ),
      undefined,
      grpc.status.INVALID_ARGUMENT,
      'networks[0].reserved_ports[1].value should be a port number from 1 to 65535, got 0',
      {
        'allocnet-error': 'invalid-argument',
        'allocnet-field': 'networks[0].reserved_ports[1].value',
      },
    ],
    [
      'an unknown network found during setup',
      new RunnerError(
        'setup of allocation "a1" failed: network "nope" is not known (networks: "nomad")',
        {
          code: 'invalid-argument',
          allocId: 'a1',
          path: ['spec', 'network'],
          problem: ['"nope" is not known (networks: "nomad")'],
          cause: new ConfiguratorError('network "nope" is not known (networks: "nomad")', {
            code: 'network-not-found',
            path: ['network'],
            problem: ['"nope" is not known (networks: "nomad")'],
            network: 'nope',
          }),
        },
      ),
      undefined,
      grpc.status.INVALID_ARGUMENT,
      'network "nope" is not known (networks: "nomad")',
      { 'allocnet-error': 'network-not-found', 'allocnet-field': 'network' },
    ],
    [
      'a duplicate host port, quoting the other port by its request name',
      invalidField(
        ['legacyNetworks', 0, 'dynamicPorts', 0, 'value'],
        [
          '("b") claims host port 80, which ',
          { field: ['legacyNetworks', 0, 'reservedPorts', 0, 'value'] },
          ' ("a") already claims',
        ],
      ),
      undefined,
      grpc.status.INVALID_ARGUMENT,
      'networks[0].dynamic_ports[0].value ("b") claims host port 80, which networks[0].reserved_ports[0].value ("a") already claims',
      {
        'allocnet-error': 'invalid-argument',
        'allocnet-field': 'networks[0].dynamic_ports[0].value',
      },
    ],
    [
      'a CNI arg key, quoted as a map key',
      invalidField(
        ['cniArgs', 'a;b'],
        '"a;b" contains ";", "=" or a NUL character, which CNI_ARGS cannot carry',
      ),
      undefined,
      grpc.status.INVALID_ARGUMENT,
      'cni_args["a;b"] "a;b" contains ";", "=" or a NUL character, which CNI_ARGS cannot carry',
      { 'allocnet-error': 'invalid-argument', 'allocnet-field': 'cni_args["a;b"]' },
    ],
    [
      "the agent's own invalid request",
      invalidRequest(['batchSize'], ['should be from 0 to 10000, got 20000'], protoField),
      undefined,
      grpc.status.INVALID_ARGUMENT,
      'batch_size should be from 0 to 10000, got 20000',
      { 'allocnet-error': 'invalid-request', 'allocnet-field': 'batch_size' },
    ],
    [
      'not-found',
      runner('not-found', 'allocation "a1" is not set up'),
      undefined,
      grpc.status.NOT_FOUND,
      'allocation "a1" is not set up',
      { 'allocnet-error': 'not-found' },
    ],
    [
      "the agent's not-found",
      new AgentError('allocation "a1" is not known to this agent', { code: 'not-found' }),
      undefined,
      grpc.status.NOT_FOUND,
      'allocation "a1" is not known to this agent',
      { 'allocnet-error': 'not-found' },
    ],
    [
      'conflict, naming the fields as the request does',
      new RunnerError(
        'allocation "a1" is already set up with a different spec (jobId, legacyNetworks, ports differ); tear it down first',
        {
          code: 'conflict',
          allocId: 'a1',
          parts: [
            'allocation "a1" is already set up with a different spec (',
            { field: ['jobId'] },
            ', ',
            { field: ['legacyNetworks'] },
            ', ',
            { field: ['ports'] },
            ' differ); tear it down first',
          ],
        },
      ),
      undefined,
      grpc.status.FAILED_PRECONDITION,
      'allocation "a1" is already set up with a different spec (job_id, networks, ports differ); tear it down first',
      { 'allocnet-error': 'conflict' },
    ],
    [
      'a failed allocation',
      runner('failed', 'allocation "a1" failed: namespace "/run/netns/x" is gone'),
      undefined,
      grpc.status.FAILED_PRECONDITION,
      'allocation "a1" failed: namespace "/run/netns/x" is gone',
      { 'allocnet-error': 'failed' },
    ],
    [
      'a failed setup, with the plugin in the message and the metadata',
      runner(
        'setup-failed',
        `setup of allocation "a1" failed: ${setupFailed.message}`,
        setupFailed,
      ),
      undefined,
      grpc.status.INTERNAL,
      'setup of allocation "a1" failed: setting up "a1" in network "nomad" failed after 3 attempts: plugin "bridge" failed (ADD) for "a1": failed to set bridge addr: could not add IP address',
      {
        'allocnet-error': 'setup-failed',
        'allocnet-cni-plugin': 'bridge',
        'allocnet-cni-code': 'plugin-error',
        'allocnet-attempts': '3',
      },
    ],
    [
      'a missing plugin',
      runner(
        'setup-failed',
        'setup of allocation "a1" failed: plugin "bridge" not found in "/opt/cni/bin"',
        new ConfiguratorError(
          'setting up "a1" failed after 1 attempt: plugin "bridge" not found in "/opt/cni/bin"',
          {
            code: 'unavailable',
            attempts: 1,
            cause: new CniError('plugin "bridge" not found in "/opt/cni/bin"', {
              code: 'plugin-not-found',
              msg: 'plugin "bridge" not found in "/opt/cni/bin"',
              plugin: 'bridge',
            }),
          },
        ),
      ),
      undefined,
      grpc.status.UNAVAILABLE,
      'setup of allocation "a1" failed: plugin "bridge" not found in "/opt/cni/bin"',
      {
        'allocnet-error': 'setup-failed',
        'allocnet-cni-plugin': 'bridge',
        'allocnet-cni-code': 'plugin-not-found',
        'allocnet-attempts': '1',
      },
    ],
    [
      'missing iptables in a teardown',
      runner(
        'teardown-failed',
        'teardown of allocation "a1" failed: spawn iptables-save ENOENT',
        new IptablesError('spawn iptables-save ENOENT', { code: 'spawn' }),
      ),
      undefined,
      grpc.status.UNAVAILABLE,
      'teardown of allocation "a1" failed: spawn iptables-save ENOENT',
      { 'allocnet-error': 'teardown-failed' },
    ],
    [
      'a runner shutting down',
      new RunnerError('the allocation runner is shutting down', { code: 'shutting-down' }),
      undefined,
      grpc.status.UNAVAILABLE,
      'the allocation runner is shutting down',
      { 'allocnet-error': 'shutting-down' },
    ],
    [
      'an abort at the deadline',
      runner('aborted', 'setup of allocation "a1" was aborted: cancelled'),
      'deadline',
      grpc.status.DEADLINE_EXCEEDED,
      'setup of allocation "a1" was aborted: cancelled',
      { 'allocnet-error': 'aborted' },
    ],
    [
      'an abort by the client',
      runner('aborted', 'the operation on allocation "a1" was aborted'),
      'cancelled',
      grpc.status.CANCELLED,
      'the operation on allocation "a1" was aborted',
      { 'allocnet-error': 'aborted' },
    ],
    [
      'an abort by a forced shutdown',
      runner(
        'check-failed',
        'check of allocation "a1" failed: aborted',
        new CniError('aborted', { code: 'aborted', msg: 'aborted' }),
      ),
      'shutdown',
      grpc.status.UNAVAILABLE,
      'check of allocation "a1" failed: aborted',
      { 'allocnet-error': 'check-failed', 'allocnet-cni-code': 'aborted' },
    ],
    [
      "the configurator's cleanup failure",
      new ConfiguratorError('cleaning up "a1": iptables-restore failed', {
        code: 'cleanup-failed',
      }),
      undefined,
      grpc.status.INTERNAL,
      'cleaning up "a1": iptables-restore failed',
      { 'allocnet-error': 'cleanup-failed' },
    ],
    [
      "the configurator's abort at the deadline",
      new ConfiguratorError('reaping was aborted', { code: 'aborted' }),
      'deadline',
      grpc.status.DEADLINE_EXCEEDED,
      'reaping was aborted',
      { 'allocnet-error': 'aborted' },
    ],
    [
      'anything else',
      new TypeError('x is not a function'),
      undefined,
      grpc.status.INTERNAL,
      'x is not a function',
      { 'allocnet-error': 'internal' },
    ],
  ];

  it.each(table)('maps %s', (_, error, cause, code, details, metadata) => {
    expect(grpcFailure(error, cause)).toEqual({ code, details, metadata });
  });

  it('leaves metadata that is not printable ASCII out (it stays in the message)', () => {
    const error = invalidField(['cniArgs', 'é'], '"é" is not valid');
    expect(grpcFailure(error, undefined)).toEqual({
      code: grpc.status.INVALID_ARGUMENT,
      details: 'cni_args["é"] "é" is not valid',
      metadata: { 'allocnet-error': 'invalid-argument' },
    });
  });
});

describe('protoField', () => {
  it.each<[FieldPath, string]>([
    [['spec', 'allocId'], 'alloc_id'],
    [['spec'], ''],
    [['allocId'], 'alloc_id'],
    [['spec', 'ports', 3, 'hostIp'], 'ports[3].host_ip'],
    [['spec', 'legacyNetworks', 1, 'dynamicPorts', 0, 'to'], 'networks[1].dynamic_ports[0].to'],
    [['spec', 'cniArgs'], 'cni_args'],
    [['spec', 'cniArgs', 'a.b'], 'cni_args["a.b"]'],
    [['netns'], 'netns_path'],
    [['batchSize'], 'batch_size'],
    [['namespace'], 'namespace'],
    [['spec', 'attachments', 1, 'ifName'], 'attachments[1].interface_name'],
    [['spec', 'attachments', 0, 'defaultRoute'], 'attachments[0].default_route'],
    [['spec', 'attachments', 2, 'cniArgs', 'a;b'], 'attachments[2].cni_args["a;b"]'],
    [['attachment', 'ports', 1, 'hostIp'], 'attachment.ports[1].host_ip'],
    [['interfaceName'], 'interface_name'],
  ])('%j is %s', (path, expected) => {
    expect(protoField(path)).toBe(expected);
  });

  it("spells the runner's refusal of an attachment, and the other field it names, as the .proto does", () => {
    const error = invalidInput(
      'invalid allocation spec',
      ['spec', 'attachments', 1, 'ifName'],
      ['"eth0" is also the interface of ', { field: ['spec', 'attachments', 0, 'ifName'] }],
    );
    expect(grpcFailure(error, undefined)).toEqual({
      code: grpc.status.INVALID_ARGUMENT,
      details:
        'attachments[1].interface_name "eth0" is also the interface of attachments[0].interface_name',
      metadata: {
        'allocnet-error': 'invalid-argument',
        'allocnet-field': 'attachments[1].interface_name',
      },
    });
  });
});

describe('the kind table', () => {
  it('maps every kind to its gRPC status, an abort by its cause', () => {
    const table = ERROR_KINDS.map((kind) => [kind, statusName(statusOfKind(kind, undefined))]);
    expect(table).toEqual([
      ['invalid', 'INVALID_ARGUMENT'],
      ['not-found', 'NOT_FOUND'],
      ['conflict', 'FAILED_PRECONDITION'],
      ['unavailable', 'UNAVAILABLE'],
      ['aborted', 'CANCELLED'],
      ['broken', 'INTERNAL'],
      ['exhausted', 'RESOURCE_EXHAUSTED'],
      ['internal', 'INTERNAL'],
    ]);
    expect(
      (['deadline', 'cancelled', 'shutdown'] as const).map((cause) =>
        statusName(statusOfKind('aborted', cause)),
      ),
    ).toEqual(['DEADLINE_EXCEEDED', 'CANCELLED', 'UNAVAILABLE']);
    expect(statusName(statusOfKind(undefined, undefined))).toBe('INTERNAL');
  });

  it('answers every kind of every package by its kind alone, whatever the message says', () => {
    for (const kind of ERROR_KINDS) {
      const error = Object.assign(new Error('plugin-not-found unavailable aborted'), { kind });
      expect(grpcFailure(error, 'deadline').code).toBe(statusOfKind(kind, 'deadline'));
    }
  });
});
