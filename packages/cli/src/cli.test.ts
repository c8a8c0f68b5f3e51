import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { installFakePlugin, tempDir } from '@allocnet/cni/testing';
import type { FakePlugin } from '@allocnet/cni/testing';
import { AGENT_COMMAND_DESCRIPTION, agentCommand } from '@allocnet/agent';
import { runsAgent } from './cli.js';
import { createProgram, defaultContainerId, runCli } from './index.js';

let dir: Awaited<ReturnType<typeof tempDir>>;
let conf: string;
let plugins: string;
let cache: string;
let fake: FakePlugin;

beforeEach(async () => {
  dir = await tempDir();
  conf = join(dir.path, 'net.d');
  plugins = join(dir.path, 'bin');
  cache = join(dir.path, 'cache');
  await mkdir(conf);
  await mkdir(plugins);
  fake = await installFakePlugin(plugins, 'fake', {
    ADD: { result: { ips: [{ address: '10.1.0.2/24' }] } },
  });
  await writeFile(
    join(conf, '10-testnet.conflist'),
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'testnet',
      plugins: [{ type: 'fake', capabilities: { portMappings: true } }],
    }),
  );
  await writeFile(
    join(conf, '20-broken.conf'),
    JSON.stringify({ cniVersion: '1.0.0', name: 'broken' }),
  );
});
afterEach(async () => {
  await dir.remove();
});

async function cli(...argv: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
    env: { CNI_PATH: '/from-env' },
  });
  return { code, stdout, stderr };
}

const where = () => ['--conf-dir', conf, '--plugin-dir', plugins, '--cache-dir', cache];

describe('allocnet cni', () => {
  it('add prints the result JSON and passes capability and CNI args; del removes the cache entry', async () => {
    const add = await cli(
      'cni',
      'add',
      'testnet',
      '/run/netns/c1',
      ...where(),
      '--cap-args',
      '{"portMappings":[{"hostPort":80,"containerPort":8080,"protocol":"tcp"}]}',
      '--args',
      'A=1;B=2',
    );
    expect(add).toEqual({
      code: 0,
      stderr: '',
      stdout: `${JSON.stringify({ cniVersion: '1.0.0', ips: [{ address: '10.1.0.2/24' }] }, null, 2)}\n`,
    });
    const call = (await fake.calls()).find((c) => c.command === 'ADD');
    expect(call?.env).toEqual(
      expect.arrayContaining([
        `CNI_CONTAINERID=${defaultContainerId('/run/netns/c1')}`,
        'CNI_ARGS=IgnoreUnknown=1;A=1;B=2',
        `CNI_PATH=${plugins}`,
      ]),
    );
    expect(JSON.parse(call?.stdin ?? '{}')).toMatchObject({
      runtimeConfig: { portMappings: [{ hostPort: 80, containerPort: 8080, protocol: 'tcp' }] },
    });
    const file = join(cache, 'results', `testnet-${defaultContainerId('/run/netns/c1')}-eth0`);
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({ kind: 'cniCacheV1' });

    expect(await cli('cni', 'check', 'testnet', '/run/netns/c1', ...where())).toEqual({
      code: 0,
      stdout: '',
      stderr: '',
    });
    expect(await cli('cni', 'del', 'testnet', '/run/netns/c1', ...where())).toEqual({
      code: 0,
      stdout: '',
      stderr: '',
    });
    await expect(readFile(file)).rejects.toThrow(/ENOENT/);
    // Each command is a new process with a new runtime, so each asks VERSION again.
    expect((await fake.calls()).map((c) => c.command)).toEqual([
      'VERSION',
      'ADD',
      'VERSION',
      'CHECK',
      'VERSION',
      'DEL',
    ]);
  });

  it('takes --id and --ifname', async () => {
    expect(
      (
        await cli(
          'cni',
          'add',
          'testnet',
          '/run/netns/c1',
          ...where(),
          '--id',
          'abc',
          '--ifname',
          'net1',
        )
      ).code,
    ).toBe(0);
    const call = (await fake.calls()).find((c) => c.command === 'ADD');
    expect(call?.env).toEqual(expect.arrayContaining(['CNI_CONTAINERID=abc', 'CNI_IFNAME=net1']));
  });

  it('version prints what each plugin supports and the version the network runs at', async () => {
    const out = await cli('cni', 'version', 'testnet', ...where());
    expect(out.code).toBe(0);
    expect(JSON.parse(out.stdout)).toEqual({
      cniVersion: '1.0.0',
      offered: ['1.0.0'],
      plugins: [
        {
          type: 'fake',
          path: join(plugins, 'fake'),
          supportedVersions: ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'],
        },
      ],
    });
  });

  it('list shows every network and every invalid file with its reason', async () => {
    const out = await cli('cni', 'list', '--conf-dir', conf);
    expect(out).toEqual({
      code: 0,
      stderr: '',
      stdout: [
        'NETWORK  VERSIONS  PLUGINS  FILE',
        `testnet  1.0.0     fake     ${join(conf, '10-testnet.conflist')}`,
        `invalid: "${join(conf, '20-broken.conf')}": type is missing`,
        '',
      ].join('\n'),
    });
    const json = await cli('cni', 'list', '--conf-dir', conf, '--json');
    expect(JSON.parse(json.stdout)).toEqual({
      networks: [
        {
          name: 'testnet',
          file: join(conf, '10-testnet.conflist'),
          cniVersion: '1.0.0',
          cniVersions: [],
          plugins: ['fake'],
        },
      ],
      invalid: [
        {
          file: join(conf, '20-broken.conf'),
          error: `"${join(conf, '20-broken.conf')}": type is missing`,
        },
      ],
    });
  });

  it.each([
    [
      ['--cap-args', '[1]'],
      'allocnet: --cap-args should be a JSON object of capability names to values, got [1]\n',
    ],
    [['--cap-args', '{'], expect.stringMatching(/^allocnet: --cap-args is not JSON: /)],
    [['--args', 'A=1;B'], 'allocnet: --args[1] "B" is not K=V\n'],
    [['--ifname', 'a b'], 'allocnet: ifName "a b" contains "/", ":" or whitespace\n'],
  ] as [string[], unknown][])(
    'refuses %j, naming the flag, and runs nothing',
    async (flags, message) => {
      const out = await cli('cni', 'add', 'testnet', '/run/netns/c1', ...where(), ...flags);
      expect(out).toEqual({ code: 1, stdout: '', stderr: message });
      expect(await fake.calls()).toEqual([]);
    },
  );

  it.each([
    ['a b', 'is not 1 to 255 of [A-Za-z0-9_.-] starting with a letter, a digit or "_"'],
    ['-n', 'is not 1 to 255 of [A-Za-z0-9_.-] starting with a letter, a digit or "_"'],
    ['/tmp/node', 'is not a namespace under /run/netns (ip netns exec needs its name)'],
  ])(
    'refuses --host-netns %j as a usage error (exit 2) and runs nothing',
    async (netns, problem) => {
      const message = `allocnet: --host-netns ${JSON.stringify(netns)} ${problem}\n`;
      const cniAdd = await cli(
        'cni',
        'add',
        'testnet',
        '/run/netns/c1',
        ...where(),
        '--host-netns',
        netns,
      );
      expect(cniAdd).toEqual({ code: 2, stdout: '', stderr: message });
      const leaks = await cli(
        'leaks',
        '--local',
        '--conf-dir',
        conf,
        '--cache-dir',
        cache,
        '--ipam-dir',
        join(dir.path, 'ipam'),
        '--host-netns',
        netns,
      );
      expect(leaks).toEqual({ code: 2, stdout: '', stderr: message });
      expect(await fake.calls()).toEqual([]);
    },
  );

  it('refuses a --known-file it cannot read as a usage error (exit 2)', async () => {
    const missing = join(dir.path, 'alive');
    const out = await cli(
      'leaks',
      '--local',
      '--conf-dir',
      conf,
      '--cache-dir',
      cache,
      '--ipam-dir',
      join(dir.path, 'ipam'),
      '--host-netns',
      'allocnet-no-such-node',
      '--known-file',
      missing,
    );
    expect(out).toEqual({
      code: 2,
      stdout: '',
      stderr: `allocnet: --known-file ${JSON.stringify(missing)} cannot be read: ENOENT: no such file or directory, open '${missing}'\n`,
    });
  });

  it('says which network is missing, and exits 2 on a usage error', async () => {
    expect(await cli('cni', 'add', 'nope', '/run/netns/c1', ...where())).toEqual({
      code: 1,
      stdout: '',
      stderr: `allocnet: no network "nope" in "${conf}"; 1 file(s) could not be read: "${join(conf, '20-broken.conf')}": type is missing\n`,
    });
    const usage = await cli('cni', 'add', 'testnet');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/missing required argument 'netns'/);
  });

  it('reads the plugin directories from CNI_PATH when --plugin-dir is not given', async () => {
    const out = await cli('cni', 'version', 'testnet', '--conf-dir', conf, '--cache-dir', cache);
    expect(out).toEqual({
      code: 1,
      stdout: '',
      stderr: 'allocnet: plugin "fake" not found in "/from-env"\n',
    });
  });
});

describe('allocnet agent, loaded when the command line runs it', () => {
  const quiet = { stdout: { write: () => true }, stderr: { write: () => true }, env: {} };

  it('lists a stand-in in allocnet --help exactly as the agent’s own command', () => {
    const standIn = createProgram(quiet).helpInformation();
    const real = createProgram(quiet, agentCommand(quiet)).helpInformation();
    expect(standIn).toBe(real);
    expect(standIn).toContain(
      `  agent [options]               ${AGENT_COMMAND_DESCRIPTION.slice(0, 40)}`,
    );
  });

  it('loads the agent for `agent …` and `help agent` only', () => {
    expect(
      [
        ['agent'],
        ['agent', '--print-config'],
        ['--help', 'agent'],
        ['help', 'agent'],
        ['help'],
        ['alloc', 'list'],
        ['alloc', 'status', 'agent'],
        ['cni', 'list'],
        [],
      ].map(runsAgent),
    ).toEqual([true, true, true, true, false, false, false, false, false]);
  });

  it('runs the agent command (--print-config) and reports its errors as the agent’s', async () => {
    const printed = await cli('agent', '--print-config', '--data-dir', join(dir.path, 'data'));
    expect(printed.code).toBe(0);
    expect(JSON.parse(printed.stdout)).toMatchObject({ dataDir: join(dir.path, 'data') });
    const bad = await cli('agent', '--print-config', '--max-ports', 'many');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^allocnet agent: /);
  });
});
