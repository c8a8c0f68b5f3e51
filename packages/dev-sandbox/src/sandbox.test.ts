import { NetnsError } from '@allocnet/netns';
import { problemOf } from './errors.js';
import { agentArgs, sandboxPaths } from './sandbox.js';

describe('agentArgs', () => {
  const paths = sandboxPaths('/tmp/allocnet-dev-x');

  it("passes the user's flags but the sandbox's own, then the sandbox's paths", () => {
    expect(
      agentArgs(
        {
          flags: {
            'plugin-dir': ['/p1', '/p2'],
            'metrics-address': 'off',
            socket: '/ignored.sock',
            'data-dir': undefined,
          },
        },
        paths,
        'allocnet-dev-1234abcd-',
      ),
    ).toEqual([
      '--plugin-dir',
      '/p1',
      '--plugin-dir',
      '/p2',
      '--metrics-address',
      'off',
      '--conf-dir',
      '/tmp/allocnet-dev-x/net.d',
      '--data-dir',
      '/tmp/allocnet-dev-x/data',
      '--socket',
      '/tmp/allocnet-dev-x/agent.sock',
      '--cache-dir',
      '/tmp/allocnet-dev-x/data/cni',
      '--ipam-data-dir',
      '/tmp/allocnet-dev-x/ipam',
      '--netns-prefix',
      'allocnet-dev-1234abcd-',
      '--ready-file',
      '/tmp/allocnet-dev-x/ready.json',
    ]);
  });

  it('uses a conf dir and config file given, not its own empty conf dir', () => {
    const args = agentArgs(
      { flags: { 'conf-dir': '/etc/cni/net.d' }, configFile: '/etc/allocnet/agent.yaml' },
      paths,
      'p-',
    );
    expect(args.slice(0, 4)).toEqual([
      '--conf-dir',
      '/etc/cni/net.d',
      '--config',
      '/etc/allocnet/agent.yaml',
    ]);
    expect(args.filter((a) => a === '--conf-dir')).toHaveLength(1);
  });
});

describe('problemOf', () => {
  const command = (rest: Partial<NonNullable<NetnsError['command']>>) =>
    new NetnsError('the manager says', {
      code: 'command-failed',
      command: { argv: ['ip', 'netns', 'add', 'x'], exitCode: undefined, stderr: '', ...rest },
    });

  it('words a namespace command as the sandbox always has', () => {
    expect(problemOf(command({ exitCode: 1, stderr: 'File exists' }))).toBe(
      'ip netns add x failed (exit status 1): File exists',
    );
    expect(problemOf(command({ exitCode: 2 }))).toBe(
      'ip netns add x failed (exit status 2): no error message',
    );
    expect(
      problemOf(command({ failure: { reason: 'killed', message: 'killed by SIGKILL' } })),
    ).toBe('ip netns add x failed (exit status none): no error message');
    expect(
      problemOf(command({ failure: { reason: 'spawn', message: 'spawn ip ENOENT: not found' } })),
    ).toBe('ip netns add x could not run: spawn ip ENOENT: not found');
  });

  it("gives a failed kill's own message, and anything else's message", () => {
    const kill = new NetnsError('killing process 4 in namespace "s" failed: kill EPERM', {
      code: 'kill-failed',
      cause: new Error('kill EPERM'),
    });
    expect(problemOf(kill)).toBe('kill EPERM');
    expect(problemOf(new Error('EACCES: permission denied'))).toBe('EACCES: permission denied');
  });
});
