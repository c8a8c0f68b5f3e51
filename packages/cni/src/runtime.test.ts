// The CNI contract, checked exactly against the recording fake plugin (a real executable): env,
// stdin, order, versions, results, errors, cache. One test (or table) per rule. It reads better
// whole than split by module (verbs, invoke, negotiation, plugin-output): every rule is checked
// through `createCniRuntime`, as callers see it, with the one harness below (temp plugin and
// cache dirs, fake plugins, `network`, `runtime`).
import { mkdir, readFile, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Attachment } from './attachment.js';
import { parseNetworkConfig } from './config.js';
import type { NetworkConfig } from './config.js';
import { isCniError } from './errors.js';
import type { CniError } from './errors.js';
import { createNodePluginExec } from './exec.js';
import type { PluginExec } from './exec.js';
import { createCniRuntime } from './runtime.js';
import type { CniRuntime } from './runtime.js';
import { installFakePlugin, tempDir } from './testing/index.js';
import type { FakeCall, FakeDebug, FakePlugin } from './testing/index.js';

const ID = '6b235529-8111-4bbe-520b-d639b1d2a94e';
const ATTACH: Attachment = { containerId: ID, netns: '/run/netns/ctr-1', ifName: 'eth0' };
const RESULT = {
  interfaces: [
    { name: 'br0', mac: '82:70:84:6d:04:ff' },
    { name: 'eth0', mac: 'fa:14:2a:af:f5:16', sandbox: '/run/netns/ctr-1' },
  ],
  ips: [{ interface: 1, address: '172.26.64.2/20', gateway: '172.26.64.1' }],
  routes: [{ dst: '0.0.0.0/0' }],
};

let dir: Awaited<ReturnType<typeof tempDir>>;
let plugins: string;
let cacheDir: string;

beforeEach(async () => {
  dir = await tempDir();
  plugins = join(dir.path, 'plugins');
  cacheDir = join(dir.path, 'cache');
  await mkdir(plugins);
});
afterEach(async () => {
  await dir.remove();
});

async function fakes(...specs: [string, FakeDebug?][]): Promise<FakePlugin[]> {
  const out: FakePlugin[] = [];
  for (const [type, debug] of specs) out.push(await installFakePlugin(plugins, type, debug));
  return out;
}

function network(
  types: (string | Record<string, unknown>)[],
  extra: Record<string, unknown> = {},
): NetworkConfig {
  return parseNetworkConfig({
    cniVersion: '1.0.0',
    name: 'testnet',
    plugins: types.map((t) => (typeof t === 'string' ? { type: t } : t)),
    ...extra,
  });
}

function runtime(
  options: { exec?: PluginExec; timeoutMs?: number; concurrentTypes?: ReadonlySet<string> } = {},
): CniRuntime {
  return createCniRuntime({
    pluginDirs: [plugins],
    cacheDir,
    env: { PATH: process.env.PATH, FOO: 'bar', CNI_PATH: '/inherited', CNI_COMMAND: 'NOPE' },
    ...options,
  });
}

/** The real exec, logging `start`, `stdin` and `end` of each plugin run for `verb`. */
function loggingExec(events: string[], verb: string): PluginExec {
  const real = createNodePluginExec();
  return {
    start(request) {
      const name = request.path.slice(request.path.lastIndexOf('/') + 1);
      const cmd = request.env.CNI_COMMAND ?? '';
      if (cmd === verb) events.push(`start ${name}`);
      const started = real.start(request);
      return {
        cancel: () => {
          started.cancel();
        },
        async run(stdin) {
          if (cmd === verb) events.push(`stdin ${name}`);
          const result = await started.run(stdin);
          if (cmd === verb) events.push(`end ${name}`);
          return result;
        },
      };
    },
  };
}

const envOf = (call: FakeCall | undefined) =>
  Object.fromEntries(
    (call?.env ?? []).map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]),
  );
const stdinOf = (call: FakeCall | undefined) =>
  JSON.parse(call?.stdin ?? 'null') as Record<string, unknown>;
const verbs = async (p: FakePlugin) =>
  (await p.calls()).map((c) => c.command).filter((c) => c !== 'VERSION');

async function caught(promise: Promise<unknown>): Promise<CniError> {
  try {
    await promise;
  } catch (error) {
    if (isCniError(error)) return error;
    throw error;
  }
  throw new Error('expected a CniError');
}

describe('invocation', () => {
  it('sets all six CNI_* variables once on every verb, over the agent environment', async () => {
    const [a] = await fakes(['a', { versions: ['1.1.0'] }]);
    const rt = runtime();
    const net = network(['a'], { cniVersion: '1.1.0' });
    await rt.add(net, { ...ATTACH, args: [['K', 'V']] });
    await rt.check(net, ATTACH);
    await rt.status(net);
    await rt.gc(net, [{ containerId: ID, ifName: 'eth0' }]);
    await rt.del(net, ATTACH);
    const calls = await (a as FakePlugin).calls();
    expect(calls.map((c) => c.command)).toEqual(['VERSION', 'ADD', 'CHECK', 'STATUS', 'GC', 'DEL']);
    for (const call of calls) {
      expect(call.env.map((e) => e.slice(0, e.indexOf('='))).sort()).toEqual([
        'CNI_ARGS',
        'CNI_COMMAND',
        'CNI_CONTAINERID',
        'CNI_IFNAME',
        'CNI_NETNS',
        'CNI_PATH',
      ]);
      expect(envOf(call).CNI_PATH).toBe(plugins);
    }
    expect(envOf(calls[1])).toEqual({
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: ID,
      CNI_NETNS: '/run/netns/ctr-1',
      CNI_IFNAME: 'eth0',
      CNI_ARGS: 'IgnoreUnknown=1;K=V',
      CNI_PATH: plugins,
    });
    expect(envOf(calls[0])).toMatchObject({
      CNI_COMMAND: 'VERSION',
      CNI_CONTAINERID: '',
      CNI_NETNS: 'dummy',
      CNI_IFNAME: 'dummy',
    });
    expect(envOf(calls[3])).toMatchObject({
      CNI_COMMAND: 'STATUS',
      CNI_CONTAINERID: '',
      CNI_NETNS: '',
      CNI_IFNAME: '',
      CNI_ARGS: '',
    });
    expect(envOf(calls[5])).toMatchObject({ CNI_COMMAND: 'DEL', CNI_ARGS: '' });
  });

  it('passes the rest of the agent environment through, each variable once, and runs the binary with no arguments', async () => {
    const [a] = await fakes(['a']);
    await runtime().add(network(['a']), ATTACH);
    const call = (await (a as FakePlugin).calls())[1];
    expect(call?.argv).toEqual([]);
    expect(call?.envNames).toEqual(expect.arrayContaining(['PATH', 'FOO']));
    expect(new Set(call?.envNames).size).toBe(call?.envNames.length);
  });

  it.each(['ADD', 'CHECK', 'DEL'] as const)(
    'validates container id and interface name on %s before running anything',
    async (verb) => {
      const [a] = await fakes(['a']);
      const rt = runtime();
      const net = network(['a']);
      const call = (attachment: Attachment) =>
        verb === 'ADD'
          ? rt.add(net, attachment)
          : verb === 'CHECK'
            ? rt.check(net, attachment)
            : rt.del(net, attachment);
      expect((await caught(call({ ...ATTACH, containerId: '../x' }))).message).toBe(
        'containerId "../x" has characters other than [a-zA-Z0-9_.-] or starts with one of "_.-"',
      );
      expect((await caught(call({ ...ATTACH, ifName: 'eth0:1' }))).message).toBe(
        'ifName "eth0:1" contains "/", ":" or whitespace',
      );
      expect((await caught(call({ ...ATTACH, ifName: 'a-very-long-name' }))).field).toBe('ifName');
      expect((await caught(call({ ...ATTACH, args: [['A', 'x;y']] }))).message).toBe(
        'args[0] value "x;y" contains ";" or "="',
      );
      expect(await (a as FakePlugin).calls()).toEqual([]);
    },
  );

  it('gives each plugin its object minus capabilities, with name, the negotiated version and only its declared capabilities', async () => {
    const [a, b, c] = await fakes(
      ['a', { versions: ['0.4.0', '1.0.0'], ADD: { result: RESULT } }],
      ['b'],
      ['c'],
    );
    const net = network(
      [
        {
          type: 'a',
          name: 'ignored',
          cniVersion: '9.9.9',
          custom: { deep: [1, 'two'] },
          runtimeConfig: { stale: true },
        },
        { type: 'b', capabilities: { portMappings: true, bandwidth: true, ips: false } },
        { type: 'c', capabilities: { mac: true }, prevResult: { stale: true } },
      ],
      { cniVersions: ['1.0.0', '1.1.0'] },
    );
    const portMappings = [{ hostPort: 25000, containerPort: 8080, protocol: 'tcp' }];
    await runtime().add(net, {
      ...ATTACH,
      capabilityArgs: { portMappings, ips: ['10.0.0.9'], other: 1 },
    });
    const [ca, cb, cc] = await Promise.all(
      [a, b, c].map(async (p) =>
        (await (p as FakePlugin).calls()).find((x) => x.command === 'ADD'),
      ),
    );
    expect(stdinOf(ca)).toEqual({
      cniVersion: '1.0.0',
      name: 'testnet',
      type: 'a',
      custom: { deep: [1, 'two'] },
    });
    expect(stdinOf(cb)).toEqual({
      cniVersion: '1.0.0',
      name: 'testnet',
      type: 'b',
      runtimeConfig: { portMappings },
      prevResult: { cniVersion: '1.0.0', ...RESULT },
    });
    expect(stdinOf(cc)).toEqual({
      cniVersion: '1.0.0',
      name: 'testnet',
      type: 'c',
      prevResult: { cniVersion: '1.0.0', ...RESULT },
    });
  });
});

describe('lookup', () => {
  it('takes the first directory holding a regular file of that name', async () => {
    const first = join(dir.path, 'first');
    await mkdir(join(first, 'a'), { recursive: true }); // a directory named like the plugin is skipped
    const [a] = await fakes(['a']);
    const rt = createCniRuntime({
      pluginDirs: [join(dir.path, 'missing'), first, plugins],
      cacheDir,
      env: { PATH: process.env.PATH },
    });
    const versions = await rt.versions(network(['a']));
    expect(versions.plugins.map((p) => p.path)).toEqual([a?.path]);
  });

  it('names every directory it searched when a plugin is missing, before anything runs', async () => {
    const [a] = await fakes(['a']);
    const rt = createCniRuntime({ pluginDirs: [plugins, '/nonexistent'], cacheDir });
    const error = await caught(rt.add(network(['a', 'nope']), ATTACH));
    expect(error).toMatchObject({ code: 'plugin-not-found', plugin: 'nope' });
    expect(error.message).toBe(`plugin "nope" not found in "${plugins}", "/nonexistent"`);
    expect(await (a as FakePlugin).calls()).toEqual([]);
  });
});

describe('versions', () => {
  it('runs at the highest offered version all plugins support, asking each binary once', async () => {
    await fakes(
      ['a', { versions: ['0.4.0', '1.0.0'] }],
      ['b', { versions: ['0.3.1', '0.4.0', '1.0.0', '1.1.0'] }],
    );
    const rt = runtime();
    const net = network(['a', 'b'], { cniVersion: '0.4.0', cniVersions: ['1.1.0', '1.0.0'] });
    const answer = await rt.versions(net);
    expect(answer.cniVersion).toBe('1.0.0');
    expect(answer.offered).toEqual(['0.4.0', '1.1.0', '1.0.0']);
    expect(answer.plugins.map((p) => [p.type, p.supportedVersions])).toEqual([
      ['a', ['0.4.0', '1.0.0']],
      ['b', ['0.3.1', '0.4.0', '1.0.0', '1.1.0']],
    ]);
    const result = await rt.add(net, ATTACH);
    expect(result.cniVersion).toBe('1.0.0');
  });

  it('caches VERSION per binary until the file changes', async () => {
    const [a] = await fakes(['a']);
    const rt = runtime();
    const net = network(['a']);
    await rt.versions(net);
    await rt.versions(net);
    expect((await (a as FakePlugin).calls()).filter((c) => c.command === 'VERSION')).toHaveLength(
      1,
    );
    const later = new Date(Date.now() + 5000);
    await utimes((a as FakePlugin).path, later, later);
    await rt.versions(net);
    expect((await (a as FakePlugin).calls()).filter((c) => c.command === 'VERSION')).toHaveLength(
      2,
    );
  });

  it('refuses a chain with no common version, saying what each plugin supports', async () => {
    await fakes(['a', { versions: ['0.4.0', '1.0.0'] }], ['b', { versions: ['0.3.1'] }]);
    const error = await caught(runtime().add(network(['a', 'b'], { cniVersion: '0.3.1' }), ATTACH));
    expect(error).toMatchObject({ code: 'no-common-version', specCode: 1 });
    expect(error.message).toBe(
      'network "testnet" offers 0.3.1, and no one of them is supported by every plugin (a supports 0.4.0, 1.0.0; b supports 0.3.1)',
    );
  });

  it('treats a plugin that does not know VERSION as 0.1.0-only', async () => {
    await fakes(['old', { VERSION: { error: { code: 4, msg: 'unknown CNI_COMMAND: VERSION' } } }]);
    const answer = await runtime().versions(network(['old']));
    expect(answer.plugins[0]?.supportedVersions).toEqual(['0.1.0']);
    expect(answer.cniVersion).toBeUndefined();
  });
});

describe('ADD', () => {
  it('runs the chain in order, passes each result on converted to the run version, and caches the last', async () => {
    const [a, b] = await fakes(
      ['a', { versions: ['0.4.0'], ADD: { result: { ...RESULT, cniVersion: '0.4.0' } } }],
      ['b', { versions: ['0.4.0'] }],
    );
    const net = network(['a', 'b'], { cniVersion: '0.4.0' });
    const out = await runtime().add(net, ATTACH);
    const bAdd = (await (b as FakePlugin).calls()).find((c) => c.command === 'ADD');
    expect(stdinOf(bAdd).prevResult).toEqual({
      cniVersion: '0.4.0',
      interfaces: RESULT.interfaces,
      ips: [{ version: '4', interface: 1, address: '172.26.64.2/20', gateway: '172.26.64.1' }],
      routes: RESULT.routes,
      dns: {},
    });
    expect(out.json).toEqual(stdinOf(bAdd).prevResult);
    expect(out.result.interfaces.map((i) => i.name)).toEqual(['br0', 'eth0']);
    expect(await verbs(a as FakePlugin)).toEqual(['ADD']);
  });

  it('stops at the first failure, then DELs the whole chain in reverse with the last result, and caches nothing', async () => {
    const [a, b, c] = await fakes(
      ['a', { ADD: { result: RESULT } }],
      ['b', { ADD: { error: { code: 11, msg: 'try again', details: 'lock held' } } }],
      ['c'],
    );
    const rt = runtime();
    const error = await caught(rt.add(network(['a', 'b', 'c']), ATTACH));
    expect(error).toMatchObject({
      code: 'try-again-later',
      specCode: 11,
      msg: 'try again',
      details: 'lock held',
      plugin: 'b',
      verb: 'ADD',
      containerId: ID,
    });
    expect(error.message).toBe(`plugin "b" failed (ADD) for "${ID}": try again: lock held`);
    expect(await verbs(a as FakePlugin)).toEqual(['ADD', 'DEL']);
    expect(await verbs(b as FakePlugin)).toEqual(['ADD', 'DEL']);
    expect(await verbs(c as FakePlugin)).toEqual(['DEL']);
    const order = [
      ...(await (a as FakePlugin).calls()),
      ...(await (b as FakePlugin).calls()),
      ...(await (c as FakePlugin).calls()),
    ]
      .filter((x) => x.command === 'DEL')
      .sort((x, y) => x.pid - y.pid);
    expect(order.map((x) => stdinOf(x).type)).toEqual(['c', 'b', 'a']);
    for (const del of order)
      expect(stdinOf(del).prevResult).toEqual({ cniVersion: '1.0.0', ...RESULT });
    expect(await rt.cache.readResult('testnet', ID, 'eth0')).toBeUndefined();
    expect(await rt.pendingAdds()).toEqual([]);
  });

  it("starts the chain's processes while the first plugin runs, and gives each its stdin only in turn", async () => {
    await fakes(['a'], ['b'], ['c']);
    const events: string[] = [];
    await runtime({ exec: loggingExec(events, 'ADD') }).add(network(['a', 'b', 'c']), ATTACH);
    expect(events).toEqual([
      'start a',
      'stdin a',
      'start b',
      'start c',
      'end a',
      'stdin b',
      'end b',
      'stdin c',
      'end c',
    ]);
  });

  it('runs consecutive plugins of the concurrent types side by side, each given the result before them', async () => {
    const [, b, c] = await fakes(
      ['a', { ADD: { result: RESULT } }],
      ['b', { ADD: { delayMs: 300 } }],
      ['c', { ADD: { delayMs: 300 } }],
      ['d'],
    );
    const events: string[] = [];
    const rt = runtime({ exec: loggingExec(events, 'ADD'), concurrentTypes: new Set(['b', 'c']) });
    const out = await rt.add(network(['a', 'b', 'c', 'd']), ATTACH);
    const stdinAt = (name: string) => events.indexOf(`stdin ${name}`);
    const endAt = (name: string) => events.indexOf(`end ${name}`);
    expect(stdinAt('c')).toBeLessThan(endAt('b'));
    expect(stdinAt('b')).toBeLessThan(endAt('c'));
    expect(stdinAt('b')).toBeGreaterThan(endAt('a'));
    expect(stdinAt('d')).toBeGreaterThan(Math.max(endAt('b'), endAt('c')));
    const prevOf = async (p: FakePlugin) =>
      stdinOf((await p.calls()).find((x) => x.command === 'ADD')).prevResult;
    expect(await prevOf(c as FakePlugin)).toEqual(await prevOf(b as FakePlugin));
    expect(await prevOf(b as FakePlugin)).toEqual({ cniVersion: '1.0.0', ...RESULT });
    expect(out.result.interfaces.map((i) => i.name)).toEqual(['br0', 'eth0']);
  });

  it('waits for the whole concurrent group before it throws the first failure, then undoes the chain', async () => {
    const [a, b, c] = await fakes(
      ['a', { ADD: { result: RESULT } }],
      ['b', { ADD: { error: { code: 11, msg: 'try again' } } }],
      ['c', { ADD: { delayMs: 300 } }],
      ['d'],
    );
    const events: string[] = [];
    const rt = runtime({ exec: loggingExec(events, 'ADD'), concurrentTypes: new Set(['b', 'c']) });
    const error = await caught(rt.add(network(['a', 'b', 'c', 'd']), ATTACH));
    expect(error).toMatchObject({ code: 'try-again-later', plugin: 'b' });
    expect(events).toContain('end c');
    expect(events).not.toContain('stdin d');
    // The undo ran DEL over the whole chain; b and c side by side there too.
    for (const p of [a, b, c] as FakePlugin[]) expect(await verbs(p)).toEqual(['ADD', 'DEL']);
    expect(await rt.pendingAdds()).toEqual([]);
  });

  it('runs the concurrent group side by side on DEL, telling each plugin done in chain order', async () => {
    await fakes(['a'], ['b', { DEL: { delayMs: 300 } }], ['c']);
    const events: string[] = [];
    const done: string[] = [];
    const rt = runtime({ exec: loggingExec(events, 'DEL'), concurrentTypes: new Set(['b', 'c']) });
    await rt.del(network(['a', 'b', 'c']), ATTACH, { onPluginDone: (type) => done.push(type) });
    expect(events.indexOf('stdin b')).toBeLessThan(events.indexOf('end c'));
    expect(events.indexOf('stdin a')).toBeGreaterThan(events.indexOf('end b'));
    expect(done).toEqual(['c', 'b', 'a']);
  });

  it("tells the caller each plugin's ADD result before the next plugin gets its stdin", async () => {
    await fakes(['a', { ADD: { result: RESULT } }], ['b']);
    const events: string[] = [];
    const told: [string, string[]][] = [];
    const rt = runtime({ exec: loggingExec(events, 'ADD') });
    await rt.add(network(['a', 'b']), ATTACH, {
      onPluginResult: (type, result) => {
        told.push([type, result.ips.map((ip) => ip.address)]);
        events.push(`told ${type}`);
      },
    });
    // b prints its prevResult back: the same address.
    expect(told).toEqual([
      ['a', ['172.26.64.2/20']],
      ['b', ['172.26.64.2/20']],
    ]);
    expect(events.indexOf('told a')).toBeLessThan(events.indexOf('stdin b'));
  });

  it('writes the ADD-in-progress marker durably before the first plugin runs', async () => {
    await fakes(['a']);
    const seen: boolean[] = [];
    const real = createNodePluginExec();
    const watching: PluginExec = {
      start(request) {
        const started = real.start(request);
        return {
          cancel: () => {
            started.cancel();
          },
          async run(stdin) {
            if (request.env.CNI_COMMAND === 'ADD') {
              seen.push(
                await stat(join(cacheDir, 'allocnet', 'adding', `testnet-${ID}-eth0`)).then(
                  () => true,
                  () => false,
                ),
              );
            }
            return started.run(stdin);
          },
        };
      },
    };
    await runtime({ exec: watching }).add(network(['a']), ATTACH);
    expect(seen).toEqual([true]);
    await expect(stat(join(cacheDir, 'allocnet', 'adding', `testnet-${ID}-eth0`))).rejects.toThrow(
      /ENOENT/,
    );
  });

  it('leaves a pending ADD when the undoing DEL fails too, which undoPendingAdd finishes later', async () => {
    const [a] = await fakes([
      'a',
      { ADD: { error: { code: 7, msg: 'bad' } }, DEL: { error: { code: 5, msg: 'disk' } } },
    ]);
    const rt = runtime();
    const error = await caught(
      rt.add(network(['a']), { ...ATTACH, args: [['K', 'V']], capabilityArgs: { mac: 'x' } }),
    );
    expect(error.message).toBe(
      `plugin "a" failed (ADD) for "${ID}": bad; and the DEL that undoes it failed too (the ADD stays pending): plugin "a" failed (DEL) for "${ID}": disk`,
    );
    const pending = await rt.pendingAdds();
    expect(pending).toEqual([
      expect.objectContaining({
        networkName: 'testnet',
        containerId: ID,
        ifName: 'eth0',
        netns: '/run/netns/ctr-1',
        cniArgs: [['K', 'V']],
        capabilityArgs: { mac: 'x' },
      }),
    ]);
    await (a as FakePlugin).answer({});
    await rt.undoPendingAdd(pending[0] as (typeof pending)[0]);
    expect(await rt.pendingAdds()).toEqual([]);
    const lastDel = (await (a as FakePlugin).calls()).filter((c) => c.command === 'DEL').pop();
    expect(envOf(lastDel).CNI_ARGS).toBe('IgnoreUnknown=1;K=V');
  });

  it('refuses a result it cannot read, and undoes the chain', async () => {
    const [a] = await fakes([
      'a',
      { ADD: { result: { ips: [{ address: '10.0.0.2/24', interface: 4 }] } } },
    ]);
    const error = await caught(runtime().add(network(['a']), ATTACH));
    expect(error).toMatchObject({ code: 'invalid-result', plugin: 'a' });
    expect(error.message).toBe(
      `plugin "a" failed (ADD) for "${ID}": result cannot be read: ips[0].interface 4 is not an index into interfaces (0 of them)`,
    );
    expect(await verbs(a as FakePlugin)).toEqual(['ADD', 'DEL']);
  });
});

describe('cache', () => {
  it('keeps libcni’s cniCacheV1 layout and modes, written after ADD and removed after DEL', async () => {
    await fakes(['a', { ADD: { result: RESULT } }]);
    const rt = runtime();
    const net = network(['a']);
    await rt.add(net, { ...ATTACH, args: [['K', 'V']], capabilityArgs: { portMappings: [] } });
    const file = join(cacheDir, 'results', `testnet-${ID}-eth0`);
    expect((await stat(join(cacheDir, 'results'))).mode & 0o777).toBe(0o700);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const doc = JSON.parse(await readFile(file, 'utf8')) as unknown;
    expect(doc).toEqual({
      kind: 'cniCacheV1',
      containerId: ID,
      config: Buffer.from(net.bytes).toString('base64'),
      ifName: 'eth0',
      networkName: 'testnet',
      netns: '/run/netns/ctr-1',
      cniArgs: [['K', 'V']],
      capabilityArgs: { portMappings: [] },
      result: { cniVersion: '1.0.0', ...RESULT },
    });
    await rt.del(net, ATTACH);
    await expect(stat(file)).rejects.toThrow(/ENOENT/);
  });
});

describe('DEL', () => {
  it('runs in reverse with the cached result as prevResult, converted, and goes on when the netns is gone', async () => {
    const [a, b] = await fakes(['a', { ADD: { result: RESULT } }], ['b']);
    const rt = runtime();
    const net = network(['a', 'b']);
    await rt.add(net, ATTACH);
    await rt.del(net, { ...ATTACH, netns: '/run/netns/gone-long-ago' });
    const dels = [...(await (a as FakePlugin).calls()), ...(await (b as FakePlugin).calls())]
      .filter((c) => c.command === 'DEL')
      .sort((x, y) => x.pid - y.pid);
    expect(dels.map((d) => stdinOf(d).type)).toEqual(['b', 'a']);
    for (const d of dels) {
      expect(stdinOf(d).prevResult).toEqual({ cniVersion: '1.0.0', ...RESULT });
      expect(envOf(d).CNI_NETNS).toBe('/run/netns/gone-long-ago');
    }
  });

  it('runs without prevResult when nothing is cached, and twice in a row', async () => {
    const [a] = await fakes(['a']);
    const rt = runtime();
    await rt.del(network(['a']), { ...ATTACH, netns: '' });
    await rt.del(network(['a']), { ...ATTACH, netns: '' });
    const dels = (await (a as FakePlugin).calls()).filter((c) => c.command === 'DEL');
    expect(dels.map((d) => 'prevResult' in stdinOf(d))).toEqual([false, false]);
  });

  it('tells the caller each plugin that exited 0, in the order they ran, and not one that failed', async () => {
    const [, b] = await fakes(['a'], ['b']);
    const rt = runtime();
    const net = network(['a', 'b']);
    const done: string[] = [];
    await rt.del(net, ATTACH, { onPluginDone: (type) => done.push(type) });
    expect(done).toEqual(['b', 'a']);
    await (b as FakePlugin).answer({ DEL: { error: { code: 5, msg: 'busy' } } });
    done.length = 0;
    await caught(rt.del(net, ATTACH, { onPluginDone: (type) => done.push(type) }));
    expect(done).toEqual([]);
  });

  it('stops at the first failure and keeps the cache so the DEL can be retried', async () => {
    const [a, b] = await fakes(['a', { ADD: { result: RESULT } }], ['b']);
    const rt = runtime();
    const net = network(['a', 'b']);
    await rt.add(net, ATTACH);
    await (b as FakePlugin).answer({ DEL: { error: { code: 5, msg: 'busy' } } });
    expect((await caught(rt.del(net, ATTACH))).message).toBe(
      `plugin "b" failed (DEL) for "${ID}": busy`,
    );
    expect(await verbs(a as FakePlugin)).toEqual(['ADD']);
    expect(await rt.cache.readResult('testnet', ID, 'eth0')).toBeDefined();
    await (b as FakePlugin).answer({});
    await rt.del(net, ATTACH);
    expect(await rt.cache.readResult('testnet', ID, 'eth0')).toBeUndefined();
  });

  it('does not let an unreadable cache entry block the DEL', async () => {
    const [a] = await fakes(['a']);
    await mkdir(join(cacheDir, 'results'), { recursive: true });
    await writeFile(join(cacheDir, 'results', `testnet-${ID}-eth0`), '');
    await runtime().del(network(['a']), ATTACH);
    expect(await verbs(a as FakePlugin)).toEqual(['DEL']);
    await expect(stat(join(cacheDir, 'results', `testnet-${ID}-eth0`))).rejects.toThrow(/ENOENT/);
  });
});

describe('CHECK', () => {
  it('runs in order with the cached result', async () => {
    const [a, b] = await fakes(['a', { ADD: { result: RESULT } }], ['b']);
    const rt = runtime();
    const net = network(['a', 'b']);
    await rt.add(net, ATTACH);
    expect(await rt.check(net, ATTACH)).toEqual({ ran: true });
    const checks = [...(await (a as FakePlugin).calls()), ...(await (b as FakePlugin).calls())]
      .filter((c) => c.command === 'CHECK')
      .sort((x, y) => x.pid - y.pid);
    expect(checks.map((c) => [stdinOf(c).type, stdinOf(c).prevResult])).toEqual([
      ['a', { cniVersion: '1.0.0', ...RESULT }],
      ['b', { cniVersion: '1.0.0', ...RESULT }],
    ]);
  });

  it('does nothing when the network disables it, refuses below 0.4.0, and needs a completed ADD', async () => {
    const [a] = await fakes(['a']);
    const rt = runtime();
    expect(await rt.check(network(['a'], { disableCheck: true }), ATTACH)).toEqual({ ran: false });
    expect((await caught(rt.check(network(['a'], { cniVersion: '0.3.1' }), ATTACH))).message).toBe(
      'network "testnet" runs at 0.3.1; CHECK needs 0.4.0 or later',
    );
    expect((await caught(rt.check(network(['a']), ATTACH))).message).toBe(
      `no cached ADD result for "${ID}" (eth0) in network "testnet"; CHECK needs a completed ADD`,
    );
    expect(await verbs(a as FakePlugin)).toEqual([]);
  });
});

describe('STATUS and GC (spec 1.1.0)', () => {
  it('STATUS runs each plugin at 1.1.0 and names code 50', async () => {
    const [a] = await fakes(['a', { STATUS: { error: { code: 50, msg: 'no IPs left' } } }]);
    const rt = runtime();
    expect(await rt.status(network(['a'], { cniVersion: '1.0.0' }))).toEqual({ ran: false });
    const error = await caught(rt.status(network(['a'], { cniVersion: '1.1.0' })));
    expect(error).toMatchObject({ code: 'not-available', specCode: 50, verb: 'STATUS' });
    expect(error.message).toBe('plugin "a" failed (STATUS): no IPs left');
    expect(stdinOf((await (a as FakePlugin).calls()).pop())).toEqual({
      cniVersion: '1.1.0',
      name: 'testnet',
      type: 'a',
    });
  });

  it('GC deletes cached attachments that are not valid, then runs GC on every plugin with the valid list', async () => {
    const [, b] = await fakes(
      ['a', { ADD: { result: RESULT }, GC: { error: { code: 5, msg: 'gc failed' } } }],
      ['b'],
    );
    const rt = runtime();
    const net = network(['a', 'b'], { cniVersion: '1.1.0' });
    await rt.add(net, { ...ATTACH, containerId: 'keep' });
    await rt.add(net, { ...ATTACH, containerId: 'stale', args: [['K', 'V']] });
    const report = await rt.gc(net, [{ containerId: 'keep', ifName: 'eth0' }]);
    expect(report.deleted).toEqual([{ containerId: 'stale', ifName: 'eth0' }]);
    expect(report.errors.map((e) => e.message)).toEqual(['plugin "a" failed (GC): gc failed']);
    const bCalls = await (b as FakePlugin).calls();
    expect(envOf(bCalls.find((c) => c.command === 'DEL'))).toMatchObject({
      CNI_CONTAINERID: 'stale',
      CNI_ARGS: 'IgnoreUnknown=1;K=V',
    });
    const gc = bCalls.find((c) => c.command === 'GC');
    expect(stdinOf(gc)).toEqual({
      cniVersion: '1.1.0',
      name: 'testnet',
      type: 'b',
      'cni.dev/valid-attachments': [{ containerID: 'keep', ifname: 'eth0' }],
      'cni.dev/attachments': [{ containerID: 'keep', ifname: 'eth0' }],
    });
    expect(await rt.gc(network(['a'], { disableGC: true }), [])).toEqual({
      deleted: [],
      errors: [],
      ran: false,
    });
  });
});

describe('errors', () => {
  it.each([
    [
      { error: { code: 7, msg: 'bad config', details: 'x' } },
      'invalid-network-config',
      7,
      'bad config: x',
    ],
    [
      { error: { code: 3, msg: 'gone' }, errorStream: 'stderr' as const },
      'unknown-container',
      3,
      'gone',
    ],
    [{ error: { code: 142, msg: 'plugin specific' } }, 'plugin-error', 142, 'plugin specific'],
    [
      { stderr: 'panic: oops\n  at main()\n', exitCode: 2 },
      'plugin-error',
      undefined,
      'panic: oops at main() (exit status 2)',
    ],
    [{ stdout: 'not json', exitCode: 1 }, 'plugin-error', undefined, 'not json (exit status 1)'],
    [{ stdout: '', exitCode: 1 }, 'plugin-error', undefined, 'no error message (exit status 1)'],
  ])('reads %j', async (answer, code, specCode, text) => {
    await fakes(['a', { ADD: answer }]);
    const error = await caught(runtime().add(network(['a']), ATTACH));
    expect(error.code).toBe(code);
    expect(error.specCode).toBe(specCode);
    expect(error.message).toBe(`plugin "a" failed (ADD) for "${ID}": ${text}`);
  });
});

describe('time', () => {
  it('kills a plugin at the timeout and still undoes the chain', async () => {
    const [a] = await fakes(['a', { ADD: { delayMs: 30_000 } }]);
    const error = await caught(runtime({ timeoutMs: 1500 }).add(network(['a']), ATTACH));
    expect(error).toMatchObject({
      code: 'timeout',
      message: `plugin "a" failed (ADD) for "${ID}": timed out after 1500 ms`,
    });
    expect(await verbs(a as FakePlugin)).toEqual(['ADD', 'DEL']);
  });

  it('honours an AbortSignal, and the undoing DEL still runs', async () => {
    const [a] = await fakes(['a', { ADD: { delayMs: 30_000 } }]);
    const controller = new AbortController();
    const real = createNodePluginExec();
    const aborting: PluginExec = {
      start(request) {
        const started = real.start(request);
        return {
          cancel: () => {
            started.cancel();
          },
          run(stdin) {
            const running = started.run(stdin);
            if (request.env.CNI_COMMAND === 'ADD') controller.abort();
            return running;
          },
        };
      },
    };
    const error = await caught(
      runtime({ exec: aborting }).add(network(['a']), ATTACH, { signal: controller.signal }),
    );
    expect(error.code).toBe('aborted');
    expect(await verbs(a as FakePlugin)).toEqual(['DEL']);
  });
});
