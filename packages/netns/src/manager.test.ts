// The manager against a recording command runner: exact argv, exact messages. `exists` reads
// real files (/proc/self/ns/net is a namespace for any user); one test starts a real process.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CommandExec, CommandSpec, RunResult } from '@allocnet/spawn';
import { isNetnsError } from './errors.js';
import { createIpNetnsManager } from './manager.js';
import { absolutePathProblem } from './paths.js';
import type { IpNetnsManagerOptions } from './manager.js';

const ok = (stdout = ''): RunResult => ({ kind: 'exited', exitCode: 0, stdout, stderr: '' });
const exit = (exitCode: number, stderr: string): RunResult => ({
  kind: 'exited',
  exitCode,
  stdout: '',
  stderr,
});

/** A `CommandExec` that records each command and answers from a script, in order. */
function recording(...answers: RunResult[]) {
  const calls: CommandSpec[] = [];
  const exec: CommandExec = {
    run(spec) {
      calls.push(spec);
      return Promise.resolve(answers.shift() ?? ok());
    },
  };
  const argv = () => calls.map((c) => [c.file, ...c.args].join(' '));
  return { calls, exec, argv };
}

function manager(answers: RunResult[], options: IpNetnsManagerOptions = {}) {
  const fake = recording(...answers);
  return { fake, netns: createIpNetnsManager({ run: fake.exec, ...options }) };
}

async function failure(promise: Promise<unknown>) {
  try {
    await promise;
  } catch (error) {
    if (isNetnsError(error)) return error;
    throw error;
  }
  throw new Error('it resolved');
}

describe('create, remove, list, pathOf', () => {
  it('runs ip netns add with a timeout and returns the path', async () => {
    const { fake, netns } = manager([ok()]);
    expect(await netns.create('alloc-1')).toBe('/run/netns/alloc-1');
    expect(fake.calls).toEqual([
      { file: 'ip', args: ['netns', 'add', 'alloc-1'], timeoutMs: 30_000 },
    ]);
  });

  it('says what ip said when a command fails', async () => {
    const { netns } = manager([
      exit(1, 'Cannot create namespace file "/run/netns/alloc-1": File exists\n'),
    ]);
    const error = await failure(netns.create('alloc-1'));
    expect([error.code, error.kind, error.message]).toEqual([
      'command-failed',
      'internal',
      'ip netns add alloc-1 failed (exit status 1): Cannot create namespace file "/run/netns/alloc-1": File exists',
    ]);
    expect(error.command).toEqual({
      argv: ['ip', 'netns', 'add', 'alloc-1'],
      exitCode: 1,
      stderr: 'Cannot create namespace file "/run/netns/alloc-1": File exists',
    });
  });

  it('says "no error message" for a silent failure and how a command that did not exit ended', async () => {
    const { netns } = manager([
      exit(2, ''),
      {
        kind: 'failed',
        reason: 'timeout',
        message: 'timed out after 5 ms',
        stdout: '',
        stderr: '',
      },
    ]);
    expect((await failure(netns.list())).message).toBe(
      'ip netns list failed (exit status 2): no error message',
    );
    const error = await failure(netns.list());
    expect(error.message).toBe('ip netns list failed (exit status none): timed out after 5 ms');
    expect(error.command?.failure).toEqual({ reason: 'timeout', message: 'timed out after 5 ms' });
  });

  it('passes the signal on and reports an abort as aborted', async () => {
    const { fake, netns } = manager([
      { kind: 'failed', reason: 'aborted', message: 'cancelled', stdout: '', stderr: '' },
    ]);
    const controller = new AbortController();
    const error = await failure(netns.remove('x', { signal: controller.signal }));
    expect([error.code, error.kind, error.message]).toEqual([
      'aborted',
      'aborted',
      'ip netns del x was aborted',
    ]);
    expect(fake.calls[0]?.signal).toBe(controller.signal);
  });

  it('lets ip netns add finish when aborted during it, then removes the namespace and is aborted', async () => {
    const controller = new AbortController();
    const calls: CommandSpec[] = [];
    const netns = createIpNetnsManager({
      run: (spec) => {
        calls.push(spec);
        // The abort arrives while `ip netns add` runs.
        if (spec.args[1] === 'add') controller.abort();
        return Promise.resolve(ok());
      },
    });
    const error = await failure(netns.create('x', { signal: controller.signal }));
    expect([error.code, error.message]).toEqual(['aborted', 'ip netns add x was aborted']);
    expect(calls.map((c) => [c.file, ...c.args].join(' '))).toEqual([
      'ip netns add x',
      'ip netns del x',
    ]);
    expect(calls.map((c) => c.signal)).toEqual([undefined, undefined]);
    // Already aborted: nothing runs.
    expect((await failure(netns.create('y', { signal: controller.signal }))).code).toBe('aborted');
    expect(calls).toHaveLength(2);
  });

  it('removes: true when it was there, false when it was not, else the failure', async () => {
    const { fake, netns } = manager([
      ok(),
      exit(1, 'Cannot remove namespace file "/run/netns/b": No such file or directory\n'),
      exit(1, 'Cannot remove namespace file "/run/netns/c": Device or resource busy\n'),
    ]);
    expect(await netns.remove('a')).toBe(true);
    expect(await netns.remove('b')).toBe(false);
    expect((await failure(netns.remove('c'))).message).toBe(
      'ip netns del c failed (exit status 1): Cannot remove namespace file "/run/netns/c": Device or resource busy',
    );
    expect(fake.argv()).toEqual(['ip netns del a', 'ip netns del b', 'ip netns del c']);
  });

  it('lists names, without the ids ip prints beside some', async () => {
    const { netns } = manager([ok('alloc-2 (id: 3)\nalloc-1\n\n')]);
    expect(await netns.list()).toEqual(['alloc-2', 'alloc-1']);
  });

  it('refuses a name that is not one plain file name, before running anything', async () => {
    const { fake, netns } = manager([]);
    for (const name of ['', '.', '..', 'a/b', 'a b', 'a\0b', 'x'.repeat(256)]) {
      const error = await failure(netns.create(name));
      expect([error.code, error.kind, error.message]).toEqual([
        'invalid-name',
        'invalid',
        `namespace name ${JSON.stringify(name)} is not 1 to 255 of [A-Za-z0-9_.-] starting with a letter, a digit or "_"`,
      ]);
    }
    expect(() => netns.pathOf('../etc')).toThrow(
      'namespace name "../etc" is not 1 to 255 of [A-Za-z0-9_.-] starting with a letter, a digit or "_"',
    );
    expect(netns.pathOf('alloc-1')).toBe('/run/netns/alloc-1');
    expect(fake.calls).toEqual([]);
  });

  it('takes the seam’s run function alone too, as before the seam was shared', async () => {
    const fake = recording(ok('alloc-1\n'));
    const netns = createIpNetnsManager({ run: (spec) => fake.exec.run(spec) });
    expect(await netns.list()).toEqual(['alloc-1']);
    expect(fake.calls).toEqual([{ file: 'ip', args: ['netns', 'list'], timeoutMs: 30_000 }]);
  });

  it('uses the ip it is given', async () => {
    const { fake, netns } = manager([ok()], { ipPath: '/sbin/ip', timeoutMs: 5 });
    await netns.list();
    expect(fake.calls).toEqual([{ file: '/sbin/ip', args: ['netns', 'list'], timeoutMs: 5 }]);
  });
});

describe('exists', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'allocnet-netns-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('is true for a namespace file and false for a plain file or nothing', async () => {
    const { netns } = manager([]);
    const plain = join(dir, 'plain');
    await writeFile(plain, '');
    expect(await netns.exists('/proc/self/ns/net')).toBe(true);
    expect(await netns.exists(plain)).toBe(false);
    expect(await netns.exists(join(dir, 'missing'))).toBe(false);
    expect(await netns.exists(join(plain, 'below-a-file'))).toBe(false);
  });
});

describe('createNode', () => {
  it('makes the namespace, sets lo up and turns IPv4 forwarding on', async () => {
    const { fake, netns } = manager([]);
    expect(await netns.createNode('allocnet-dev-1')).toBe('/run/netns/allocnet-dev-1');
    expect(fake.argv()).toEqual([
      'ip netns add allocnet-dev-1',
      'ip -n allocnet-dev-1 link set lo up',
      'nsenter --net=/run/netns/allocnet-dev-1 -- sysctl -q -w net.ipv4.ip_forward=1',
    ]);
  });

  it('turns IPv6 forwarding on too when asked, with the commands it is given', async () => {
    const { fake, netns } = manager([], { ipPath: '/sbin/ip', nsenterPath: '/bin/nsenter' });
    await netns.createNode('node', { ipv6Forwarding: true });
    expect(fake.argv()).toEqual([
      '/sbin/ip netns add node',
      '/sbin/ip -n node link set lo up',
      '/bin/nsenter --net=/run/netns/node -- sysctl -q -w net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1',
    ]);
  });

  it('stops at the first step that fails', async () => {
    const { fake, netns } = manager([ok(), exit(1, 'Cannot find device "lo"')]);
    expect((await failure(netns.createNode('n'))).message).toBe(
      'ip -n n link set lo up failed (exit status 1): Cannot find device "lo"',
    );
    expect(fake.calls).toHaveLength(2);
  });
});

describe('pids, killAll', () => {
  it('kills every process inside, counting one that exited meanwhile as gone', async () => {
    const killed: [number, string][] = [];
    const { fake, netns } = manager([ok('12\n13\n14\n')], {
      kill: (pid, signal) => {
        if (pid === 13) throw Object.assign(new Error('kill ESRCH'), { code: 'ESRCH' });
        killed.push([pid, signal]);
      },
    });
    expect(await netns.killAll('sandbox')).toBe(2);
    expect(fake.argv()).toEqual(['ip netns pids sandbox']);
    expect(killed).toEqual([
      [12, 'SIGKILL'],
      [14, 'SIGKILL'],
    ]);
  });

  it('tries them all, then throws the first other failure', async () => {
    const tried: number[] = [];
    const { netns } = manager([ok('12\n13\n')], {
      kill: (pid) => {
        tried.push(pid);
        throw Object.assign(new Error('kill EPERM'), { code: 'EPERM' });
      },
    });
    const error = await failure(netns.killAll('sandbox'));
    expect([error.code, error.message]).toEqual([
      'kill-failed',
      'killing process 12 in namespace "sandbox" failed: kill EPERM',
    ]);
    expect((error.cause as Error).message).toBe('kill EPERM');
    expect(tried).toEqual([12, 13]);
  });

  it('lists pids', async () => {
    const { netns } = manager([ok('7\n\n8\n')]);
    expect(await netns.pids('n')).toEqual([7, 8]);
  });
});

describe('links, deleteLink', () => {
  it('lists the links inside and deletes one, false when it is already gone', async () => {
    const { fake, netns } = manager([
      ok('1: lo: <LOOPBACK> mtu 65536\n4: veth1@if3: <BROADCAST> mtu 1500\n'),
      ok(),
      exit(1, 'Cannot find device "veth2"'),
      // Found, then gone before the delete: its peer's namespace was deleted meanwhile.
      exit(2, 'RTNETLINK answers: No such device'),
      exit(2, 'RTNETLINK answers: Operation not permitted'),
    ]);
    expect(await netns.links('n')).toEqual(['lo', 'veth1']);
    expect(await netns.deleteLink('n', 'veth1')).toBe(true);
    expect(await netns.deleteLink('n', 'veth2')).toBe(false);
    expect(await netns.deleteLink('n', 'veth3')).toBe(false);
    expect((await failure(netns.deleteLink('n', 'lo'))).message).toBe(
      'ip -n n link del lo failed (exit status 2): RTNETLINK answers: Operation not permitted',
    );
    expect(fake.argv()).toEqual([
      'ip -n n -o link show',
      'ip -n n link del veth1',
      'ip -n n link del veth2',
      'ip -n n link del veth3',
      'ip -n n link del lo',
    ]);
  });
});

describe('deleteDefaultRoutes', () => {
  it('flushes the default routes of both families through the link, by namespace path', async () => {
    const { fake, netns } = manager([ok(), ok()]);
    await netns.deleteDefaultRoutes('/proc/42/ns/net', 'net1');
    expect(fake.argv()).toEqual([
      'nsenter --net=/proc/42/ns/net -- ip -4 route flush exact default dev net1',
      'nsenter --net=/proc/42/ns/net -- ip -6 route flush exact default dev net1',
    ]);
  });

  it('says what ip said, and refuses a path that is not clean and absolute', async () => {
    const { fake, netns } = manager([exit(1, 'Cannot find device "net1"')]);
    expect((await failure(netns.deleteDefaultRoutes('/run/netns/a', 'net1'))).message).toBe(
      'nsenter --net=/run/netns/a -- ip -4 route flush exact default dev net1 failed (exit status 1): Cannot find device "net1"',
    );
    const bad = await failure(netns.deleteDefaultRoutes('run/netns/a', 'net1'));
    expect([bad.code, bad.message]).toEqual([
      'invalid-name',
      `namespace path "run/netns/a" ${absolutePathProblem('run/netns/a') ?? ''}`,
    ]);
    expect(fake.calls).toHaveLength(1);
  });
});

describe('with real processes', () => {
  it('reports an ip that cannot be started', async () => {
    const netns = createIpNetnsManager({ ipPath: '/nonexistent/ip' });
    const error = await failure(netns.list());
    expect(error.code).toBe('command-failed');
    expect(error.command).toMatchObject({
      argv: ['/nonexistent/ip', 'netns', 'list'],
      exitCode: undefined,
      failure: { reason: 'spawn' },
    });
    expect(error.message).toMatch(/^\/nonexistent\/ip netns list failed \(exit status none\): /);
  });
});
