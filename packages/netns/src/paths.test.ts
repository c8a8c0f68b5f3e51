import { absolutePathProblem, netnsNameProblem, resolveNetns, tidyPath } from './paths.js';

describe('netnsNameProblem', () => {
  it('takes what ip netns and a path component take, and nothing an option could be', () => {
    for (const name of ['alloc-6b23', '_x', '0.a', 'x'.repeat(255)])
      expect(netnsNameProblem(name)).toBeUndefined();
    for (const name of ['', '.', '..', '-n', '.hidden', 'a/b', 'a b', 'a\0b', 'x'.repeat(256)])
      expect(netnsNameProblem(name)).toBe(
        'is not 1 to 255 of [A-Za-z0-9_.-] starting with a letter, a digit or "_"',
      );
  });
});

describe('absolutePathProblem', () => {
  it('takes an absolute path without "." or ".." segments, NUL, or more than PATH_MAX', () => {
    for (const path of ['/', '/run/netns/x', '/var//lib/', '/a..b/.c'])
      expect(absolutePathProblem(path)).toBeUndefined();
    expect(absolutePathProblem('run/x')).toBe('is not an absolute path');
    expect(absolutePathProblem('')).toBe('is not an absolute path');
    for (const path of ['/a/../b', '/a/./b', '/a/..', '/a\0', `/${'x'.repeat(4095)}`])
      expect(absolutePathProblem(path)).toBe(
        'is not a clean absolute path (no "." or ".." segment, no NUL, under 4096 characters)',
      );
  });
});

describe('tidyPath', () => {
  it('folds repeated slashes and drops a trailing one', () => {
    expect(tidyPath('/var//lib///x/')).toBe('/var/lib/x');
    expect(tidyPath('/')).toBe('/');
    expect(tidyPath('//')).toBe('/');
  });
});

describe('resolveNetns', () => {
  it('gives a name its path under /run/netns and a path its name when it has one', () => {
    expect(resolveNetns('node-1')).toEqual({ path: '/run/netns/node-1', name: 'node-1' });
    expect(resolveNetns('/run/netns/node-1')).toEqual({
      path: '/run/netns/node-1',
      name: 'node-1',
    });
    expect(resolveNetns('/proc/12/ns/net')).toEqual({ path: '/proc/12/ns/net', name: undefined });
    expect(resolveNetns('/run/netns/a/b')).toEqual({ path: '/run/netns/a/b', name: undefined });
    expect(resolveNetns('a b')).toEqual({
      problem: 'is not 1 to 255 of [A-Za-z0-9_.-] starting with a letter, a digit or "_"',
    });
    expect(resolveNetns('x/y')).toEqual({ problem: 'is not an absolute path' });
  });
});
