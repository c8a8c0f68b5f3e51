import { isNetnsError } from './errors.js';
import { checkNetnsName, parseLinkNames, parseNetnsList, parsePids } from './names.js';

describe('checkNetnsName', () => {
  it('returns a plain name and refuses anything ip netns or a path would read otherwise', () => {
    expect(checkNetnsName('alloc-6b23')).toBe('alloc-6b23');
    expect(checkNetnsName('x'.repeat(255))).toBe('x'.repeat(255));
    for (const name of ['', '.', '..', '-x', 'a/b', 'a\tb', 'a\0b', 'x'.repeat(256)]) {
      let caught: unknown;
      try {
        checkNetnsName(name);
      } catch (error) {
        caught = error;
      }
      expect(isNetnsError(caught) && [caught.code, caught.message]).toEqual([
        'invalid-name',
        `namespace name ${JSON.stringify(name)} is not 1 to 255 of [A-Za-z0-9_.-] starting with a letter, a digit or "_"`,
      ]);
    }
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

describe('parseNetnsList, parsePids', () => {
  it('reads names with or without an id, and pids one a line', () => {
    expect(parseNetnsList('b (id: 0)\n  a\n\n')).toEqual(['b', 'a']);
    expect(parseNetnsList('')).toEqual([]);
    expect(parsePids('10\n 11\n\n')).toEqual([10, 11]);
  });
});
