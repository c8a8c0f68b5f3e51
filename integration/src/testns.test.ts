// The namespace helper every networking test stands on: it must make what it says and remove all
// of it, also when a test fails or leaves a process, a veth or a bridge inside.
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { execa } from 'execa';
import { createNetnsLab, requireNetworkTestHost, withNetnsLab } from '@allocnet/testns';

beforeAll(async () => {
  await requireNetworkTestHost(['ip', 'nsenter', 'ping']);
});

async function listed(): Promise<string[]> {
  const { stdout } = await execa('ip', ['netns', 'list']);
  return stdout
    .split('\n')
    .map((l) => l.split(' ')[0] ?? '')
    .filter((n) => n !== '');
}

describe('a netns lab', () => {
  it('makes a node and containers, connects them, runs commands inside, and removes it all', async () => {
    const lab = createNetnsLab();
    try {
      const node = await lab.node();
      const ctr = await lab.container();
      expect(node.name).toMatch(new RegExp(`^${lab.prefix}-[0-9a-z]+-[0-9a-z]+-1-node$`));
      expect(ctr.name).toMatch(new RegExp(`^${lab.prefix}-[0-9a-z]+-[0-9a-z]+-2-ctr$`));
      expect(await listed()).toEqual(expect.arrayContaining([node.name, ctr.name]));

      expect((await node.exec(['sysctl', '-n', 'net.ipv4.ip_forward'])).stdout.trim()).toBe('1');
      expect((await node.exec(['ip', '-o', 'link', 'show', 'lo'])).stdout).toMatch(
        /state UNKNOWN|,UP/,
      );
      expect(await ctr.links()).toEqual(['lo']);

      await lab.veth(node, 'veth-n', ctr, 'eth0');
      await node.exec(['ip', 'addr', 'add', '10.99.0.1/30', 'dev', 'veth-n']);
      await ctr.exec(['ip', 'addr', 'add', '10.99.0.2/30', 'dev', 'eth0']);
      await node.exec(['ping', '-c', '1', '-W', '5', '10.99.0.2']);

      const failed = await ctr.exec(['ip', 'link', 'show', 'nope'], { reject: false });
      expect(failed.exitCode).not.toBe(0);
      await expect(ctr.exec(['ip', 'link', 'show', 'nope'])).rejects.toThrow(
        `ip netns exec ${ctr.name} ip link show nope failed (exit status 1): Device "nope" does not exist.`,
      );
    } finally {
      await lab.dispose();
    }
    for (const ns of lab.namespaces) {
      expect(existsSync(ns.path)).toBe(false);
    }
    expect((await listed()).filter((n) => n.startsWith(lab.prefix))).toEqual([]);
  });

  it('removes a file under /run/netns that is not a namespace (ip netns add killed half-way)', async () => {
    // What a soak's Ctrl-C once left: `ip -n` refuses such a file, so removing it must not
    // start by looking inside.
    const lab = createNetnsLab();
    const name = `${lab.prefix}-halfmade`;
    const path = `/run/netns/${name}`;
    try {
      await writeFile(path, '');
      lab.adopt(name);
    } finally {
      await lab.dispose();
    }
    expect(existsSync(path)).toBe(false);
  });

  it('wires a client to a node on 10.99.0.0/24 or the /24 it is given; the client reaches the node', async () => {
    await withNetnsLab(async (lab) => {
      const node = await lab.node();
      const client = await lab.client(node);
      expect(client).toEqual({
        netns: expect.objectContaining({ role: 'container' }) as unknown,
        address: '10.99.0.2',
        nodeAddress: '10.99.0.1',
      });
      expect(client.netns.name).toMatch(new RegExp(`^${lab.prefix}-[0-9a-z]+-[0-9a-z]+-2-client$`));
      expect(await client.netns.links()).toEqual(['lo', 'eth0']);
      expect(
        (await client.netns.exec(['ip', '-o', '-4', 'addr', 'show', 'eth0'])).stdout,
      ).toContain('inet 10.99.0.2/24 ');
      expect((await node.exec(['ip', '-o', '-4', 'addr', 'show', 'to-client'])).stdout).toContain(
        'inet 10.99.0.1/24 ',
      );
      expect((await client.netns.exec(['ip', '-o', 'link', 'show', 'lo'])).stdout).toMatch(
        /state UNKNOWN|,UP/,
      );
      await client.netns.exec(['ping', '-c', '1', '-W', '5', client.nodeAddress]);

      const other = await lab.node('other');
      const second = await lab.client(other, { subnet: '192.0.2.0/24' });
      expect([second.address, second.nodeAddress]).toEqual(['192.0.2.2', '192.0.2.1']);
      await second.netns.exec(['ping', '-c', '1', '-W', '5', second.nodeAddress]);

      const made = lab.namespaces.length;
      await expect(lab.client(node, { subnet: '10.99.0.0/16' })).rejects.toThrow(
        'client subnet "10.99.0.0/16" is not an IPv4 /24 written as its network address (a.b.c.0/24)',
      );
      expect(lab.namespaces).toHaveLength(made);
    });
  });

  it('removes a namespace that still has a process, a bridge and a veth inside', async () => {
    const lab = createNetnsLab();
    const node = await lab.node();
    const ctr = await lab.container();
    await node.exec(['ip', 'link', 'add', 'nomad', 'type', 'bridge']);
    await lab.veth(node, 'vethx', ctr, 'eth0');
    await node.exec(['ip', 'link', 'set', 'vethx', 'master', 'nomad']);
    // A process still inside holds the namespace alive after `ip netns del` unless it is killed.
    const sleeper = execa('ip', ['netns', 'exec', node.name, 'sleep', '600'], { reject: false });
    const pid = sleeper.pid;
    expect(pid).toBeDefined();
    // `ip netns pids` lists the sleeper once it is inside.
    let pids = '';
    for (let i = 0; i < 200 && !pids.includes(String(pid)); i++) {
      pids = (await execa('ip', ['netns', 'pids', node.name])).stdout;
    }
    expect(pids.split('\n')).toContain(String(pid));

    await lab.dispose();
    const ended = await sleeper;
    expect(ended.signal).toBe('SIGKILL');
    expect(existsSync(node.path)).toBe(false);
    expect(existsSync(ctr.path)).toBe(false);
    await lab.dispose(); // a second call does nothing
  });

  it('removes a namespace the code under test made once it is adopted, and refuses a foreign one', async () => {
    const lab = createNetnsLab();
    const node = await lab.node();
    // As the agent makes an allocation's namespace: its own name under the run's prefix.
    const name = `${lab.prefix}-adopted`;
    await execa('ip', ['netns', 'add', name]);
    await execa('ip', ['-n', name, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'x0']);
    expect(() => {
      lab.adopt('somebody-else');
    }).toThrow(`namespace somebody-else does not carry this run's prefix ${lab.prefix}`);
    lab.adopt(name);
    lab.adopt(name); // once is enough
    await lab.dispose();
    expect(existsSync(`/run/netns/${name}`)).toBe(false);
    expect(existsSync(node.path)).toBe(false);
  });

  it('cleans up when the test body throws, and two labs never share a name', async () => {
    const names: string[] = [];
    await expect(
      withNetnsLab(async (lab) => {
        await withNetnsLab(async (inner) => {
          names.push((await lab.node()).name, (await inner.node()).name);
        });
        throw new Error('the test failed');
      }),
    ).rejects.toThrow('the test failed');
    expect(new Set(names).size).toBe(2);
    const left = await listed();
    expect(names.filter((n) => left.includes(n))).toEqual([]);
  });

  it('refuses to make namespaces after dispose', async () => {
    const lab = createNetnsLab();
    await lab.dispose();
    await expect(lab.node()).rejects.toThrow('this lab is disposed');
  });
});
