// Secondary networks through the configurator's facade (issue 29), against a fake CNI runtime,
// recording iptables execs and a recording sandbox: the spec's `ips`, `mac` and `defaultRoute`
// as the plugins get them, `checkSpec` against the catalog, and a teardown scoped with `only`
// that leaves every other network of the allocation alone.
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createBatch, createIptables, formatRestoreInput } from '@allocnet/iptables-node';
import { createRecordingExec, ok } from '@allocnet/iptables-node/testing';
import type { RecordingExec, Reply } from '@allocnet/iptables-node/testing';
import { createCniConfigurator } from './configurator.js';
import { allocChains } from './marks.js';
import { addPluginShapes, addResult, createFakeRuntime, recordingNode } from './testing/index.js';
import type { FakeRuntime } from './testing/index.js';
import type { AllocNetworkSpec, CniConfigurator, CniConfiguratorOptions } from './types.js';

const ID = '6b235529-8111-4bbe-520b-d639b1d2a94e';
const base: AllocNetworkSpec = { allocId: ID, namespace: 'default', jobId: 'web', groupName: 'g' };

let dir: string;
let runtime: FakeRuntime;
let v4: RecordingExec;
let v6: RecordingExec;
let routes: { path: string; link: string }[];
let routeFailure: Error | undefined;
let configurator: CniConfigurator;

/** The conf dir's networks: a macvlan with tuning, a second bridge, a macvlan on static IPAM. */
async function writeNetworks(): Promise<void> {
  const confDir = join(dir, 'conf');
  await mkdir(confDir, { recursive: true });
  const ipam = (subnet: string) => ({
    type: 'host-local',
    dataDir: join(dir, 'ipam'),
    ranges: [[{ subnet }]],
    routes: [{ dst: '0.0.0.0/0' }],
  });
  const list = (name: string, plugins: unknown[]) =>
    writeFile(
      join(confDir, `${name}.conflist`),
      JSON.stringify({ cniVersion: '1.0.0', name, plugins }),
    );
  await list('vlan', [
    { type: 'macvlan', master: 'a29v0', capabilities: { ips: true }, ipam: ipam('10.88.0.0/24') },
    { type: 'tuning', capabilities: { mac: true } },
  ]);
  await list('storage', [
    {
      type: 'bridge',
      bridge: 'storage0',
      isGateway: true,
      ipMasq: true,
      ipam: ipam('10.77.0.0/24'),
    },
  ]);
  await list('fixed', [
    {
      type: 'macvlan',
      master: 'a29v0',
      ipam: { type: 'static', addresses: [{ address: '10.99.0.2/24' }] },
    },
  ]);
}

async function make(extra: Partial<CniConfiguratorOptions> = {}) {
  configurator = await createCniConfigurator({
    node: recordingNode().node,
    runtime,
    iptables: {
      ipv4: createIptables({ exec: v4, nft: false }),
      ipv6: createIptables({ family: 'ipv6', exec: v6, nft: false }),
    },
    defaultNetwork: { ipamDataDir: join(dir, 'ipam') },
    confDir: join(dir, 'conf'),
    watchConfDir: false,
    sandbox: {
      deleteDefaultRoutes(path, link) {
        routes.push({ path, link });
        return routeFailure === undefined ? Promise.resolve() : Promise.reject(routeFailure);
      },
    },
    random: () => 0,
    sleep: () => Promise.resolve(),
    ...extra,
  });
  return configurator;
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'allocnet-attachments-'));
  runtime = createFakeRuntime(join(dir, 'cache'));
  v4 = createRecordingExec();
  v6 = createRecordingExec();
  routes = [];
  routeFailure = undefined;
  await writeNetworks();
});

afterEach(async () => {
  await configurator.close();
  await rm(dir, { recursive: true, force: true });
});

/** A macvlan result: net1 in the sandbox, with a default route. */
function vlanResult(address = '10.88.0.9/24') {
  const result = {
    cniVersion: '1.0.0',
    interfaces: [{ name: 'net1', mac: '02:a2:9c:00:00:01', sandbox: '/run/netns/a1' }],
    ips: [{ address, gateway: '10.88.0.1', interface: 0 }],
    routes: [{ dst: '0.0.0.0/0', gw: '10.88.0.1' }, { dst: '10.100.0.0/16' }, { dst: '::/0' }],
    dns: {},
  };
  return { cniVersion: '1.0.0', result, json: result };
}

describe('checkSpec', () => {
  it('accepts what the network can take, synchronously', async () => {
    await make();
    const good = [
      { ...base, network: 'vlan', ips: ['10.88.0.9/24'], mac: '02:00:00:00:00:09' },
      { ...base, ips: ['172.26.64.9'] },
    ];
    for (const spec of good) {
      // Returns at once, no promise: the runner checks every attachment before it records any.
      expect(() => {
        configurator.checkSpec(spec);
      }).not.toThrow();
    }
  });

  it.each([
    [
      { network: 'nope' },
      'network-not-found',
      'network "nope" is not known (networks: "nomad", "fixed", "storage", "vlan")',
      'network',
    ],
    [
      { network: 'fixed', ips: ['10.99.0.3'] },
      'invalid-argument',
      'ips cannot be asked for in network "fixed": no plugin of it declares the "ips" capability and it does not use host-local',
      'ips',
    ],
    [
      { network: 'vlan', ips: ['10.88.0.9', '10.89.0.9'] },
      'invalid-argument',
      'ips[1] "10.89.0.9" is outside every range of network "vlan"',
      'ips[1]',
    ],
    [
      { mac: '02:00:00:00:00:09' },
      'invalid-argument',
      'mac cannot be asked for in network "nomad": no plugin of it declares the "mac" capability (tuning)',
      'mac',
    ],
    [
      { mac: '02:00' },
      'invalid-argument',
      'mac "02:00" is not a MAC address (six colon-separated pairs of hex digits)',
      'mac',
    ],
  ])('refuses %j: %s naming the field', async (extra, code, message, field) => {
    await make();
    let thrown: unknown;
    try {
      configurator.checkSpec({ ...base, ...extra });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toMatchObject({ code, kind: 'invalid', message, field });
  });

  it('leaves the catalog part to the setup while the conf dir is being read again', async () => {
    await make();
    await writeFile(
      join(dir, 'conf', 'late.conflist'),
      JSON.stringify({ cniVersion: '1.0.0', name: 'late', plugins: [{ type: 'loopback' }] }),
    );
    const late = { ...base, network: 'late' };
    expect(() => {
      configurator.checkSpec(late);
    }).toThrow('network "late" is not known (networks: "nomad", "fixed", "storage", "vlan")');
    const reading = configurator.reload();
    // A read is under way: the catalog as last read may be out of date; only the decode counts.
    expect(() => {
      configurator.checkSpec(late);
    }).not.toThrow();
    expect(() => {
      configurator.checkSpec({ ...late, mac: 'x' });
    }).toThrow('mac "x" is not a MAC address (six colon-separated pairs of hex digits)');
    await reading;
    expect(() => {
      configurator.checkSpec(late);
    }).not.toThrow();
    expect(() => {
      configurator.checkSpec({ ...base, network: 'nope' });
    }).toThrow(/^network "nope" is not known/);
  });

  it('refuses the same before a setup runs any plugin', async () => {
    await make();
    await expect(
      configurator.setup(
        { ...base, network: 'storage', mac: '02:00:00:00:00:09' },
        '/run/netns/a1',
      ),
    ).rejects.toMatchObject({ code: 'invalid-argument', field: 'mac' });
    expect(runtime.calls).toEqual([]);
    expect(v4.calls).toEqual([]);
  });
});

describe('setup with ips and mac', () => {
  it('passes them as capability args where plugins declare them, to ADD, CHECK and DEL alike', async () => {
    await make();
    runtime.answerAdd(vlanResult());
    const { attachment } = await configurator.setup(
      { ...base, network: 'vlan', ifName: 'net1', ips: ['10.88.0.9/24'], mac: '02:a2:9c:00:00:01' },
      '/run/netns/a1',
    );
    expect(attachment.requested).toEqual({ ips: ['10.88.0.9/24'], mac: '02:a2:9c:00:00:01' });
    await configurator.check(attachment);
    await configurator.teardown(ID, attachment, { only: { network: 'vlan', ifName: 'net1' } });
    expect(runtime.calls.map((c) => [c.verb, c.network, c.attachment.ifName])).toEqual([
      ['ADD', 'vlan', 'net1'],
      ['CHECK', 'vlan', 'net1'],
      ['DEL', 'vlan', 'net1'],
    ]);
    for (const c of runtime.calls)
      expect(c.attachment.capabilityArgs).toEqual({
        ips: ['10.88.0.9/24'],
        mac: '02:a2:9c:00:00:01',
      });
    // The plugins' objects stay as configured: the runtime puts runtimeConfig on their stdin.
    expect(runtime.calls[0]?.plugins[0]).not.toHaveProperty('args');
  });

  it('asks host-local through args.cni.ips where no plugin declares the ips capability', async () => {
    await make();
    const { attachment } = await configurator.setup(
      { ...base, ips: ['172.26.64.9'] },
      '/run/netns/a1',
    );
    const bridge = runtime.calls[0]?.plugins.find((p) => p.type === 'bridge');
    expect(bridge?.args).toEqual({ cni: { ips: ['172.26.64.9'] } });
    expect(runtime.calls[0]?.attachment.capabilityArgs).toEqual({});
    expect(attachment.requested).toBeUndefined();
    // The record keeps the network as configured: CHECK and DEL run it as it is.
    expect(JSON.parse(attachment.network.config)).not.toHaveProperty('plugins.1.args');
  });

  it('lets a reclaim’s recorded addresses win over the spec’s', async () => {
    await make();
    runtime.answerAdd(vlanResult('10.88.0.4/24'));
    const { attachment } = await configurator.setup(
      { ...base, network: 'vlan', ifName: 'net1', ips: ['10.88.0.9'] },
      '/run/netns/a1',
      { reclaim: ['10.88.0.4'] },
    );
    const macvlan = runtime.calls[0]?.plugins[0];
    expect(macvlan?.args).toEqual({ cni: { ips: ['10.88.0.4'] } });
    expect(runtime.calls[0]?.attachment.capabilityArgs).toEqual({});
    expect(attachment.requested).toBeUndefined();
  });
});

describe('setup with defaultRoute: false', () => {
  it('deletes the default routes through its interface and leaves them out of the result and the cache', async () => {
    await make();
    runtime.answerAdd(vlanResult());
    // What the runtime's ADD caches (the fake's does not write the cache).
    await runtime.cache.writeResult({
      networkName: 'vlan',
      containerId: ID,
      ifName: 'net1',
      netns: '/run/netns/a1',
      cniArgs: [],
      capabilityArgs: {},
      config: '{}',
      result: vlanResult().json,
    });
    const { attachment, status } = await configurator.setup(
      { ...base, network: 'vlan', ifName: 'net1', defaultRoute: false },
      '/run/netns/a1',
    );
    expect(routes).toEqual([{ path: '/run/netns/a1', link: 'net1' }]);
    expect(attachment.result?.routes).toEqual([{ dst: '10.100.0.0/16' }]);
    expect(status.address).toBe('10.88.0.9');
    const cached = await runtime.cache.readResult('vlan', ID, 'net1');
    expect((cached?.result as { routes: unknown }).routes).toEqual([{ dst: '10.100.0.0/16' }]);
  });

  it('leaves the routes alone when it is true or absent', async () => {
    await make();
    runtime.answerAdd(vlanResult(), vlanResult());
    const spec = { ...base, network: 'vlan', ifName: 'net1' };
    const a = await configurator.setup({ ...spec, defaultRoute: true }, '/run/netns/a1');
    const b = await configurator.setup(spec, '/run/netns/a1');
    expect(routes).toEqual([]);
    expect(a.attachment.result?.routes).toHaveLength(3);
    expect(b.attachment.result?.routes).toHaveLength(3);
  });

  it('undoes the ADD and fails when the routes cannot be deleted', async () => {
    await make();
    runtime.answerAdd(vlanResult());
    routeFailure = new Error('nsenter: cannot open /run/netns/a1: No such file or directory');
    await expect(
      configurator.setup(
        { ...base, network: 'vlan', ifName: 'net1', defaultRoute: false },
        '/run/netns/a1',
      ),
    ).rejects.toMatchObject({
      code: 'setup-failed',
      message: `setting up "${ID}" in network "vlan" failed: deleting its default routes through "net1" failed: nsenter: cannot open /run/netns/a1: No such file or directory`,
    });
    expect(runtime.calls.map((c) => c.verb)).toEqual(['ADD', 'DEL']);
  });

  it('says aborted when the signal fired while the routes were being deleted', async () => {
    const controller = new AbortController();
    await make({
      sandbox: {
        deleteDefaultRoutes() {
          controller.abort();
          return Promise.reject(new Error('nsenter … was aborted'));
        },
      },
    });
    runtime.answerAdd(vlanResult());
    await expect(
      configurator.setup(
        { ...base, network: 'vlan', ifName: 'net1', defaultRoute: false },
        '/run/netns/a1',
        { signal: controller.signal },
      ),
    ).rejects.toMatchObject({ code: 'aborted', kind: 'aborted' });
    expect(runtime.calls.map((c) => c.verb)).toEqual(['ADD', 'DEL']);
  });
});

/** iptables-save text holding the primary's (nomad, a port) and the storage network's state. */
function twoNetworks(): string {
  const batch = createBatch()
    .newChain('nat', 'CNI-HOSTPORT-DNAT')
    .newChain('nat', 'CNI-HOSTPORT-SETMARK');
  addPluginShapes(batch, {
    network: 'nomad',
    allocId: ID,
    ip: '172.26.64.2',
    ports: [{ host: 8080, container: 80 }],
  });
  addPluginShapes(batch, {
    network: 'storage',
    allocId: ID,
    ip: '10.77.0.5',
    subnet: '10.77.0.0/24',
  });
  return formatRestoreInput(batch.ops).text.replace(/^-N (\S+)$/gm, ':$1 - [0:0]');
}

/** Answers every iptables-save with `text`, anything else with success. */
function saves(text: string, times = 12): Reply[] {
  return Array.from(
    { length: times },
    (): Reply => (spec) => (spec.file.endsWith('-save') ? ok(text) : ok()),
  );
}

describe('teardown with only', () => {
  async function reserve(network: string, address: string, ifName: string) {
    const ipam = join(dir, 'ipam', network);
    await mkdir(ipam, { recursive: true });
    await writeFile(join(ipam, address), `${ID}\r\n${ifName}`);
  }
  async function cacheEntry(network: string, ifName: string) {
    await runtime.cache.writeResult({
      networkName: network,
      containerId: ID,
      ifName,
      netns: '/run/netns/a1',
      cniArgs: [['NOMAD_ALLOC_ID', ID]],
      capabilityArgs: {},
      config: JSON.stringify({
        cniVersion: '1.0.0',
        name: network,
        plugins: [{ type: 'loopback' }],
      }),
      result: addResult().json,
    });
  }

  beforeEach(async () => {
    await reserve('nomad', '172.26.64.2', 'eth0');
    await reserve('storage', '10.77.0.5', 'net1');
    await cacheEntry('nomad', 'eth0');
    await cacheEntry('storage', 'net1');
  });

  it('without an attachment, DELs that network’s interface from the cache and sweeps that network only', async () => {
    await make();
    v4.reply(...saves(twoNetworks()));
    const report = await configurator.teardown(ID, undefined, {
      only: { network: 'storage', ifName: 'net1' },
    });
    expect(runtime.calls.map((c) => [c.verb, c.network, c.attachment.ifName])).toEqual([
      ['DEL', 'storage', 'net1'],
    ]);
    const { masq } = allocChains('storage', ID);
    const restores = v4.calls.filter((c) => c.file === 'iptables-restore');
    expect(restores.map((c) => c.input)).toEqual([
      [
        '*nat',
        `-D POSTROUTING -s 10.77.0.5/32 -m comment --comment "name: \\"storage\\" id: \\"${ID}\\"" -j ${masq}`,
        `-F ${masq}`,
        `-X ${masq}`,
        'COMMIT',
        '',
      ].join('\n'),
    ]);
    expect(report.removed.reservations.map((r) => [r.network, r.address])).toEqual([
      ['storage', '10.77.0.5'],
    ]);
    // The primary's reservation and cache entry are where they were.
    expect(await readdir(join(dir, 'ipam', 'nomad'))).toEqual(['172.26.64.2']);
    expect(await runtime.cache.readResult('nomad', ID, 'eth0')).toBeDefined();
    expect(await runtime.cache.readResult('storage', ID, 'net1')).toBeUndefined();
  });

  it('with the attachment, audits that network only, even when the DEL failed', async () => {
    await make();
    runtime.answerAdd({
      ...addResult('10.77.0.5/24'),
    });
    const { attachment } = await configurator.setup(
      { ...base, network: 'storage', ifName: 'net1', defaultRoute: false },
      '/run/netns/a1',
    );
    runtime.answerDel(new Error('netns gone'));
    v4.reply(...saves(twoNetworks()));
    const report = await configurator.teardown(ID, attachment, {
      only: { network: 'storage', ifName: 'net1' },
    });
    expect(report.delError).toBe('netns gone');
    const { masq } = allocChains('storage', ID);
    expect(report.removed.chains.map((c) => c.chain)).toEqual([masq]);
    expect(report.removed.rules.every((r) => r.line.includes('storage'))).toBe(true);
    expect(await readdir(join(dir, 'ipam', 'nomad'))).toEqual(['172.26.64.2']);
    expect(await runtime.cache.readResult('nomad', ID, 'eth0')).toBeDefined();
  });

  it('refuses an only that is not the attachment’s, before anything runs', async () => {
    await make();
    runtime.answerAdd(addResult('10.77.0.5/24'));
    const { attachment } = await configurator.setup(
      { ...base, network: 'storage', ifName: 'net1' },
      '/run/netns/a1',
    );
    await expect(
      configurator.teardown(ID, attachment, { only: { network: '', ifName: 'net1' } }),
    ).rejects.toMatchObject({
      code: 'invalid-argument',
      message: 'only.network is "nomad", not the attachment\'s network "storage"',
    });
    await expect(
      configurator.teardown(ID, attachment, { only: { network: 'storage', ifName: 'eth0' } }),
    ).rejects.toMatchObject({ field: 'only.ifName' });
    expect(runtime.calls.map((c) => c.verb)).toEqual(['ADD']);
  });

  it('leaves the primary’s state alone after a failed secondary setup', async () => {
    await make();
    v4.reply(...saves(twoNetworks()));
    runtime.answerAdd(new Error('macvlan: master "a29v0" not found'));
    await expect(
      configurator.setup({ ...base, network: 'storage', ifName: 'net1' }, '/run/netns/a1'),
    ).rejects.toMatchObject({ code: 'setup-failed' });
    const restores = v4.calls.filter((c) => c.file === 'iptables-restore');
    expect(restores.map((c) => c.input)).toEqual([
      expect.stringContaining(`-X ${allocChains('storage', ID).masq}`),
    ]);
    expect(restores[0]?.input).not.toContain('nomad');
    expect(await readdir(join(dir, 'ipam', 'nomad'))).toEqual(['172.26.64.2']);
    expect(await runtime.cache.readResult('nomad', ID, 'eth0')).toBeDefined();
  });

  it('without only, the primary’s teardown audits every network', async () => {
    await make();
    v4.reply(...saves(twoNetworks()));
    const report = await configurator.teardown(ID, undefined);
    expect(new Set(report.removed.reservations.map((r) => r.network))).toEqual(
      new Set(['nomad', 'storage']),
    );
  });
});
