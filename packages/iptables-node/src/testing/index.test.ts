import { createBatch, formatRestoreInput } from '../batch.js';
import { addBridgeMasquerade, bridgeChainName, createRecordingExec, exit } from './index.js';

describe('bridge plugin fixtures', () => {
  it('names the chain as the bridge plugin does (the value in Nomad and the peer baseline)', () => {
    expect(bridgeChainName('nomad', '6b235529-8111-4bbe-520b-d639b1d2a94e')).toBe(
      'CNI-50e58ea77dc52e0c731e3799',
    );
  });

  it('writes the plugin’s masquerade rules', () => {
    const batch = addBridgeMasquerade(createBatch(), {
      network: 'nomad',
      id: '6b235529-8111-4bbe-520b-d639b1d2a94e',
      ip: '172.26.64.2',
    });
    const c = String.raw`-m comment --comment "name: \"nomad\" id: \"6b235529-8111-4bbe-520b-d639b1d2a94e\""`;
    expect(formatRestoreInput(batch.ops).text).toBe(
      [
        '*nat',
        '-N CNI-50e58ea77dc52e0c731e3799',
        `-A CNI-50e58ea77dc52e0c731e3799 -d 172.26.64.0/20 ${c} -j ACCEPT`,
        `-A CNI-50e58ea77dc52e0c731e3799 ! -d 224.0.0.0/4 ${c} -j MASQUERADE`,
        `-A POSTROUTING -s 172.26.64.2/32 ${c} -j CNI-50e58ea77dc52e0c731e3799`,
        'COMMIT',
        '',
      ].join('\n'),
    );
  });
});

describe('createRecordingExec', () => {
  it('records argv and stdin, answers from its queue, then exit 0', async () => {
    const exec = createRecordingExec().reply(exit(4, 'busy\n'));
    expect(
      await exec.run({ file: 'iptables-restore', args: ['--noflush'], input: '*nat\nCOMMIT\n' }),
    ).toEqual({
      kind: 'exited',
      exitCode: 4,
      stdout: '',
      stderr: 'busy\n',
    });
    expect(await exec.run({ file: 'iptables', args: ['-S'] })).toEqual({
      kind: 'exited',
      exitCode: 0,
      stdout: '',
      stderr: '',
    });
    expect(exec.calls).toEqual([
      {
        file: 'iptables-restore',
        args: ['--noflush'],
        input: '*nat\nCOMMIT\n',
        argv: ['iptables-restore', '--noflush'],
      },
      { file: 'iptables', args: ['-S'], input: undefined, argv: ['iptables', '-S'] },
    ]);
  });
});
