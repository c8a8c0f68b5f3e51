import { readFileSync } from 'node:fs';
import { open, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as wait } from 'node:timers/promises';
import { isCniError } from './errors.js';
import { createNodePluginExec, execPlugin } from './exec.js';
import type { StartedPlugin } from './exec.js';
import { installFakePlugin, tempDir } from './testing/index.js';

let dir: Awaited<ReturnType<typeof tempDir>>;
beforeEach(async () => {
  dir = await tempDir();
});
afterEach(async () => {
  await dir.remove();
});

const env = { PATH: process.env.PATH ?? '', CNI_COMMAND: 'VERSION' };

describe('createNodePluginExec', () => {
  it('spawns a fresh process after "text file busy" once the binary is closed', async () => {
    const plugin = await installFakePlugin(dir.path, 'busy');
    // Holding the binary open for writing makes execve fail with ETXTBSY, as during an upgrade.
    const writer = await open(plugin.path, 'r+');
    const waits: number[] = [];
    const exec = createNodePluginExec({
      textBusyDelayMs: 7,
      sleep: async (ms: number) => {
        waits.push(ms);
        await writer.close();
      },
    });
    const result = await execPlugin(exec, {
      path: plugin.path,
      stdin: '{"cniVersion":"1.0.0"}',
      env,
      timeoutMs: 10_000,
    });
    expect(waits).toEqual([7]);
    expect(result).toMatchObject({ kind: 'exited', exitCode: 0 });
    expect((await plugin.calls()).map((c) => c.command)).toEqual(['VERSION']);
  });

  it('gives up after the configured number of fresh spawns', async () => {
    const plugin = await installFakePlugin(dir.path, 'busy');
    const writer = await open(plugin.path, 'r+');
    try {
      let waits = 0;
      const exec = createNodePluginExec({
        textBusyRetries: 2,
        sleep: () => {
          waits++;
          return Promise.resolve();
        },
      });
      const result = await execPlugin(exec, {
        path: plugin.path,
        stdin: '{}',
        env,
        timeoutMs: 10_000,
      });
      expect(waits).toBe(2);
      expect(result).toMatchObject({ kind: 'failed', reason: 'spawn' });
      expect(result.kind === 'failed' ? result.message : '').toMatch(/ETXTBSY/);
    } finally {
      await writer.close();
    }
  });

  it('does not run the fresh spawn when cancelled during the wait after "text file busy"', async () => {
    const plugin = await installFakePlugin(dir.path, 'busy');
    const writer = await open(plugin.path, 'r+');
    // The plugin under test, cancelled from inside the wait that follows its first spawn.
    const waiting: { plugin?: StartedPlugin } = {};
    const exec = createNodePluginExec({
      sleep: async () => {
        await writer.close();
        waiting.plugin?.cancel();
      },
    });
    const started = exec.start({ path: plugin.path, env, timeoutMs: 10_000 });
    waiting.plugin = started;
    expect(await started.run('{"cniVersion":"1.0.0"}')).toEqual({
      kind: 'failed',
      reason: 'aborted',
      message: 'cancelled',
      stdout: '',
      stderr: '',
    });
    expect(await plugin.calls()).toEqual([]);
  });

  it('reports a missing binary as a spawn failure', async () => {
    const exec = createNodePluginExec();
    const result = await execPlugin(exec, {
      path: join(dir.path, 'none'),
      stdin: '{}',
      env,
      timeoutMs: 1000,
    });
    expect(result).toMatchObject({ kind: 'failed', reason: 'spawn' });
  });

  it('refuses a netns path that is not under /run/netns as an invalid netns', () => {
    expect(() => createNodePluginExec({ netns: '/proc/1/ns/net' })).toThrow(
      'netns "/proc/1/ns/net" is not a name under /run/netns',
    );
  });

  // A bad name used to be a bare RangeError, which the CLI printed as a bug.
  it('refuses a netns that is not a namespace name with an invalid-argument CniError', () => {
    let thrown: unknown;
    try {
      createNodePluginExec({ netns: 'a b' });
    } catch (error) {
      thrown = error;
    }
    expect(isCniError(thrown)).toBe(true);
    expect(thrown).toMatchObject({
      code: 'invalid-argument',
      kind: 'invalid',
      path: ['netns'],
      message:
        'netns "a b" is not 1 to 255 of [A-Za-z0-9_.-] starting with a letter, a digit or "_"',
    });
  });
});

describe('a plugin that leaves a process holding its stdout', () => {
  /** A shell-script plugin: `body` runs after it answered VERSION on stdout. */
  async function scriptPlugin(name: string, body: string): Promise<string> {
    const path = join(dir.path, name);
    await writeFile(
      path,
      `#!/bin/sh\necho '{"cniVersion":"1.0.0","supportedVersions":["1.0.0"]}'\n${body}\n`,
      { mode: 0o755 },
    );
    return path;
  }

  it('ends the exec once the plugin exited, after a short grace', async () => {
    const path = await scriptPlugin('daemonizes', 'sleep 30 &\necho $! >&2\nexit 0');
    const began = Date.now();
    const result = await execPlugin(createNodePluginExec(), {
      path,
      stdin: '{}',
      env,
      timeoutMs: 10_000,
    });
    expect(result).toMatchObject({ kind: 'exited', exitCode: 0 });
    expect(Date.now() - began).toBeLessThan(3000);
    process.kill(Number(result.stderr.trim()), 'SIGKILL');
  });

  it('at the timeout, kills the plugin and what it started', async () => {
    const path = await scriptPlugin('hangs', 'sleep 30 &\necho $! >&2\nwait');
    const result = await execPlugin(createNodePluginExec(), {
      path,
      stdin: '{}',
      env,
      timeoutMs: 300,
    });
    expect(result).toMatchObject({ kind: 'failed', reason: 'timeout' });
    const sleeper = Number(result.stderr.trim());
    let state = '';
    for (let i = 0; i < 100; i++) {
      try {
        state = readFileSync(`/proc/${sleeper}/stat`, 'utf8').split(') ')[1]?.[0] ?? '';
      } catch {
        state = 'gone';
      }
      if (state === 'gone' || state === 'Z') break;
      await wait(20);
    }
    expect(['gone', 'Z']).toContain(state);
  });
});
