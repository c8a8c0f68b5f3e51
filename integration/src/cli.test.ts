// `allocnet cni` (the operators' cnitool) against the real plugins, its plugins run inside a
// throwaway node namespace through --host-netns. Needs root; never touches the root namespace.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { nomadBridgeConflist, tempDir } from '@allocnet/cni/testing';
import { createNetnsLab, requireNetworkTestHost } from '@allocnet/testns';
import type { NetnsLab } from '@allocnet/testns';
import { CLI_MAIN as CLI } from './fixtures/agent-host.js';

let lab: NetnsLab;
let tmp: Awaited<ReturnType<typeof tempDir>>;

beforeAll(async () => {
  await requireNetworkTestHost(['ip', 'iptables', '/usr/lib/cni/bridge']);
});
beforeEach(async () => {
  lab = createNetnsLab();
  tmp = await tempDir();
});
afterEach(async () => {
  try {
    await lab.dispose();
  } finally {
    await tmp.remove();
  }
});

it('lists, adds, reports versions of and deletes a network by hand, as an operator would', async () => {
  const node = await lab.node();
  const ctr = await lab.container();
  const conf = join(tmp.path, 'net.d');
  await mkdir(conf);
  await writeFile(
    join(conf, '10-nomad.conflist'),
    JSON.stringify(nomadBridgeConflist({ ipamDir: join(tmp.path, 'ipam'), withoutFirewall: true })),
  );
  const where = [
    '--conf-dir',
    conf,
    '--cache-dir',
    join(tmp.path, 'cache'),
    '--plugin-dir',
    '/usr/lib/cni',
    '--host-netns',
    node.name,
  ];
  const cli = (...args: string[]) =>
    execa(process.execPath, [CLI, 'cni', ...args], { reject: false });

  const list = await cli('list', '--conf-dir', conf);
  expect(list.stdout).toBe(
    `NETWORK  VERSIONS  PLUGINS                  FILE\nnomad    1.0.0     loopback,bridge,portmap  ${join(conf, '10-nomad.conflist')}`,
  );

  const add = await cli(
    'add',
    'nomad',
    ctr.path,
    ...where,
    '--id',
    'op-debug-1',
    '--cap-args',
    '{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]}',
  );
  expect(add.stderr).toBe('');
  expect(add.exitCode).toBe(0);
  const result = JSON.parse(add.stdout) as { ips: { address: string }[] };
  expect(result.ips).toEqual([{ address: '172.26.64.2/20', gateway: '172.26.64.1', interface: 2 }]);
  expect((await ctr.exec(['ip', '-4', '-o', 'addr', 'show', 'eth0'])).stdout).toContain(
    '172.26.64.2/20',
  );
  expect((await node.exec(['iptables-save', '-t', 'nat'])).stdout).toMatch(
    /--dport 8080 -j DNAT --to-destination 172\.26\.64\.2:80/,
  );

  const version = await cli('version', 'nomad', ...where);
  expect(JSON.parse(version.stdout)).toMatchObject({
    cniVersion: '1.0.0',
    plugins: [{ type: 'loopback' }, { type: 'bridge' }, { type: 'portmap' }],
  });

  const del = await cli(
    'del',
    'nomad',
    ctr.path,
    ...where,
    '--id',
    'op-debug-1',
    '--cap-args',
    '{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]}',
  );
  expect(del).toMatchObject({ exitCode: 0, stdout: '', stderr: '' });
  expect((await node.exec(['iptables-save'])).stdout).not.toContain('op-debug-1');
  expect(await ctr.links()).toEqual(['lo']);

  const missing = await cli('add', 'nomad', '/run/netns/does-not-exist', ...where);
  expect(missing.exitCode).toBe(1);
  expect(missing.stderr).toMatch(
    /^allocnet: plugin "loopback" failed \(ADD\) for "cni-[0-9a-f]{16}": /,
  );
});
