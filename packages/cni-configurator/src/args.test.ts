import { cniArgs } from './args.js';

describe('cniArgs', () => {
  it('puts IgnoreUnknown first, the user args sorted, then the workload identity', () => {
    expect(
      cniArgs(
        {
          allocId: '6b235529-8111-4bbe-520b-d639b1d2a94e',
          region: 'eu',
          namespace: 'prod',
          jobId: 'web',
          groupName: 'frontend',
          cniArgs: { Zeta: '1', Alpha: 'x', K8S_POD_NAME: '' },
        },
        'global',
      ),
    ).toEqual([
      ['IgnoreUnknown', '1'],
      ['Alpha', 'x'],
      ['K8S_POD_NAME', ''],
      ['Zeta', '1'],
      ['NOMAD_REGION', 'eu'],
      ['NOMAD_NAMESPACE', 'prod'],
      ['NOMAD_JOB_ID', 'web'],
      ['NOMAD_GROUP_NAME', 'frontend'],
      ['NOMAD_ALLOC_ID', '6b235529-8111-4bbe-520b-d639b1d2a94e'],
    ]);
  });

  it('takes the agent region when the spec has none', () => {
    const args = cniArgs(
      { allocId: 'a', namespace: 'n', jobId: 'j', groupName: 'g', region: '' },
      'global',
    );
    expect(args).toContainEqual(['NOMAD_REGION', 'global']);
    expect(args).toHaveLength(6);
  });
});
