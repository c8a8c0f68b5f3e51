// The configurator through its facade, every operation, against recording iptables execs (exact
// argv and restore input) and a fake CNI runtime. The pure parts are tested beside their modules
// (sweep, plan, marks, gates, chain-reader, spec, ports…); this file holds what needs the whole
// configurator: an operation's effects on the plugins and iptables, and operations in sequence on
// one allocation (setup, then CHECK or teardown of its attachment). It reads better whole than
// split by module: every test shares the one harness below (temp dir, recording execs, fake
// runtime, `make`) and the iptables fixtures, which would otherwise be a public testing export or
// a copy per file.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CniError } from '@allocnet/cni';
import { createBatch, createIptables, formatRestoreInput } from '@allocnet/iptables-node';
import { createRecordingExec, exit, ok } from '@allocnet/iptables-node/testing';
import type { RecordingExec, Reply } from '@allocnet/iptables-node/testing';
import { createCniConfigurator } from './configurator.js';
import { allocChains } from './marks.js';
import {
  addPluginShapes,
  addResult,
  createFakeRuntime,
  healthyKernel,
  recordingNode,
} from './testing/index.js';
import type { PluginShapes } from './testing/index.js';
import type { FakeRuntime } from './testing/index.js';
import type {
  AllocNetworkSpec,
  CniConfigurator,
  CniConfiguratorOptions,
  ReapFence,
} from './types.js';

const ID = '6b235529-8111-4bbe-520b-d639b1d2a94e';
const spec: AllocNetworkSpec = {
  allocId: ID,
  namespace: 'default',
  jobId: 'web',
  groupName: 'frontend',
  ports: [{ label: 'http', value: 8080, to: 80 }],
};

/** A plugin failing the way plugins do in the first-setup race. */
function raceError(): CniError {
  const msg = 'failed to create chain CNI-FORWARD: exit status 4';
  return new CniError(`plugin "firewall" failed (ADD) for "${ID}": ${msg}`, {
    code: 'plugin-error',
    specCode: 999,
    msg,
    plugin: 'firewall',
    verb: 'ADD',
  });
}

let dir: string;
let runtime: FakeRuntime;
let v4: RecordingExec;
let v6: RecordingExec;
let sleeps: number[];
let configurator: CniConfigurator;
let node: ReturnType<typeof recordingNode>;

async function make(extra: Partial<CniConfiguratorOptions> = {}, randoms = [0.25, 0.999]) {
  configurator = await createCniConfigurator({
    node: node.node,
    runtime,
    iptables: {
      ipv4: createIptables({ exec: v4, nft: false }),
      ipv6: createIptables({ family: 'ipv6', exec: v6, nft: false }),
    },
    defaultNetwork: { ipamDataDir: join(dir, 'ipam') },
    random: () => randoms.shift() ?? 0,
    sleep: (ms) => {
      sleeps.push(ms);
      return Promise.resolve();
    },
    ...extra,
  });
  return configurator;
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'allocnet-configurator-'));
  runtime = createFakeRuntime(join(dir, 'cache'));
  node = recordingNode();
  v4 = createRecordingExec();
  v6 = createRecordingExec();
  sleeps = [];
});

afterEach(async () => {
  await configurator.close();
  await rm(dir, { recursive: true, force: true });
});

/** Replies for a removal's reads (native-del.ts) of `second`'s rules for `address`, after their write. */
function leftFor(address: string): Reply[] {
  const { masq, dnat } = allocChains('nomad', 'second');
  const tag = `-m comment --comment "name: \\"nomad\\" id: \\"second\\""`;
  const dnatTag = `-m comment --comment "dnat name: \\"nomad\\" id: \\"second\\""`;
  return [
    ok(),
    ok(`-P POSTROUTING ACCEPT\n-A POSTROUTING -s ${address}/32 ${tag} -j ${masq}\n`),
    ok(
      `-N CNI-HOSTPORT-DNAT\n-A CNI-HOSTPORT-DNAT -p tcp ${dnatTag} -m multiport --dports 8080 -j ${dnat}\n`,
    ),
    ok(),
    ok(
      `-N CNI-FORWARD\n-A CNI-FORWARD -d ${address}/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n-A CNI-FORWARD -s ${address}/32 -j ACCEPT\n`,
    ),
  ];
}

/** The restores of that removal. */
function removalOf(address: string): unknown[] {
  const { masq, dnat } = allocChains('nomad', 'second');
  const a = address.replaceAll('.', '\\.');
  return [
    expect.stringMatching(
      new RegExp(`-D POSTROUTING -s ${a}/32 .*-D CNI-HOSTPORT-DNAT .*-X ${masq}\\n-X ${dnat}`, 's'),
    ),
    expect.stringMatching(
      new RegExp(`-D CNI-FORWARD -d ${a}/32 .*-D CNI-FORWARD -s ${a}/32 -j ACCEPT`, 's'),
    ),
  ];
}

describe('setup', () => {
  it('gives the plugins exactly Nomad’s args and port mappings, and returns the picked address', async () => {
    await make();
    const { status, attachment } = await configurator.setup(
      { ...spec, cniArgs: { Extra: 'yes' } },
      '/run/netns/a1',
    );
    expect(runtime.calls).toEqual([
      {
        verb: 'ADD',
        network: 'nomad',
        // The firewall and portmap are written natively (native-add.ts).
        plugins: ['loopback', 'bridge'].map((type): unknown => expect.objectContaining({ type })),
        attachment: {
          containerId: ID,
          netns: '/run/netns/a1',
          ifName: 'eth0',
          args: [
            ['IgnoreUnknown', '1'],
            ['Extra', 'yes'],
            ['NOMAD_REGION', 'global'],
            ['NOMAD_NAMESPACE', 'default'],
            ['NOMAD_JOB_ID', 'web'],
            ['NOMAD_GROUP_NAME', 'frontend'],
            ['NOMAD_ALLOC_ID', ID],
          ],
          capabilityArgs: {
            portMappings: [
              { hostPort: 8080, containerPort: 80, protocol: 'tcp' },
              { hostPort: 8080, containerPort: 80, protocol: 'udp' },
            ],
          },
        },
      },
    ]);
    expect(status).toEqual({
      allocId: ID,
      network: 'nomad',
      interfaceName: 'eth0',
      address: '172.26.64.2',
      addressIpv6: '',
      dns: undefined,
      portMappings: [
        { hostPort: 8080, containerPort: 80, protocol: 'tcp' },
        { hostPort: 8080, containerPort: 80, protocol: 'udp' },
      ],
      attempts: 1,
    });
    expect(attachment).toMatchObject({
      allocId: ID,
      netns: '/run/netns/a1',
      addresses: ['172.26.64.2'],
    });
    expect(JSON.parse(attachment.network.config)).toMatchObject({
      name: 'nomad',
      cniVersion: '1.0.0',
    });
  });

  it('makes the shared chains and rules and NOMAD-ADMIN’s rule once, in one iptables-restore, before the first ADD', async () => {
    await make();
    await configurator.setup(spec, '/run/netns/a1');
    // The last restore is the allocation's masquerade (below).
    expect(v4.calls.map((c) => c.argv)).toEqual([
      ['iptables-save'],
      ['iptables-save', '-t', 'filter'],
      ['iptables-save', '-t', 'nat'],
      ['iptables-restore', '--noflush', '--wait'],
      ['iptables-restore', '--noflush', '--wait'],
    ]);
    expect(v4.calls[3]?.input).toBe(
      [
        '*filter',
        '-N CNI-FORWARD',
        '-N NOMAD-ADMIN',
        '-A NOMAD-ADMIN -d 172.26.64.0/20 -o nomad -j ACCEPT',
        '-I FORWARD 1 -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD',
        '-I CNI-FORWARD 1 -m comment --comment "CNI firewall plugin admin overrides" -j NOMAD-ADMIN',
        'COMMIT',
        '*nat',
        '-N CNI-HOSTPORT-DNAT',
        '-N CNI-HOSTPORT-MASQ',
        '-N CNI-HOSTPORT-SETMARK',
        '-A CNI-HOSTPORT-SETMARK -m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark 0x2000/0x2000',
        '-A CNI-HOSTPORT-MASQ -m mark --mark 0x2000/0x2000 -j MASQUERADE',
        '-I POSTROUTING 1 -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ',
        '-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT',
        '-A OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT',
        'COMMIT',
        '',
      ].join('\n'),
    );
    expect(v6.calls).toEqual([]);
    // Warm: the next setup touches no iptables at all before its ADD, only its own rules after.
    await configurator.setup({ ...spec, allocId: 'second' }, '/run/netns/a2');
    expect(v4.calls).toHaveLength(6);
  });

  it('writes the masquerade, the firewall’s and portmap’s rules itself once bridge answered, in one restore, and runs loopback and bridge only', async () => {
    await make();
    await configurator.setup(spec, '/run/netns/a1');
    expect(runtime.calls[0]?.plugins.map((p) => [p.type, p.ipMasq])).toEqual([
      ['loopback', undefined],
      ['bridge', false],
    ]);
    const { masq, dnat } = allocChains('nomad', ID);
    const tag = `-m comment --comment "name: \\"nomad\\" id: \\"${ID}\\""`;
    const dnatTag = `-m comment --comment "dnat name: \\"nomad\\" id: \\"${ID}\\""`;
    expect(v4.calls.at(-1)?.input).toBe(
      [
        '*nat',
        `:${masq} - [0:0]`,
        `-A ${masq} -d 172.26.64.2/20 ${tag} -j ACCEPT`,
        `-A ${masq} ! -d 224.0.0.0/4 ${tag} -j MASQUERADE`,
        `-A POSTROUTING -s 172.26.64.2/32 ${tag} -j ${masq}`,
        `:${dnat} - [0:0]`,
        `-A ${dnat} -s 172.26.64.0/20 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK`,
        `-A ${dnat} -s 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK`,
        `-A ${dnat} -p tcp -m tcp --dport 8080 -j DNAT --to-destination 172.26.64.2:80`,
        `-A ${dnat} -s 172.26.64.0/20 -p udp -m udp --dport 8080 -j CNI-HOSTPORT-SETMARK`,
        `-A ${dnat} -s 127.0.0.1/32 -p udp -m udp --dport 8080 -j CNI-HOSTPORT-SETMARK`,
        `-A ${dnat} -p udp -m udp --dport 8080 -j DNAT --to-destination 172.26.64.2:80`,
        `-A CNI-HOSTPORT-DNAT -p tcp ${dnatTag} -m multiport --dports 8080 -j ${dnat}`,
        `-A CNI-HOSTPORT-DNAT -p udp ${dnatTag} -m multiport --dports 8080 -j ${dnat}`,
        'COMMIT',
        '*filter',
        '-A CNI-FORWARD -d 172.26.64.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
        '-A CNI-FORWARD -s 172.26.64.2/32 -j ACCEPT',
        'COMMIT',
        '',
      ].join('\n'),
    );
    // portmap's side effects on the node: route_localnet on the bridge, stale UDP flows gone;
    // then the IPv4-only interface's IPv6 off, in a namespace that is not the runner's.
    expect(node.calls).toEqual([
      { sysctl: 'net/ipv4/conf/nomad/route_localnet', value: '1' },
      { forgetUdp: 'ipv4', ports: [8080] },
      { sysctl: 'net/ipv6/conf/eth0/disable_ipv6', value: '1', netns: '/run/netns/a1' },
    ]);
  });

  it('writes the rules for the address it picked while bridge runs once a setup made the bridge, and portmap’s node work after bridge answered', async () => {
    await make();
    const add = runtime.add.bind(runtime);
    const seen: { restores: string[]; node: number }[] = [];
    const restores = () =>
      v4.calls.filter((c) => c.file === 'iptables-restore').map((c) => c.input ?? '');
    let id = ID;
    runtime.add = async (network, attachment, call) => {
      // bridge answers only once the allocation's rules are in, or after a while: they do not
      // wait for it when they may begin with it.
      for (let i = 0; i < (id === ID ? 50 : 500); i++) {
        if (restores().some((r) => r.includes(`id: \\"${id}\\"`))) break;
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      seen.push({ restores: restores(), node: node.calls.length });
      return add(network, attachment, call);
    };
    // The process's first setup makes the bridge: until bridge answered the node may have no
    // route to the subnet, so the rules wait for it.
    await configurator.setup(spec, '/run/netns/a1');
    expect(seen[0]?.restores.join('')).not.toContain('-A POSTROUTING -s 172.26.64.2/32');
    expect(restores().at(-1)).toContain('-A POSTROUTING -s 172.26.64.2/32');
    id = 'second';
    const nodeBefore = node.calls.length;
    const { status } = await configurator.setup({ ...spec, allocId: id }, '/run/netns/a2');
    expect(status.address).toBe('172.26.64.2');
    expect(seen).toHaveLength(2);
    expect(seen[1]?.restores.at(-1)).toContain('-A POSTROUTING -s 172.26.64.2/32');
    expect(seen[1]?.restores.at(-1)).toContain('-A CNI-FORWARD -s 172.26.64.2/32 -j ACCEPT');
    // Nothing written twice; route_localnet names the bridge, which exists once bridge answered.
    expect(restores()).toEqual(seen[1]?.restores);
    expect(seen[1]?.node).toBe(nodeBefore);
    expect(node.calls.slice(nodeBefore)).toEqual([
      { sysctl: 'net/ipv4/conf/nomad/route_localnet', value: '1' },
      { forgetUdp: 'ipv4', ports: [8080] },
      { sysctl: 'net/ipv6/conf/eth0/disable_ipv6', value: '1', netns: '/run/netns/a2' },
    ]);
  });

  it('leaves IPv6 on an IPv4-only interface when configured to, in any namespace', async () => {
    const ipv6 = () => node.calls.filter((c) => JSON.stringify(c).includes('ipv6'));
    await make();
    await configurator.setup(spec, '/run/netns/a1', { ownNamespace: true });
    // By default the namespace's default is off while the ADD runs, then put back.
    expect(ipv6()).toHaveLength(2);
    await configurator.close();
    node = recordingNode();
    await make({ ipv6OnIpv4Interfaces: true });
    await configurator.setup({ ...spec, allocId: 'second' }, '/run/netns/a2', {
      ownNamespace: true,
    });
    await configurator.setup({ ...spec, allocId: 'third' }, '/run/netns/a3');
    expect(ipv6()).toEqual([]);
    expect(node.calls).toContainEqual({ forgetUdp: 'ipv4', ports: [8080] });
  });

  it('writes the rules again for the address bridge gave when it is not the one picked', async () => {
    const warnings: { message: string; fields: unknown }[] = [];
    const logger = {
      debug: () => undefined,
      info: () => undefined,
      warn: (message: string, fields: unknown) => warnings.push({ message, fields }),
      error: () => undefined,
    };
    await make({ logger });
    await configurator.setup(spec, '/run/netns/a1');
    runtime.answerAdd(addResult('172.26.64.9/20'));
    // What the picked address's rules left, as the removal's reads find it.
    v4.reply(...leftFor('172.26.64.2'));
    const from = v4.calls.length;
    const { status, attachment } = await configurator.setup(
      { ...spec, allocId: 'second' },
      '/run/netns/a2',
    );
    expect(status.address).toBe('172.26.64.9');
    expect(attachment.addresses).toEqual(['172.26.64.9']);
    const restores = v4.calls.slice(from).filter((c) => c.file === 'iptables-restore');
    expect(restores.map((c) => c.input)).toEqual([
      expect.stringContaining('-A POSTROUTING -s 172.26.64.2/32'),
      ...removalOf('172.26.64.2'),
      expect.stringContaining('-A POSTROUTING -s 172.26.64.9/32'),
    ]);
    expect(restores.at(-1)?.input).toContain('-A CNI-FORWARD -s 172.26.64.9/32 -j ACCEPT');
    expect(restores.at(-1)?.input).toContain('--to-destination 172.26.64.9:80');
    expect(warnings.map((w) => w.fields)).toEqual([
      { allocId: 'second', picked: ['172.26.64.2/20'], given: ['172.26.64.9/20'] },
    ]);
  });

  it('removes the rules written for the picked address when bridge fails', async () => {
    await make();
    await configurator.setup(spec, '/run/netns/a1');
    runtime.answerAdd(
      new CniError('bridge: invalid config', { code: 'invalid-config', msg: 'invalid config' }),
    );
    v4.reply(...leftFor('172.26.64.2'));
    const from = v4.calls.length;
    await expect(
      configurator.setup({ ...spec, allocId: 'second' }, '/run/netns/a2'),
    ).rejects.toMatchObject({ code: 'setup-failed', attempts: 1 });
    const restores = v4.calls.slice(from).filter((c) => c.file === 'iptables-restore');
    expect(restores.map((c) => c.input)).toEqual([
      expect.stringContaining('-A POSTROUTING -s 172.26.64.2/32'),
      ...removalOf('172.26.64.2'),
    ]);
  });

  it('keeps a failed attempt’s picked address from other setups until its rules for it are gone', async () => {
    await make();
    await configurator.setup(spec, '/run/netns/a1');
    const asked = (network: { plugins: readonly { raw: Record<string, unknown> }[] }) =>
      JSON.stringify(network.plugins[1]?.raw.args);
    const add = runtime.add.bind(runtime);
    let aAsked: string | undefined;
    let bAsked: string | undefined;
    let bAdding!: () => void;
    const bPicked = new Promise<void>((resolve) => (bAdding = resolve));
    let second: Promise<unknown> | undefined;
    let removing = false;
    runtime.add = async (network, attachment, call) => {
      if (attachment.containerId === 'b') {
        bAsked = asked(network);
        bAdding();
        return add(network, attachment, call);
      }
      if (attachment.containerId !== 'a') return add(network, attachment, call);
      aAsked = asked(network);
      removing = true;
      throw new CniError('bridge: invalid config', { code: 'invalid-config', msg: 'invalid' });
    };
    // The failed attempt's removal of its rules waits until b has picked its address.
    const run = v4.run.bind(v4);
    v4.run = async (command) => {
      if (removing && command.args.includes('-S')) {
        removing = false;
        second = configurator.setup({ ...spec, allocId: 'b' }, '/run/netns/b');
        await bPicked;
      }
      return run(command);
    };
    await expect(
      configurator.setup({ ...spec, allocId: 'a' }, '/run/netns/a'),
    ).rejects.toMatchObject({ code: 'setup-failed' });
    await second;
    expect(aAsked).toContain('172.26.64.2');
    expect(bAsked).toContain('172.26.64.3');
  });

  it('undoes the ADD and fails for good when its rules cannot be written', async () => {
    await make();
    await configurator.setup(spec, '/run/netns/a1');
    // The write fails; a fresh look finds every shared chain and rule there: nothing to heal.
    v4.reply(exit(4, 'iptables-restore v1.8.9 (nf_tables): line 2 failed'), ok(hostState()));
    const from = v4.calls.length;
    const failed = await configurator.setup({ ...spec, allocId: 'second' }, '/run/netns/a2').then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failed).toMatchObject({ code: 'setup-failed', attempts: 1 });
    // The failed write, then the fresh look (the undo's reads come after).
    expect(v4.calls.slice(from, from + 2).map((c) => c.argv.join(' '))).toEqual([
      'iptables-restore --noflush --wait',
      'iptables-save',
    ]);
    expect(runtime.calls.slice(1).map((c) => [c.verb, c.plugins.length])).toEqual([
      ['ADD', 2],
      // The whole chain as configured, so bridge, the firewall and portmap remove whatever there may be.
      ['DEL', 4],
    ]);
    expect(runtime.calls[2]?.plugins[1]).toMatchObject({ type: 'bridge', ipMasq: true });
  });

  it('makes a shared chain removed since the first setup again and writes the rest once more', async () => {
    await make();
    await configurator.setup(spec, '/run/netns/a1');
    const gone = hostState()
      .split('\n')
      .filter((l) => !l.includes('CNI-FORWARD'))
      .join('\n');
    v4.reply(exit(4, 'iptables-restore v1.8.9 (nf_tables): line 12 failed'), ok(gone));
    const from = v4.calls.length;
    const { status } = await configurator.setup({ ...spec, allocId: 'second' }, '/run/netns/a2');
    expect(status.attempts).toBe(1);
    const calls = v4.calls.slice(from);
    expect(calls.map((c) => c.argv.join(' '))).toEqual([
      'iptables-restore --noflush --wait',
      'iptables-save',
      'iptables-restore --noflush --wait',
      // What the chains hold now (the fake: every chain there, empty), then the write once more.
      ...calls.slice(3, -1).map((c) => c.argv.join(' ')),
      'iptables-restore --noflush --wait',
    ]);
    expect(calls[2]?.input).toBe(
      [
        '*filter',
        '-N CNI-FORWARD',
        '-I FORWARD 1 -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD',
        '-I CNI-FORWARD 1 -m comment --comment "CNI firewall plugin admin overrides" -j NOMAD-ADMIN',
        'COMMIT',
        '',
      ].join('\n'),
    );
    expect(calls.slice(3, -1).every((c) => c.argv.includes('-S'))).toBe(true);
    expect(calls.at(-1)?.input).toBe(calls[0]?.input?.replace(/^:(\S+) - \[0:0\]\n/gm, ''));
  });

  it('retries ADD three times, 1 s + 0–999 ms apart with a DEL between, and counts the attempts', async () => {
    await make();
    runtime.answerAdd(raceError(), raceError(), addResult('172.26.64.9/20'));
    const { status } = await configurator.setup(spec, '/run/netns/a1');
    expect(runtime.calls.map((c) => c.verb)).toEqual(['ADD', 'DEL', 'ADD', 'DEL', 'ADD']);
    expect(runtime.calls[1]?.attachment).toEqual(runtime.calls[0]?.attachment);
    expect(sleeps).toEqual([1250, 1999]);
    expect(status).toMatchObject({ attempts: 3, address: '172.26.64.9' });
  });

  it('reports the first error with the attempt count when every attempt fails, and sweeps', async () => {
    await make();
    const first = raceError();
    const other = new CniError('plugin "bridge" failed (ADD): later', {
      code: 'plugin-error',
      msg: 'later',
    });
    runtime.answerAdd(first, other, other);
    const failure = configurator.setup(spec, '/run/netns/a1');
    await expect(failure).rejects.toMatchObject({
      code: 'setup-failed',
      attempts: 3,
      cause: first,
      message: `setting up "${ID}" in network "nomad" failed after 3 attempts: ${first.message}`,
    });
    expect(runtime.calls.map((c) => c.verb)).toEqual(['ADD', 'DEL', 'ADD', 'DEL', 'ADD']);
    expect(sleeps).toHaveLength(2);
    // The sweep after the failure read both families' rules.
    expect(v4.calls.at(-1)?.argv).toEqual(['iptables-save']);
    expect(v6.calls.at(-1)?.argv).toEqual(['ip6tables-save']);
  });

  it('stops retrying when the signal fires during the wait, still reporting the first error', async () => {
    const controller = new AbortController();
    await make({
      sleep: (ms, signal) => {
        sleeps.push(ms);
        controller.abort();
        return Promise.reject(signal?.reason as Error);
      },
    });
    const first = raceError();
    runtime.answerAdd(first, addResult('172.26.64.9/20'));
    await expect(
      configurator.setup(spec, '/run/netns/a1', { signal: controller.signal }),
    ).rejects.toMatchObject({
      attempts: 1,
      cause: first,
      message: `setting up "${ID}" in network "nomad" failed after 1 attempt: ${first.message}`,
    });
    expect(runtime.calls.map((c) => c.verb)).toEqual(['ADD', 'DEL']);
    expect(sleeps).toEqual([1250]);
  });

  it('does not retry what another attempt cannot fix', async () => {
    await make();
    const missing = new CniError('plugin "portmap" not found in /opt/cni/bin, /usr/lib/cni', {
      code: 'plugin-not-found',
      msg: 'not found',
    });
    runtime.answerAdd(missing);
    await expect(configurator.setup(spec, '/run/netns/a1')).rejects.toMatchObject({
      code: 'unavailable',
      attempts: 1,
      message: `setting up "${ID}" in network "nomad" failed after 1 attempt: ${missing.message}`,
    });
    expect(runtime.calls.map((c) => c.verb)).toEqual(['ADD']);
    expect(sleeps).toEqual([]);
  });

  it('says when the host prerequisites failed, before any ADD', async () => {
    await make();
    v4.reply(exit(4, 'iptables-save v1.8.9 (nf_tables): Could not fetch rule set generation id'));
    await expect(configurator.setup(spec, '/run/netns/a1')).rejects.toMatchObject({
      code: 'setup-failed',
      attempts: 0,
      message: `setting up "${ID}" in network "nomad" failed before the first ADD (host prerequisites): iptables-save failed (exit status 4): iptables-save v1.8.9 (nf_tables): Could not fetch rule set generation id`,
    });
    expect(runtime.calls.filter((c) => c.verb === 'ADD')).toEqual([]);
  });

  it('refuses bad input before anything runs', async () => {
    await make();
    await expect(
      configurator.setup({ ...spec, jobId: 'a=b' }, '/run/netns/a1'),
    ).rejects.toMatchObject({
      code: 'invalid-argument',
      field: 'jobId',
    });
    await expect(configurator.setup(spec, 'relative/path')).rejects.toThrow(
      'netns "relative/path" is not an absolute path',
    );
    await expect(configurator.setup(spec, '/run/netns/../a1')).rejects.toMatchObject({
      code: 'invalid-argument',
      field: 'netns',
      message:
        'netns "/run/netns/../a1" is not a clean absolute path (no "." or ".." segment, no NUL, under 4096 characters)',
    });
    await expect(configurator.setup({ ...spec, network: 'nope' }, '/run/netns/a1')).rejects.toThrow(
      'network "nope" is not known (networks: "nomad")',
    );
    expect(runtime.calls).toEqual([]);
    expect(v4.calls).toEqual([]);
  });

  it('refuses an IPAM data dir that is not a clean absolute path, naming the option', async () => {
    for (const [ipamDataDir, problem] of [
      ['var/run/cni', 'is not an absolute path'],
      [
        '/var/run/../cni',
        'is not a clean absolute path (no "." or ".." segment, no NUL, under 4096 characters)',
      ],
    ] as const)
      await expect(make({ defaultNetwork: { ipamDataDir } })).rejects.toMatchObject({
        code: 'invalid-argument',
        field: 'defaultNetwork.ipamDataDir',
        message: `defaultNetwork.ipamDataDir ${JSON.stringify(ipamDataDir)} ${problem}`,
      });
    await make();
  });

  it('undoes a setup whose result gives no interface an address', async () => {
    await make();
    const empty = addResult();
    runtime.answerAdd({ ...empty, result: { ...empty.result, ips: [] } });
    await expect(configurator.setup(spec, '/run/netns/a1')).rejects.toThrow(
      `setting up "${ID}" in network "nomad" failed: no interface with an address`,
    );
    expect(runtime.calls.map((c) => c.verb)).toEqual(['ADD', 'DEL']);
  });
});

describe('teardown', () => {
  it('DELs with the same args and port mappings as the ADD, then audits with a few cheap questions', async () => {
    await make();
    const { attachment } = await configurator.setup(spec, '/run/netns/a1');
    // The allocation has no masquerade or DNAT jump (a fake DEL); CNI-FORWARD holds another
    // allocation's rules only.
    v4.reply(...chains({ 'CNI-FORWARD': ['-A CNI-FORWARD -s 172.26.64.9/32 -j ACCEPT'] }, 6));
    const before = v4.calls.length;
    const report = await configurator.teardown(ID, attachment);
    expect(runtime.calls.map((c) => c.verb)).toEqual(['ADD', 'DEL']);
    expect(runtime.calls[1]?.attachment).toEqual(runtime.calls[0]?.attachment);
    const { masq, dnat } = allocChains('nomad', ID);
    // The firewall's accepts are looked for before the DEL (none of this allocation's: nothing
    // to remove), the jumps to its chains beside it; none found, the chains themselves are asked
    // for once the DEL exited (CNI-FORWARD's read is batched: it comes last here).
    expect(v4.calls.slice(before).map((c) => c.argv)).toEqual([
      ['iptables', '--wait', '-t', 'filter', '-S', 'CNI-FORWARD'],
      ['iptables', '--wait', '-t', 'nat', '-S', 'POSTROUTING'],
      ['iptables', '--wait', '-t', 'nat', '-S', 'CNI-HOSTPORT-DNAT'],
      ['iptables', '--wait', '-t', 'nat', '-S', masq, '1'],
      ['iptables', '--wait', '-t', 'nat', '-S', dnat, '1'],
      ['iptables', '--wait', '-t', 'filter', '-S', 'CNI-FORWARD'],
    ]); // prettier-ignore
    expect(v6.calls).toEqual([]);
    expect(report).toEqual({
      allocId: ID,
      delRan: true,
      delError: undefined,
      removed: { rules: [], chains: [], reservations: [], cacheFiles: [] },
    });
  });

  it('removes the firewall’s accepts before the DEL, the masquerade and DNAT chains beside it, each in one restore, and DELs the rest without them', async () => {
    await make();
    const { attachment } = await configurator.setup(spec, '/run/netns/a1');
    const { masq, dnat } = allocChains('nomad', ID);
    const masqJump = `-A POSTROUTING -s 172.26.64.2/32 -m comment --comment "name: \\"nomad\\" id: \\"${ID}\\"" -j ${masq}`;
    const dnatJump = `-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"nomad\\" id: \\"${ID}\\"" -m multiport --dports 8080 -j ${dnat}`;
    const other = '-A POSTROUTING -s 172.26.64.9/32 -j CNI-0123456789abcdef01234567';
    const accepts = [
      '-A CNI-FORWARD -s 172.26.64.9/32 -j ACCEPT',
      '-A CNI-FORWARD -d 172.26.64.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
      '-A CNI-FORWARD -s 172.26.64.2/32 -j ACCEPT',
    ];
    let delAt = -1;
    const del = runtime.del.bind(runtime);
    runtime.del = (...args) => {
      delAt = v4.calls.length;
      return del(...args);
    };
    v4.reply(
      ...chains({ 'CNI-FORWARD': accepts }, 1),
      ok(),
      ...chains({ POSTROUTING: [other, masqJump], 'CNI-HOSTPORT-DNAT': [dnatJump] }, 2),
      ok(),
      ...chains({ 'CNI-FORWARD': accepts.slice(0, 1) }, 1),
    );
    const before = v4.calls.length;
    const report = await configurator.teardown(ID, attachment);
    // The plugins' DEL: portmap and the firewall left out, the bridge told not to un-masquerade.
    expect(runtime.calls[1]?.plugins.map((p) => [p.type, p.ipMasq])).toEqual([
      ['loopback', undefined],
      ['bridge', false],
    ]);
    const calls = v4.calls.slice(before);
    expect(calls.map((c) => c.argv)).toEqual([
      ['iptables', '--wait', '-t', 'filter', '-S', 'CNI-FORWARD'],
      ['iptables-restore', '--noflush', '--wait'],
      ['iptables', '--wait', '-t', 'nat', '-S', 'POSTROUTING'],
      ['iptables', '--wait', '-t', 'nat', '-S', 'CNI-HOSTPORT-DNAT'],
      ['iptables-restore', '--noflush', '--wait'],
      ['iptables', '--wait', '-t', 'filter', '-S', 'CNI-FORWARD'],
    ]); // prettier-ignore
    // The accepts went before the DEL began: its main plugin releases the address.
    expect(calls[1]?.input).toBe(
      ['*filter', ...accepts.slice(1).map((r) => r.replace('-A', '-D')), 'COMMIT', ''].join('\n'),
    );
    expect(before + 2).toBeLessThanOrEqual(delAt);
    expect(calls[4]?.input).toBe(
      natRemoval(
        [masqJump, dnatJump].map((j) => j.replace('-A', '-D')),
        [masq, dnat],
      ),
    );
    // Removed beside the DEL, as part of it: nothing for the audit to report.
    expect(report.removed).toEqual({ rules: [], chains: [], reservations: [], cacheFiles: [] });
  });

  it('removes the firewall’s accepts beside the DEL when it releases the address itself, and releases it only once they are gone', async () => {
    const events: string[] = [];
    let finish: (() => void) | undefined;
    await make({
      iptables: {
        ipv4: {
          ...createIptables({ exec: v4, nft: false }),
          removeAccepts: () => {
            events.push('accepts begun');
            return new Promise((resolve) => {
              finish = () => {
                events.push('accepts ended');
                resolve({ removed: 2, left: 0 });
              };
            });
          },
        },
        ipv6: createIptables({ family: 'ipv6', exec: v6, nft: false }),
      },
    });
    const { attachment } = await configurator.setup(spec, '/run/netns/a1');
    // host-local's reservation, as its ADD wrote it: the teardown releases it itself.
    const reservation = join(dir, 'ipam', 'nomad', '172.26.64.2');
    await mkdir(join(dir, 'ipam', 'nomad'), { recursive: true });
    await writeFile(reservation, `${ID}\r\neth0`);
    v4.reply(...chains({ POSTROUTING: [], 'CNI-HOSTPORT-DNAT': [] }, 1));
    const del = runtime.del.bind(runtime);
    let delEnded: (() => void) | undefined;
    const ended = new Promise<void>((resolve) => (delEnded = resolve));
    runtime.del = async (...args) => {
      events.push('DEL begun');
      await del(...args);
      events.push(`DEL ended, the reservation ${existsSync(reservation) ? 'kept' : 'gone'}`);
      delEnded?.();
    };
    const tornDown = configurator.teardown(ID, attachment);
    // The DEL runs while the accepts' removal is still going (a bounded wait: before, it waited).
    await Promise.race([ended, new Promise((resolve) => setTimeout(resolve, 2000))]);
    finish?.();
    const report = await tornDown;
    expect(events).toEqual([
      'accepts begun',
      'DEL begun',
      'DEL ended, the reservation kept',
      'accepts ended',
    ]);
    // bridge ran without its IPAM; the release came after the accepts went.
    expect(runtime.calls[1]?.plugins.find((p) => p.type === 'bridge')?.ipam).toBeUndefined();
    expect(existsSync(reservation)).toBe(false);
    expect(report.removed).toEqual({ rules: [], chains: [], reservations: [], cacheFiles: [] });
  });

  it('leaves those chains to the audit when their restore fails', async () => {
    await make();
    const { attachment } = await configurator.setup(spec, '/run/netns/a1');
    const { masq } = allocChains('nomad', ID);
    const masqJump = `-A POSTROUTING -s 172.26.64.2/32 -m comment --comment "name: \\"nomad\\" id: \\"${ID}\\"" -j ${masq}`;
    v4.reply(
      ...chains({ POSTROUTING: [masqJump], 'CNI-HOSTPORT-DNAT': [], 'CNI-FORWARD': [] }, 3),
      busy,
      ...chains({ [masq]: [], 'CNI-FORWARD': [] }, 3),
      ok(['*nat', `:${masq} - [0:0]`, masqJump, 'COMMIT', ''].join('\n')),
    );
    const before = v4.calls.length;
    const report = await configurator.teardown(ID, attachment);
    expect(v4.calls.slice(before + 4).map((c) => c.argv[0])).toEqual([
      'iptables', 'iptables', 'iptables', 'iptables-save', 'iptables-restore',
    ]); // prettier-ignore
    expect(report.removed.chains).toEqual([{ family: 'ipv4', table: 'nat', chain: masq }]);
  });

  it.each([0, 1])(
    'reads CNI-FORWARD again after the firewall’s accepts went over netlink only when some rule about the address stayed (%i)',
    async (left) => {
      const asked: string[][] = [];
      await make({
        iptables: {
          ipv4: {
            ...createIptables({ exec: v4, nft: false }),
            removeAccepts: (removal) => {
              asked.push(removal.addresses.map((a) => [...a].join('.')));
              return Promise.resolve({ removed: 2, left });
            },
          },
          ipv6: createIptables({ family: 'ipv6', exec: v6, nft: false }),
        },
      });
      const { attachment } = await configurator.setup(spec, '/run/netns/a1');
      v4.reply(...chains({ POSTROUTING: [], 'CNI-HOSTPORT-DNAT': [], 'CNI-FORWARD': [] }, 5));
      const before = v4.calls.length;
      const report = await configurator.teardown(ID, attachment);
      expect(asked).toEqual([['172.26.64.2']]);
      const reads = v4.calls.slice(before).filter((c) => c.argv.includes('CNI-FORWARD'));
      expect(reads).toHaveLength(left);
      expect(report.removed).toEqual({ rules: [], chains: [], reservations: [], cacheFiles: [] });
    },
  );

  it('reads iptables whole when a cheap question finds something left', async () => {
    await make();
    const { attachment } = await configurator.setup(spec, '/run/netns/a1');
    const { masq } = allocChains('nomad', ID);
    v4.reply(
      ...chains({ POSTROUTING: [], 'CNI-HOSTPORT-DNAT': [], [masq]: [], 'CNI-FORWARD': [] }),
    );
    const before = v4.calls.length;
    await configurator.teardown(ID, attachment);
    expect(v4.calls.slice(before + 6).map((c) => c.argv)).toEqual([['iptables-save']]);
    expect(v6.calls.map((c) => c.argv)).toEqual([['ip6tables-save']]);
  });

  it('reads iptables whole when the firewall rules of the allocation are still there', async () => {
    await make();
    const { attachment } = await configurator.setup(spec, '/run/netns/a1');
    // Their removal before the DEL fails; the audit finds them.
    const left = { 'CNI-FORWARD': ['-A CNI-FORWARD -s 172.26.64.2/32 -j ACCEPT'] };
    v4.reply(...chains(left, 1), busy, ...chains(left, 5));
    const before = v4.calls.length;
    await configurator.teardown(ID, attachment);
    expect(v4.calls[before + 1]?.argv[0]).toBe('iptables-restore');
    expect(v4.calls.slice(before + 7).map((c) => c.argv)).toEqual([['iptables-save']]);
  });

  it('keeps going when DEL fails and reports it', async () => {
    await make();
    const { attachment } = await configurator.setup(spec, '/run/netns/a1');
    runtime.answerDel(new Error('unknown FS magic on "/run/netns/a1": ef53'));
    const report = await configurator.teardown(ID, attachment);
    expect(report.delError).toBe('unknown FS magic on "/run/netns/a1": ef53');
  });

  it('DELs from the CNI cache when the attachment is not known (a crash before it was kept)', async () => {
    await make();
    await runtime.cache.writeResult({
      networkName: 'nomad',
      containerId: ID,
      ifName: 'eth0',
      netns: '/run/netns/a1',
      cniArgs: [['NOMAD_ALLOC_ID', ID]],
      capabilityArgs: { portMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp' }] },
      config: '{"cniVersion":"1.0.0","name":"nomad","plugins":[{"type":"loopback"}]}',
      result: addResult().json,
    });
    const report = await configurator.teardown(ID, undefined);
    expect(runtime.calls).toEqual([
      {
        verb: 'DEL',
        network: 'nomad',
        plugins: [{ type: 'loopback' }],
        attachment: {
          containerId: ID,
          netns: '/run/netns/a1',
          ifName: 'eth0',
          args: [['NOMAD_ALLOC_ID', ID]],
          capabilityArgs: {
            portMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp' }],
          },
        },
      },
    ]);
    expect(report).toMatchObject({ delRan: true, delError: undefined });
  });

  describe('after a crash in the middle of the chain (a pending ADD, no attachment)', () => {
    // The firewall plugin's accept rules carry no tag; the DEL of a pending ADD has no result to
    // give the firewall plugin, and host-local's DEL releases the address that finds them.
    const mine = { allocId: ID, ip: '172.26.64.2', firewall: true };
    const OTHER = 'a0e7a1d4-0b1c-4a51-9c5e-7f3a2b1c0d9e';
    const other = { allocId: OTHER, ip: '172.26.64.3', firewall: true };
    let ipam: string;
    /** How many iptables calls had been made when the DEL ran. */
    let callsAtDel: number | undefined;

    beforeEach(async () => {
      await make();
      ipam = join(dir, 'ipam', 'nomad');
      await mkdir(ipam, { recursive: true });
      await writeFile(join(ipam, '172.26.64.2'), `${ID}\r\neth0`);
      await writeFile(join(ipam, '172.26.64.3'), `${OTHER}\r\neth0`);
      await runtime.cache.markAdding({
        networkName: 'nomad',
        containerId: ID,
        ifName: 'eth0',
        netns: '/run/netns/a1',
        cniArgs: [['NOMAD_ALLOC_ID', ID]],
        capabilityArgs: {},
        config: '{"cniVersion":"1.0.0","name":"nomad","plugins":[{"type":"loopback"}]}',
        result: undefined,
      });
      callsAtDel = undefined;
      const undo = runtime.undoPendingAdd.bind(runtime);
      runtime.undoPendingAdd = async (entry, call) => {
        callsAtDel = v4.calls.length;
        // As host-local's DEL does: the address goes back to the pool.
        await rm(join(ipam, '172.26.64.2'));
        await undo(entry, call);
      };
    });

    it('removes the firewall rules of the addresses it still holds before the DEL, and reports them', async () => {
      v4.reply(ok(saved(mine, other)), ok(), ok(saved(other)));
      const report = await configurator.teardown(ID, undefined);
      expect(v4.calls.map((c) => c.argv)).toEqual([
        ['iptables-save'],
        ['iptables-restore', '--noflush', '--wait'],
        ['iptables-save'],
      ]);
      // Only this allocation's address: the other allocation's rules stay.
      expect(v4.calls[1]?.input).toBe(
        [
          '*filter',
          '-D CNI-FORWARD -d 172.26.64.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
          '-D CNI-FORWARD -s 172.26.64.2/32 -j ACCEPT',
          'COMMIT',
          '',
        ].join('\n'),
      );
      expect(callsAtDel).toBe(2);
      expect(runtime.calls.map((c) => [c.verb, c.network, c.attachment.containerId])).toEqual([
        ['DEL', 'nomad', ID],
      ]);
      expect(v6.calls.map((c) => c.argv)).toEqual([['ip6tables-save'], ['ip6tables-save']]);
      expect(report).toEqual({
        allocId: ID,
        delRan: true,
        delError: undefined,
        removed: {
          rules: [
            {
              family: 'ipv4',
              table: 'filter',
              chain: 'CNI-FORWARD',
              line: '-A CNI-FORWARD -d 172.26.64.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
            },
            {
              family: 'ipv4',
              table: 'filter',
              chain: 'CNI-FORWARD',
              line: '-A CNI-FORWARD -s 172.26.64.2/32 -j ACCEPT',
            },
          ],
          chains: [],
          reservations: [],
          cacheFiles: [],
        },
      });
      expect(await readdir(ipam)).toEqual(['172.26.64.3']);
    });

    it('fails before the DEL when those rules cannot be removed, so the address stays held', async () => {
      v4.reply(...[1, 2, 3].flatMap(() => [ok(saved(mine, other)), busy]));
      await expect(configurator.teardown(ID, undefined)).rejects.toMatchObject({
        code: 'teardown-failed',
        allocId: ID,
        message: `tearing down "${ID}": the firewall rules of its reserved addresses could not be removed: iptables-restore --noflush --wait at line 2 (-t filter -D CNI-FORWARD -d 172.26.64.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT) failed (exit status 4): iptables-restore v1.8.9 (nf_tables): line 2 failed`,
      });
      expect(runtime.calls).toEqual([]);
      expect(callsAtDel).toBeUndefined();
      expect(await readdir(ipam)).toEqual(['172.26.64.2', '172.26.64.3']);
    });
  });

  it('sweeps without a DEL when the attachment is not known', async () => {
    await make();
    const report = await configurator.teardown(ID, undefined);
    expect(runtime.calls).toEqual([]);
    expect(report.delRan).toBe(false);
  });
});

/** The restore input that deletes `rules` of the nat table, then flushes and deletes `chains`. */
function natRemoval(rules: readonly string[], chains: readonly string[]): string {
  const ops = [...rules, ...chains.map((c) => `-F ${c}`), ...chains.map((c) => `-X ${c}`)];
  return ['*nat', ...ops, 'COMMIT', ''].join('\n');
}

const LEAK = '0f8e3c1a-2b4d-4e6f-8a9b-c0d1e2f3a4b5';
const noChain = exit(1, 'iptables: No chain/target/match by that name.');
/** iptables-restore failing because the rules changed since they were read. */
const busy = exit(4, 'iptables-restore v1.8.9 (nf_tables): line 2 failed');

/** iptables-save output holding exactly what the plugins leave for these allocations. */
/** iptables-save of what the first setup's host preparer made (`v4.calls[3]`, asserted above). */
function hostState(): string {
  return (v4.calls[3]?.input ?? '')
    .replace(/^-N (\S+)$/gm, ':$1 - [0:0]')
    .replace(/^-I (\S+) 1 /gm, '-A $1 ');
}

function saved(...allocs: Omit<PluginShapes, 'network'>[]): string {
  const batch = createBatch();
  for (const a of allocs) addPluginShapes(batch, { network: 'nomad', ...a });
  return formatRestoreInput(batch.ops).text.replace(/^-N (\S+)$/gm, ':$1 - [0:0]');
}

/**
 * Answers `iptables -S <chain> [1]` from `listing` (a chain not in it does not exist), `times` times;
 * reading the chain named `failing` fails with exit status 4.
 */
function chains(listing: Record<string, readonly string[]>, times = 5, failing?: string): Reply[] {
  const answer: Reply = (spec) => {
    // `-S <chain>`, or `-S <chain> 1` (whether it exists).
    const [chain = ''] = spec.args.slice(spec.args.indexOf('-S') + 1);
    const rules = listing[chain];
    if (chain === failing) return exit(4, 'iptables v1.8.9 (nf_tables): busy');
    return rules === undefined ? noChain : ok([`-N ${chain}`, ...rules].join('\n'));
  };
  return Array.from({ length: times }, () => answer);
}

describe('check', () => {
  const { dnat } = allocChains('nomad', ID);
  // What the setup wrote for portmap (native-add.ts), which CHECK looks for rule for rule.
  const dnatRules = [
    `-A ${dnat} -s 172.26.64.0/20 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK`,
    `-A ${dnat} -s 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK`,
    `-A ${dnat} -p tcp -m tcp --dport 8080 -j DNAT --to-destination 172.26.64.2:80`,
    `-A ${dnat} -s 172.26.64.0/20 -p udp -m udp --dport 8080 -j CNI-HOSTPORT-SETMARK`,
    `-A ${dnat} -s 127.0.0.1/32 -p udp -m udp --dport 8080 -j CNI-HOSTPORT-SETMARK`,
    `-A ${dnat} -p udp -m udp --dport 8080 -j DNAT --to-destination 172.26.64.2:80`,
  ];
  const healthy = {
    FORWARD: ['-A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD'],
    'CNI-FORWARD': [
      '-A CNI-FORWARD -m comment --comment "CNI firewall plugin admin overrides" -j NOMAD-ADMIN',
      '-A CNI-FORWARD -d 172.26.64.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
      '-A CNI-FORWARD -s 172.26.64.2/32 -j ACCEPT',
    ],
    'NOMAD-ADMIN': ['-A NOMAD-ADMIN -d 172.26.64.0/20 -o nomad -j ACCEPT'],
    [dnat]: dnatRules,
    'CNI-HOSTPORT-DNAT': [
      `-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"nomad\\" id: \\"${ID}\\"" -m multiport --dports 8080 -j ${dnat}`,
      `-A CNI-HOSTPORT-DNAT -p udp -m comment --comment "dnat name: \\"nomad\\" id: \\"${ID}\\"" -m multiport --dports 8080 -j ${dnat}`,
    ],
  };

  /** A setup whose CHECK finds the kernel, the CNI cache and host-local as a healthy ADD leaves them. */
  async function setUpHealthy(extra: Partial<CniConfiguratorOptions> = {}) {
    const netns = '/run/netns/a1';
    const add = addResult('172.26.64.2/20', { sandbox: netns });
    const kernel = healthyKernel(add.result, netns);
    await make({ routeReader: kernel, ...extra });
    runtime.answerAdd(add);
    const { attachment } = await configurator.setup(spec, netns);
    await runtime.cache.writeResult({
      networkName: 'nomad',
      containerId: ID,
      ifName: 'eth0',
      netns,
      cniArgs: [],
      capabilityArgs: {},
      config: '{}',
      result: add.json,
    });
    await mkdir(join(dir, 'ipam', 'nomad'), { recursive: true });
    await writeFile(join(dir, 'ipam', 'nomad', '172.26.64.2'), `${ID}\r\neth0`);
    return { attachment, kernel };
  }

  it('runs no plugin for the default network: reads the sandbox, the node’s links by name and each chain', async () => {
    const { attachment, kernel } = await setUpHealthy();
    const before = v4.calls.length;
    v4.reply(...chains(healthy));
    await expect(configurator.check(attachment)).resolves.toEqual({ ran: true });
    expect(runtime.calls.map((c) => c.verb)).toEqual(['ADD']);
    expect(kernel.calls).toEqual(['ns /run/netns/a1', 'host nomad veth0abc']);
    expect(v4.calls.slice(before).map((c) => c.argv.slice(2).join(' ')).sort()).toEqual([
      `-t nat -S ${dnat}`,
      '-t filter -S CNI-FORWARD',
      '-t filter -S FORWARD',
      '-t filter -S NOMAD-ADMIN',
      '-t nat -S CNI-HOSTPORT-DNAT',
    ].sort()); // prettier-ignore
    expect(v6.calls).toEqual([]);
  });

  it('runs the plugins’ CHECK, without portmap and the firewall, when CNI_ARGS ask host-local for an address', async () => {
    await make();
    const { attachment } = await configurator.setup(
      { ...spec, cniArgs: { IP: '172.26.64.2' } },
      '/run/netns/a1',
    );
    v4.reply(...chains(healthy));
    await expect(configurator.check(attachment)).resolves.toEqual({ ran: true });
    expect(runtime.calls.map((c) => c.verb)).toEqual(['ADD', 'CHECK']);
    expect(runtime.calls[1]?.attachment).toEqual(runtime.calls[0]?.attachment);
    expect(runtime.calls[1]?.plugins.map((p) => p.type)).toEqual(['loopback', 'bridge']);
  });

  it('names the rule that is missing', async () => {
    const { attachment } = await setUpHealthy();
    v4.reply(...chains({ ...healthy, [dnat]: dnatRules.slice(0, 5) }));
    await expect(configurator.check(attachment)).rejects.toMatchObject({
      code: 'check-failed',
      allocId: ID,
      network: 'nomad',
      message: `CHECK of "${ID}" in network "nomad" failed: a portmap rule is missing (ipv4): -A ${dnat} -p udp -m udp --dport 8080 -j DNAT --to-destination 172.26.64.2:80`,
    });
    v4.reply(
      ...chains({ ...healthy, 'CNI-HOSTPORT-DNAT': healthy['CNI-HOSTPORT-DNAT'].slice(0, 1) }),
    );
    await expect(configurator.check(attachment)).rejects.toThrow(
      `CHECK of "${ID}" in network "nomad" failed: a portmap rule is missing (ipv4): -A CNI-HOSTPORT-DNAT -p udp -m comment --comment "dnat name: \\"nomad\\" id: \\"${ID}\\"" -m multiport --dports 8080 -j ${dnat}`,
    );
    v4.reply(...chains({ ...healthy, 'CNI-FORWARD': healthy['CNI-FORWARD'].slice(0, 2) }));
    await expect(configurator.check(attachment)).rejects.toThrow(
      `CHECK of "${ID}" in network "nomad" failed: a firewall rule is missing (ipv4): -A CNI-FORWARD -s 172.26.64.2/32 -j ACCEPT`,
    );
  });

  it('names what loopback’s, bridge’s or host-local’s CHECK would find wrong, before any rule', async () => {
    const { attachment, kernel } = await setUpHealthy();
    const sandbox = kernel.sandboxes.get('/run/netns/a1');
    if (sandbox === undefined) throw new Error('no sandbox');
    const failed = `CHECK of "${ID}" in network "nomad" failed: `;
    kernel.sandboxes.set('/run/netns/a1', { ...sandbox, routes: sandbox.routes.slice(0, 1) });
    await expect(configurator.check(attachment)).rejects.toMatchObject({
      code: 'check-failed',
      message: `${failed}bridge: the sandbox has no route to 0.0.0.0/0`,
    });
    await rm(join(dir, 'ipam', 'nomad', '172.26.64.2'));
    await expect(configurator.check(attachment)).rejects.toThrow(
      `${failed}host-local: no address of "${ID}" (eth0) is reserved in ${join(dir, 'ipam', 'nomad')}`,
    );
    kernel.sandboxes.delete('/run/netns/a1');
    await expect(configurator.check(attachment)).rejects.toThrow(
      `${failed}the sandbox "/run/netns/a1" cannot be opened: it does not exist`,
    );
    // None of it ran a plugin or read iptables.
    expect(runtime.calls.map((c) => c.verb)).toEqual(['ADD']);
  });

  it('shares one iptables-save per table among the CHECKs of a batch', async () => {
    const { attachment } = await setUpHealthy();
    const before = v4.calls.length;
    const listing = (table: 'filter' | 'nat') =>
      ok(
        [
          `*${table}`,
          ...Object.entries(healthy)
            .filter(
              ([chain]) => (table === 'nat') === (chain === dnat || chain === 'CNI-HOSTPORT-DNAT'),
            )
            .flatMap(([chain, rules]) => [`:${chain} - [0:0]`, ...rules]),
          'COMMIT',
        ].join('\n'),
      );
    v4.reply(listing('filter'), listing('nat'));
    const batch = configurator.checkBatch();
    await expect(
      Promise.all([
        configurator.check(attachment, { batch }),
        configurator.check(attachment, { batch }),
      ]),
    ).resolves.toEqual([{ ran: true }, { ran: true }]);
    expect(
      v4.calls
        .slice(before)
        .map((c) => c.argv)
        .sort(),
    ).toEqual([
      ['iptables-save', '-t', 'filter'],
      ['iptables-save', '-t', 'nat'],
    ]);
  });

  it('tells a CHECK that could not run from one that found the network broken', async () => {
    const { attachment } = await setUpHealthy();
    const args = await configurator.setup(
      { ...spec, allocId: LEAK, cniArgs: { IP: '172.26.64.3' } },
      '/run/netns/a2',
    );
    const timeout = new CniError('plugin "bridge" timed out (CHECK)', {
      code: 'timeout',
      msg: 't',
    });
    const broken = new CniError('plugin "bridge" failed (CHECK): no veth', {
      code: 'plugin-error',
      msg: 'no veth',
    });
    runtime.answerCheck(timeout, broken);
    await expect(configurator.check(args.attachment)).rejects.toMatchObject({
      code: 'unavailable',
      cause: timeout,
      message: `CHECK of "${LEAK}" in network "nomad" could not run: plugin "bridge" timed out (CHECK)`,
    });
    await expect(configurator.check(args.attachment)).rejects.toMatchObject({
      code: 'check-failed',
      message: `CHECK of "${LEAK}" in network "nomad" failed: plugin "bridge" failed (CHECK): no veth`,
    });
    v4.reply(...chains(healthy, 5, 'CNI-FORWARD'));
    await expect(configurator.check(attachment)).rejects.toMatchObject({
      code: 'unavailable',
      message: `CHECK of "${ID}" in network "nomad" could not run: reading iptables: iptables --wait -t filter -S CNI-FORWARD failed (exit status 4): iptables v1.8.9 (nf_tables): busy`,
    });
    await runtime.cache.removeResult('nomad', ID, 'eth0');
    await expect(configurator.check(attachment)).rejects.toMatchObject({
      code: 'unavailable',
      message: `CHECK of "${ID}" in network "nomad" could not run: no cached ADD result for "${ID}" (eth0) in network "nomad"; CHECK needs a completed ADD`,
    });
  });
});

describe('forceCleanup', () => {
  const leak = { allocId: ID, ip: '172.26.64.2', ports: [{ host: 8080, container: 80 }] };

  it('lists what would go with dryRun, and touches nothing', async () => {
    await make();
    v4.reply(ok(saved({ ...leak, firewall: true })));
    const report = await configurator.forceCleanup(ID, { dryRun: true });
    const { masq, dnat } = allocChains('nomad', ID);
    expect(report.dryRun).toBe(true);
    expect(report.removed.chains.map((c) => c.chain)).toEqual([masq, dnat]);
    expect(report.removed.rules.map((r) => r.line)).toEqual([
      `-A POSTROUTING -s 172.26.64.2/32 -m comment --comment "name: \\"nomad\\" id: \\"${ID}\\"" -j ${masq}`,
      `-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"nomad\\" id: \\"${ID}\\"" -m multiport --dports 8080 -j ${dnat}`,
      `-A CNI-HOSTPORT-DNAT -p udp -m comment --comment "dnat name: \\"nomad\\" id: \\"${ID}\\"" -m multiport --dports 8080 -j ${dnat}`,
      '-A CNI-FORWARD -d 172.26.64.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
      '-A CNI-FORWARD -s 172.26.64.2/32 -j ACCEPT',
    ]);
    expect(v4.calls.map((c) => c.argv)).toEqual([['iptables-save']]);
    expect(v6.calls.map((c) => c.argv)).toEqual([['ip6tables-save']]);
  });

  it('removes the allocation’s rules, chains and reservation in one restore per family', async () => {
    await make();
    const ipam = join(dir, 'ipam', 'nomad');
    await mkdir(ipam, { recursive: true });
    await writeFile(join(ipam, '172.26.64.2'), `${ID}\r\neth0`);
    await writeFile(join(ipam, '172.26.64.3'), `${LEAK}\r\neth0`);
    v4.reply(ok(saved(leak)));
    const report = await configurator.forceCleanup(ID);
    const { masq, dnat } = allocChains('nomad', ID);
    expect(v4.calls.map((c) => c.argv)).toEqual([
      ['iptables-save'],
      ['iptables-restore', '--noflush', '--wait'],
    ]);
    expect(v4.calls[1]?.input).toBe(
      natRemoval(
        [
          `-D POSTROUTING -s 172.26.64.2/32 -m comment --comment "name: \\"nomad\\" id: \\"${ID}\\"" -j ${masq}`,
          `-D CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"nomad\\" id: \\"${ID}\\"" -m multiport --dports 8080 -j ${dnat}`,
          `-D CNI-HOSTPORT-DNAT -p udp -m comment --comment "dnat name: \\"nomad\\" id: \\"${ID}\\"" -m multiport --dports 8080 -j ${dnat}`,
        ],
        [masq, dnat],
      ),
    );
    expect(report.removed.reservations).toEqual([
      {
        network: 'nomad',
        address: '172.26.64.2',
        path: join(ipam, '172.26.64.2'),
        allocId: ID,
        hold: false,
      },
    ]);
    expect(await readdir(ipam)).toEqual(['172.26.64.3']);
  });

  it('says what it could not remove', async () => {
    await make();
    v4.reply(ok(saved(leak)), busy, ok(saved(leak)), busy, ok(saved(leak)), busy);
    await expect(configurator.forceCleanup(ID)).rejects.toMatchObject({
      code: 'cleanup-failed',
      allocId: ID,
      message: `cleaning up "${ID}": iptables-restore --noflush --wait at line 2 (-t nat -D POSTROUTING -s 172.26.64.2/32 -m comment --comment "name: \\"nomad\\" id: \\"${ID}\\"" -j ${allocChains('nomad', ID).masq}) failed (exit status 4): iptables-restore v1.8.9 (nf_tables): line 2 failed`,
    });
    expect(v4.calls.map((c) => c.argv[0])).toEqual([
      'iptables-save', 'iptables-restore', 'iptables-save', 'iptables-restore', 'iptables-save', 'iptables-restore',
    ]); // prettier-ignore
  });
});

describe('findLeaks and reapLeaks', () => {
  const live = { allocId: ID, ip: '172.26.64.2', ports: [{ host: 8080, container: 80 }] };
  const leaked = { allocId: LEAK, ip: '172.26.64.3' };

  it('finds what is tagged with an id outside the known ones, per allocation', async () => {
    await make();
    v4.reply(ok(saved(live, leaked)));
    const report = await configurator.findLeaks([ID]);
    const { masq } = allocChains('nomad', LEAK);
    const tag = `"name: \\"nomad\\" id: \\"${LEAK}\\""`;
    expect(report).toEqual({
      leaks: [
        {
          allocId: LEAK,
          networks: ['nomad'],
          state: {
            rules: [
              {
                family: 'ipv4',
                table: 'nat',
                chain: 'POSTROUTING',
                line: `-A POSTROUTING -s 172.26.64.3/32 -m comment --comment ${tag} -j ${masq}`,
              },
            ],
            chains: [{ family: 'ipv4', table: 'nat', chain: masq }],
            reservations: [],
            cacheFiles: [],
          },
        },
      ],
      orphans: { rules: [], chains: [], reservations: [], cacheFiles: [] },
    });
  });

  it('reaps in batches, scanning again when iptables changed under a batch', async () => {
    await make();
    const third = { allocId: 'c3', ip: '172.26.64.4' };
    v4.reply(ok(saved(leaked, third)), busy, ok(saved(leaked, third)), ok(), ok(saved(third)));
    const progress: unknown[] = [];
    const report = await configurator.reapLeaks([], {
      batchSize: 1,
      onProgress: (p) => progress.push(p),
    });
    expect(v4.calls.map((c) => c.argv[0])).toEqual([
      'iptables-save', 'iptables-restore', 'iptables-save', 'iptables-restore', 'iptables-restore',
    ]); // prettier-ignore
    expect(report.reaped.map((l) => [l.allocId, l.state.chains.length])).toEqual([
      [LEAK, 1],
      ['c3', 1],
    ]);
    expect(report.failed).toEqual([]);
    expect(progress).toEqual([
      { done: 1, total: 2, allocId: LEAK },
      { done: 2, total: 2, allocId: 'c3' },
    ]);
  });

  it('reports the temporaries of writes whose writer is gone as orphans, and reaps them; a live writer’s stays', async () => {
    await make();
    const gone = spawnSync('true').pid;
    const adding = join(dir, 'cache', 'allocnet', 'adding');
    const stale = join(adding, `.nomad-${LEAK}-eth0.${gone}.0000abcd.tmp`);
    const inFlight = join(adding, `.nomad-${ID}-eth0.${process.pid}.0000abce.tmp`);
    await mkdir(adding, { recursive: true });
    await writeFile(stale, '');
    await writeFile(inFlight, '');
    v4.reply(ok(saved(live)), ok(saved(live)));
    const orphans = { rules: [], chains: [], reservations: [], cacheFiles: [stale] };
    expect(await configurator.findLeaks([ID])).toEqual({ leaks: [], orphans });
    expect(await configurator.reapLeaks([ID])).toEqual({ reaped: [], orphans, failed: [] });
    expect(await readdir(adding)).toEqual([`.nomad-${ID}-eth0.${process.pid}.0000abce.tmp`]);
  });

  it('lists the allocations whose batch could not be applied after three scans', async () => {
    await make();
    v4.reply(...[1, 2, 3].flatMap(() => [ok(saved(leaked)), busy]));
    const report = await configurator.reapLeaks([]);
    expect(report.reaped).toEqual([]);
    expect(report.failed).toEqual([
      {
        allocId: LEAK,
        error: `iptables-restore --noflush --wait at line 2 (-t nat -D POSTROUTING -s 172.26.64.3/32 -m comment --comment "name: \\"nomad\\" id: \\"${LEAK}\\"" -j ${allocChains('nomad', LEAK).masq}) failed (exit status 4): iptables-restore v1.8.9 (nf_tables): line 2 failed`,
      },
    ]);
    await expect(configurator.reapLeaks([], { batchSize: 0 })).rejects.toThrow(
      'batchSize should be a whole number of at least 1, got 0',
    );
  });

  const EMPTY = { rules: [], chains: [], reservations: [], cacheFiles: [] };

  /** A fence that records what the reap asks of it; `late` are spared between plan and take. */
  function recordingFence(spared: string[], options: { late?: string[]; quiet?: boolean } = {}) {
    const log: string[] = [];
    const set = new Set(spared);
    const fence: ReapFence = {
      spared: set,
      take: (ids) => {
        log.push(`take ${ids.join(' ')}`);
        for (const id of options.late ?? []) set.add(id);
        return ids.filter((id) => !set.has(id));
      },
      done: (ids) => log.push(`done ${ids.join(' ')}`),
      takeOrphans: () => {
        log.push('take orphans');
        return options.quiet === true ? () => log.push('orphans done') : undefined;
      },
    };
    return { fence, log };
  }

  /** A restore that notes in `log` when it runs. */
  const noted = (log: string[]) => () => {
    log.push('restore');
    return ok();
  };

  it('leaves what the fence spares, before the plan or after it, and lets each batch go when done', async () => {
    await make();
    const third = { allocId: 'c3', ip: '172.26.64.4' };
    const fourth = { allocId: 'c4', ip: '172.26.64.5' };
    const { fence, log } = recordingFence(['c3'], { late: ['c4'] });
    v4.reply(ok(saved(leaked, third, fourth)), noted(log));
    const report = await configurator.reapLeaks([], { batchSize: 1, fence });
    // c3 was spared when the reap planned; c4 became spared between the plan and the take.
    expect(log).toEqual([`take ${LEAK} c4`, 'restore', `done ${LEAK}`]);
    expect(report.reaped.map((l) => l.allocId)).toEqual([LEAK]);
    expect(v4.calls.map((c) => c.argv[0])).toEqual(['iptables-save', 'iptables-restore']);
    expect(v4.calls[1]?.input).toBe(
      natRemoval(
        [
          `-D POSTROUTING -s 172.26.64.3/32 -m comment --comment "name: \\"nomad\\" id: \\"${LEAK}\\"" -j ${allocChains('nomad', LEAK).masq}`,
        ],
        [allocChains('nomad', LEAK).masq],
      ),
    );
  });

  it('never counts a spared allocation’s chains as orphans, even before its tagged rules exist', async () => {
    await make();
    // A setup of "fresh" under way: its masquerade chain is made, its tagged jump not yet.
    const { masq } = allocChains('nomad', 'fresh');
    const { fence, log } = recordingFence(['fresh'], { quiet: true });
    v4.reply(ok(`*nat\n:${masq} - [0:0]\nCOMMIT\n`));
    const report = await configurator.reapLeaks([], { fence });
    expect(log).toEqual(['take ']);
    expect(report).toEqual({ reaped: [], orphans: EMPTY, failed: [] });
    expect(v4.calls.map((c) => c.argv[0])).toEqual(['iptables-save']);
  });

  it('leaves the orphans for the next pass when an operation ran beside the reap', async () => {
    await make();
    const { masq: orphan } = allocChains('nomad', 'gone');
    const save = saved(leaked).replace('*nat\n', `*nat\n:${orphan} - [0:0]\n`);
    const { fence, log } = recordingFence([]);
    v4.reply(ok(save), noted(log));
    const report = await configurator.reapLeaks([], { fence });
    expect(log).toEqual([`take ${LEAK}`, 'restore', `done ${LEAK}`, 'take orphans']);
    expect(report.reaped.map((l) => l.allocId)).toEqual([LEAK]);
    expect(report.orphans).toEqual(EMPTY);
    expect(v4.calls[1]?.input).not.toContain(orphan);
  });

  it('removes the orphans when no operation ran, holding operations until they are gone', async () => {
    await make();
    const { masq: orphan } = allocChains('nomad', 'gone');
    const save = saved(leaked).replace('*nat\n', `*nat\n:${orphan} - [0:0]\n`);
    const { fence, log } = recordingFence([], { quiet: true });
    v4.reply(ok(save), noted(log), noted(log));
    const report = await configurator.reapLeaks([], { fence });
    expect(log).toEqual([
      `take ${LEAK}`,
      'restore',
      `done ${LEAK}`,
      'take orphans',
      'restore',
      'orphans done',
    ]);
    expect(report.orphans.chains).toEqual([{ family: 'ipv4', table: 'nat', chain: orphan }]);
    expect(v4.calls[2]?.input).toBe(natRemoval([], [orphan]));
  });
});
