import { namespaceName, runPrefix } from './names.js';

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
