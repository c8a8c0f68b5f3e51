// Holds and reclaims through the configurator's facade, on real files in a temp host-local
// directory, with the fake CNI runtime (what each plugin's stdin holds) and recording iptables.
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createIptables } from '@allocnet/iptables-node';
import { createRecordingExec } from '@allocnet/iptables-node/testing';
import { createCniConfigurator } from './configurator.js';
import { isConfiguratorError } from './errors.js';
import { addResult, createFakeRuntime, recordingNode } from './testing/index.js';
import type { FakeRuntime } from './testing/index.js';
import type { AllocAttachment, AllocNetworkSpec, CniConfigurator } from './types.js';

const A = '6b235529-8111-4bbe-520b-d639b1d2a94e';
const B = '0c1d2e3f-0000-4000-8000-00000000000b';
const spec: AllocNetworkSpec = { allocId: A, namespace: 'default', jobId: 'web', groupName: 'g' };

let dir: string;
let ipam: string;
let runtime: FakeRuntime;
let configurator: CniConfigurator;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'allocnet-holds-'));
  ipam = join(dir, 'ipam', 'nomad');
  runtime = createFakeRuntime(join(dir, 'cache'));
  configurator = await createCniConfigurator({
    node: recordingNode().node,
    runtime,
    iptables: {
      ipv4: createIptables({ exec: createRecordingExec(), nft: false }),
      ipv6: createIptables({ family: 'ipv6', exec: createRecordingExec(), nft: false }),
    },
    defaultNetwork: { ipamDataDir: join(dir, 'ipam'), ipv6Subnet: 'fd00::/64' },
    sleep: () => Promise.resolve(),
  });
});

afterEach(async () => {
  await configurator.close();
  await rm(dir, { recursive: true, force: true });
});

/** A's attachment as its setup recorded it, with these addresses. */
async function attachmentOf(allocId: string, addresses: string[]): Promise<AllocAttachment> {
  runtime.answerAdd(
    addResult(`${addresses[0] ?? ''}/20`, { ipv6: `${addresses[1] ?? 'fd00::9'}/64` }),
  );
  const { attachment } = await configurator.setup({ ...spec, allocId }, `/run/netns/${allocId}`);
  return { ...attachment, addresses };
}

async function files(): Promise<Record<string, string>> {
  const found: Record<string, string> = {};
  for (const name of await readdir(ipam)) found[name] = await readFile(join(ipam, name), 'utf8');
  return found;
}

describe('holdAddresses', () => {
  it('holds addresses no file has, keeps the owner’s own, reports another owner’s and one out of range', async () => {
    const a = await attachmentOf(A, ['172.26.64.2', 'fd00::2']);
    const b = await attachmentOf(B, ['172.26.64.3', '10.9.9.9']);
    await mkdir(ipam, { recursive: true });
    await writeFile(join(ipam, 'fd00::2'), `${A}\r\neth0`);
    await writeFile(join(ipam, '172.26.64.3'), `${A}\r\neth0`);
    const report = await configurator.holdAddresses([a, b]);
    expect(report).toEqual({
      held: 1,
      kept: 1,
      lost: [
        {
          allocId: B,
          network: 'nomad',
          address: '172.26.64.3',
          reason: `it is reserved for "${A}"`,
        },
        {
          allocId: B,
          network: 'nomad',
          address: '10.9.9.9',
          reason: `it is outside every range of network "nomad"'s config`,
        },
      ],
    });
    expect(await files()).toEqual({
      '172.26.64.2': `${A}\r\neth0\r\nallocnet-hold`,
      'fd00::2': `${A}\r\neth0`,
      '172.26.64.3': `${A}\r\neth0`,
    });
  });

  it('are the allocation’s to the leak finder: spared while known, reported and reaped when not', async () => {
    const a = await attachmentOf(A, ['172.26.64.2']);
    await configurator.holdAddresses([a]);
    expect((await configurator.findLeaks([A])).leaks).toEqual([]);
    const { leaks } = await configurator.findLeaks([]);
    expect(leaks.map((l) => [l.allocId, l.state.reservations])).toEqual([
      [
        A,
        [
          {
            network: 'nomad',
            address: '172.26.64.2',
            path: join(ipam, '172.26.64.2'),
            allocId: A,
            hold: true,
          },
        ],
      ],
    ]);
    await configurator.reapLeaks([]);
    expect(await files()).toEqual({});
  });
});

describe('teardown', () => {
  it('removes the allocation’s holds with the rest', async () => {
    const a = await attachmentOf(A, ['172.26.64.2']);
    await configurator.holdAddresses([a]);
    const report = await configurator.teardown(A, a);
    expect(report.removed.reservations.map((r) => [r.address, r.hold])).toEqual([
      ['172.26.64.2', true],
    ]);
    expect(await files()).toEqual({});
  });

  it('with keepHolds, turns its reservations into holds before the DEL and leaves them', async () => {
    const a = await attachmentOf(A, ['172.26.64.2']);
    await mkdir(ipam, { recursive: true });
    await writeFile(join(ipam, '172.26.64.2'), `${A}\r\neth0`);
    const report = await configurator.teardown(A, a, { keepHolds: true });
    expect(report.removed.reservations).toEqual([]);
    expect(await files()).toEqual({ '172.26.64.2': `${A}\r\neth0\r\nallocnet-hold` });
  });
});

describe('setup with reclaim', () => {
  it('asks host-local for exactly the recorded addresses in args.cni.ips, its holds removed first; the record keeps the config', async () => {
    const a = await attachmentOf(A, ['172.26.64.7', 'fd00::7']);
    await configurator.teardown(A, a);
    await configurator.holdAddresses([a]);
    const from = runtime.calls.length;
    runtime.answerAdd(addResult('172.26.64.7/20', { ipv6: 'fd00::7/64' }));
    const { attachment } = await configurator.setup(spec, '/run/netns/a', {
      reclaim: ['172.26.64.7', 'fd00::7'],
    });
    const bridge = runtime.calls[from]?.plugins.find((p) => p.type === 'bridge');
    expect(bridge?.args).toEqual({ cni: { ips: ['172.26.64.7', 'fd00::7'] } });
    expect(bridge?.ipam).toMatchObject({ type: 'host-local' });
    // Only the plugin carrying the ipam asks.
    expect(runtime.calls[from]?.plugins.filter((p) => p.args !== undefined)).toHaveLength(1);
    // The holds are gone (the fake plugin reserves nothing in their place).
    expect(await files()).toEqual({});
    expect(
      (JSON.parse(attachment.network.config) as { plugins: { args?: unknown }[] }).plugins.some(
        (p: { args?: unknown }) => p.args !== undefined,
      ),
    ).toBe(false);
    expect(attachment.addresses).toEqual(['172.26.64.7', 'fd00::7']);
  });

  it('fails address-lost, running nothing, for an address another allocation holds or outside the ranges', async () => {
    await mkdir(ipam, { recursive: true });
    await writeFile(join(ipam, '172.26.64.7'), `${B}\r\neth0`);
    const failure = async (reclaim: string[]) => {
      try {
        await configurator.setup(spec, '/run/netns/a', { reclaim });
      } catch (error) {
        if (isConfiguratorError(error))
          return [error.code, error.kind, error.address, error.message];
        throw error;
      }
      throw new Error('it did not fail');
    };
    expect(await failure(['172.26.64.7'])).toEqual([
      'address-lost',
      'conflict',
      '172.26.64.7',
      `setting up "${A}" in network "nomad" with its recorded address 172.26.64.7 failed: it is reserved for "${B}"`,
    ]);
    expect(await failure(['10.1.2.3'])).toEqual([
      'address-lost',
      'conflict',
      '10.1.2.3',
      `setting up "${A}" in network "nomad" with its recorded address 10.1.2.3 failed: it is outside every range of network "nomad"'s config`,
    ]);
    expect(runtime.calls.filter((c) => c.verb === 'ADD')).toEqual([]);
    expect(await files()).toEqual({ '172.26.64.7': `${B}\r\neth0` });
  });
});
