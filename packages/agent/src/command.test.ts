import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tempDir } from '@allocnet/cni/testing';
import { agentCommand, runAgentCli } from './command.js';
import { normalizeAgentArgs } from './command-line.js';
import type { DevSandboxRequest, DevSandbox } from './command.js';

function io(env: Record<string, string> = {}) {
  const out = { stdout: '', stderr: '' };
  return {
    out,
    io: {
      stdout: { write: (s: string) => (out.stdout += s) },
      stderr: { write: (s: string) => (out.stderr += s), isTTY: false },
      env,
    },
  };
}

let tmp: Awaited<ReturnType<typeof tempDir>>;

beforeEach(async () => {
  tmp = await tempDir('allocnet-agent-command-');
});

afterEach(async () => {
  await tmp.remove();
});

describe('allocnet agent', () => {
  it('prints the effective configuration: flags over environment over the file', async () => {
    const file = join(tmp.path, 'agent.yaml');
    await writeFile(file, 'dataDir: /file\nsocket: /file.sock\nconcurrency: 4\n');
    const { io: world, out } = io({ ALLOCNET_CONFIG: file, ALLOCNET_SOCKET: '/env.sock' });
    const status = await runAgentCli(
      ['--print-config', '--data-dir', '/flag', '--plugin-dir', '/p1', '--plugin-dir', '/p2'],
      world,
    );
    expect([status, out.stderr]).toEqual([0, '']);
    const printed = JSON.parse(out.stdout) as Record<string, unknown>;
    expect(printed).toMatchObject({
      dataDir: '/flag',
      socket: '/env.sock',
      concurrency: 4,
      cni: { pluginDirs: ['/p1', '/p2'], cacheDir: '/flag/cni' },
    });
  });

  it('takes the caps on one allocation from --max-ports, --max-cni-args and --max-attachments', async () => {
    const { io: world, out } = io({ ALLOCNET_MAX_PORTS: '64' });
    expect(
      await runAgentCli(
        ['--print-config', '--max-ports', '4', '--max-cni-args', '2', '--max-attachments', '3'],
        world,
      ),
    ).toBe(0);
    expect((JSON.parse(out.stdout) as { limits: unknown }).limits).toEqual({
      maxPorts: 4,
      maxCniArgs: 2,
      maxAttachments: 3,
    });
    const bad = io();
    expect(await runAgentCli(['--print-config', '--max-ports', 'lots'], bad.io)).toBe(1);
    expect(bad.out.stderr).toBe(
      'allocnet agent: config: limits.maxPorts should be a whole number from 0 to 1024, got "lots" (flag --max-ports)\n',
    );
  });

  it('prefers --config over ALLOCNET_CONFIG', async () => {
    const a = join(tmp.path, 'a.json');
    await writeFile(a, JSON.stringify({ region: 'from-flag' }));
    const { io: world, out } = io({ ALLOCNET_CONFIG: join(tmp.path, 'missing.yaml') });
    expect(await runAgentCli(['--config', a, '--print-config'], world)).toBe(0);
    expect((JSON.parse(out.stdout) as { region: string }).region).toBe('from-flag');
  });

  it('exits 1 with the message for a configuration it refuses', async () => {
    const { io: world, out } = io({ ALLOCNET_CONCURRENCY: 'lots' });
    expect(await runAgentCli(['--print-config'], world)).toBe(1);
    expect(out.stderr).toBe(
      'allocnet agent: config: concurrency should be a whole number from 1 to 1024, got "lots" (env ALLOCNET_CONCURRENCY)\n',
    );
  });

  it('exits 2 for a usage error and 0 for --help', async () => {
    const bad = io();
    expect(await runAgentCli(['--no-such-flag'], bad.io)).toBe(2);
    expect(bad.out.stderr).toContain("error: unknown option '--no-such-flag'");
    const help = io();
    expect(await runAgentCli(['--help'], help.io)).toBe(0);
    for (const flag of [
      '--config',
      '--data-dir',
      '--socket',
      '--conf-dir',
      '--plugin-dir',
      '--max-ports',
      '--max-cni-args',
      '--max-attachments',
      '--dev',
    ])
      expect(help.out.stdout).toContain(flag);
  });

  it('is a command named agent for the CLI to mount', () => {
    expect(agentCommand(io().io).name()).toBe('agent');
  });

  it('reads -dev as --dev', () => {
    expect(normalizeAgentArgs(['-dev', '--socket', '/s', 'x-dev'])).toEqual([
      '--dev',
      '--socket',
      '/s',
      'x-dev',
    ]);
  });
});

describe('allocnet agent --dev', () => {
  class SandboxError extends Error {}

  /** A dev sandbox that records what it is handed and answers `status`, or fails. */
  function sandbox(outcome: number | Error) {
    const requests: DevSandboxRequest[] = [];
    const dev: DevSandbox = {
      run: (request) => {
        requests.push(request);
        return outcome instanceof Error ? Promise.reject(outcome) : Promise.resolve(outcome);
      },
      isFailure: (error): error is Error => error instanceof SandboxError,
    };
    return { dev, requests };
  }

  it('hands the flags, the config file and its bin to the sandbox, and exits with its status', async () => {
    const { dev, requests } = sandbox(3);
    const { io: world, out } = io({ ALLOCNET_CONFIG: '/etc/allocnet/agent.yaml' });
    expect(
      await runAgentCli(['-dev', '--plugin-dir', '/p1', '--metrics-address', 'off'], world, {
        dev,
      }),
    ).toBe(3);
    expect(out.stderr).toBe('');
    expect(requests).toEqual([
      {
        io: world,
        flags: { 'plugin-dir': ['/p1'], 'metrics-address': 'off' },
        configFile: '/etc/allocnet/agent.yaml',
        entry: expect.stringMatching(/\/main\.js$/) as unknown,
      },
    ]);
  });

  it("reports the sandbox's failure as its own, and propagates anything else", async () => {
    const failing = sandbox(new SandboxError('allocnet agent --dev needs root: try sudo'));
    const { io: world, out } = io();
    expect(await runAgentCli(['--dev'], world, { dev: failing.dev })).toBe(1);
    expect(out.stderr).toBe('allocnet agent: allocnet agent --dev needs root: try sudo\n');
    const buggy = sandbox(new TypeError('x is undefined'));
    await expect(runAgentCli(['--dev'], io().io, { dev: buggy.dev })).rejects.toThrow(
      'x is undefined',
    );
  });

  it('says so when it is given no sandbox', async () => {
    const { io: world, out } = io();
    expect(await runAgentCli(['--dev'], world)).toBe(1);
    expect(out.stderr).toBe(
      'allocnet agent: --dev is not available: the program that runs this command has no dev sandbox (@allocnet/dev-sandbox)\n',
    );
  });
});
