import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CniError } from '@allocnet/cni';
import { createIptables } from '@allocnet/iptables-node';
import { createRecordingRunner, exit, ok } from '@allocnet/iptables-node/testing';
import type { RecordingRunner } from '@allocnet/iptables-node/testing';
import { createCniConfigurator } from './configurator.js';
import { allocChains } from './sweep.js';
import { addResult, createFakeRuntime } from './testing/index.js';
import type { FakeRuntime } from './testing/index.js';
import type { AllocNetworkSpec, CniConfigurator, CniConfiguratorOptions } from './types.js';

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
let v4: RecordingRunner;
let v6: RecordingRunner;
let sleeps: number[];
let configurator: CniConfigurator;

async function make(extra: Partial<CniConfiguratorOptions> = {}, randoms = [0.25, 0.999]) {
  configurator = await createCniConfigurator({
    runtime,
    iptables: {
      ipv4: createIptables({ runner: v4 }),
      ipv6: createIptables({ family: 'ipv6', runner: v6 }),
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
  v4 = createRecordingRunner();
  v6 = createRecordingRunner();
  sleeps = [];
});

afterEach(async () => {
  await configurator.close();
  await rm(dir, { recursive: true, force: true });
});

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

  it('makes the shared chains and NOMAD-ADMIN’s rule once, in one iptables-restore, before the first ADD', async () => {
    await make();
    await configurator.setup(spec, '/run/netns/a1');
    expect(v4.calls.map((c) => c.argv)).toEqual([
      ['iptables-save'],
      ['iptables-save', '-t', 'filter'],
      ['iptables-save', '-t', 'nat'],
      ['iptables-restore', '--noflush', '--wait'],
    ]);
    expect(v4.calls[3]?.input).toBe(
      [
        '*filter',
        '-N CNI-FORWARD',
        '-N NOMAD-ADMIN',
        '-A NOMAD-ADMIN -d 172.26.64.0/20 -o nomad -j ACCEPT',
        'COMMIT',
        '*nat',
        '-N CNI-HOSTPORT-DNAT',
        '-N CNI-HOSTPORT-MASQ',
        '-N CNI-HOSTPORT-SETMARK',
        'COMMIT',
        '',
      ].join('\n'),
    );
    expect(v6.calls).toEqual([]);
    // Warm: the next setup touches no iptables at all before its ADD.
    await configurator.setup({ ...spec, allocId: 'second' }, '/run/netns/a2');
    expect(v4.calls).toHaveLength(4);
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
    await expect(configurator.setup({ ...spec, network: 'nope' }, '/run/netns/a1')).rejects.toThrow(
      'network "nope" is not known (networks: "nomad")',
    );
    expect(runtime.calls).toEqual([]);
    expect(v4.calls).toEqual([]);
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
    const noChain = exit(1, 'iptables: No chain/target/match by that name.');
    // CNI-FORWARD holds another allocation's rules only.
    v4.reply(noChain, noChain, ok('-N CNI-FORWARD\n-A CNI-FORWARD -s 172.26.64.9/32 -j ACCEPT\n'));
    const before = v4.calls.length;
    const report = await configurator.teardown(ID, attachment);
    expect(runtime.calls.map((c) => c.verb)).toEqual(['ADD', 'DEL']);
    expect(runtime.calls[1]?.attachment).toEqual(runtime.calls[0]?.attachment);
    const { masq, dnat } = allocChains('nomad', ID);
    expect(v4.calls.slice(before).map((c) => c.argv)).toEqual([
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

  it('reads iptables whole when a cheap question finds something left', async () => {
    await make();
    const { attachment } = await configurator.setup(spec, '/run/netns/a1');
    const noChain = exit(1, 'iptables: No chain/target/match by that name.');
    v4.reply(ok('-N CNI-x'), noChain, ok('-N CNI-FORWARD\n'));
    const before = v4.calls.length;
    await configurator.teardown(ID, attachment);
    expect(v4.calls.slice(before + 3).map((c) => c.argv)).toEqual([['iptables-save']]);
    expect(v6.calls.map((c) => c.argv)).toEqual([['ip6tables-save']]);
  });

  it('reads iptables whole when the firewall rules of the allocation are still there', async () => {
    await make();
    const { attachment } = await configurator.setup(spec, '/run/netns/a1');
    const noChain = exit(1, 'iptables: No chain/target/match by that name.');
    v4.reply(noChain, noChain, ok('-N CNI-FORWARD\n-A CNI-FORWARD -s 172.26.64.2/32 -j ACCEPT\n'));
    const before = v4.calls.length;
    await configurator.teardown(ID, attachment);
    expect(v4.calls.slice(before + 3).map((c) => c.argv)).toEqual([['iptables-save']]);
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

  it('sweeps without a DEL when the attachment is not known', async () => {
    await make();
    const report = await configurator.teardown(ID, undefined);
    expect(runtime.calls).toEqual([]);
    expect(report.delRan).toBe(false);
  });
});
