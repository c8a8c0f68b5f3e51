import { namespaceName, parseLinkNames, runPrefix } from './names.js';

describe('runPrefix', () => {
  it('takes the prefix the test command set', () => {
    expect(runPrefix({ ALLOCNET_TESTNS_PREFIX: 'ant-1a2b3c' })).toBe('ant-1a2b3c');
  });

  it('makes a random one otherwise', () => {
    expect(runPrefix({})).toMatch(/^ant-[0-9a-f]{8}$/);
    expect(runPrefix({})).not.toBe(runPrefix({}));
  });

  it('refuses a prefix the leak check would not find', () => {
    expect(() => runPrefix({ ALLOCNET_TESTNS_PREFIX: 'mine' })).toThrow(
      'ALLOCNET_TESTNS_PREFIX "mine" is not "ant-" and 1-16 of [a-z0-9]',
    );
  });
});

describe('namespaceName', () => {
  it('joins prefix, pid, lab, sequence and label', () => {
    expect(namespaceName('ant-x', 3, 11, 'node')).toBe(
      `ant-x-${process.pid.toString(36)}-3-b-node`,
    );
  });

  it('refuses labels that are not short and plain', () => {
    expect(() => namespaceName('ant-x', 1, 1, 'Node 1')).toThrow(
      'label "Node 1" is not 1-12 of [a-z0-9]',
    );
  });
});

describe('parseLinkNames', () => {
  it('reads ip -o link output, dropping the @peer part', () => {
    const output = [
      '1: lo: <LOOPBACK> mtu 65536 qdisc noop state DOWN mode DEFAULT group default qlen 1000\\    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00',
      '4: veth1@if3: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP',
      '5: nomad: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500',
      '',
    ].join('\n');
    expect(parseLinkNames(output)).toEqual(['lo', 'veth1', 'nomad']);
  });
});
