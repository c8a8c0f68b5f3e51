// The reap's warm-up: its made-up leaks are the plugins' full shape line for line, and running them
// through the configurator reports each of them while nothing is run on the host.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createBatch, createIptables, formatRestoreInput } from '@allocnet/iptables-node';
import type { NftLink } from '@allocnet/iptables-node';
import { createRecordingExec } from '@allocnet/iptables-node/testing';
import { createCniConfigurator } from './configurator.js';
import { networkFacts } from './facts.js';
import { addPluginShapes, createFakeRuntime, recordingNode } from './testing/index.js';
import { syntheticLeakSave, warmAllocId } from './warm.js';

/** `-A` lines of iptables-save (or iptables-restore) text, by table. */
function appends(text: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  let table = '';
  for (const line of text.split('\n')) {
    if (line.startsWith('*')) table = line.slice(1);
    else if (line.startsWith('-A ')) out.set(table, [...(out.get(table) ?? []), line]);
  }
  for (const lines of out.values()) lines.sort();
  return out;
}

const SUBNET = '172.26.64.0/20';
const facts = () =>
  networkFacts({
    name: 'nomad',
    cniVersion: '1.0.0',
    plugins: [
      {
        type: 'bridge',
        capabilities: [],
        raw: { type: 'bridge', ipam: { type: 'host-local', subnet: SUBNET } },
      },
    ],
  } as unknown as Parameters<typeof networkFacts>[0]);

describe('syntheticLeakSave', () => {
  it('writes each made-up allocation as the plugins leave one (tcp port, firewall accepts)', () => {
    const text = syntheticLeakSave(facts(), 3);
    const expected = createBatch();
    for (let i = 0; i < 3; i++) {
      const one = addPluginShapes(createBatch(), {
        network: 'nomad',
        allocId: warmAllocId(i),
        ip: `172.26.64.${i + 2}`,
        subnet: SUBNET,
        ports: [{ host: 20000 + i, container: 8080 }],
        firewall: true,
      });
      for (const op of one.ops)
        if (op.kind === 'append' && !op.spec.includes('udp'))
          expected.append(op.table, op.chain, op.spec);
    }
    expect(text).toBeDefined();
    expect(appends(text ?? '')).toEqual(appends(formatRestoreInput(expected.ops).text));
  });

  it('has nothing to write for a network without an IPv4 subnet', () => {
    const v6only = { ...facts(), subnets: facts().subnets.filter((s) => s.family === 'ipv6') };
    expect(syntheticLeakSave(v6only, 3)).toBeUndefined();
  });
});

describe('warmReap', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'allocnet-warm-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reports every made-up leak with its rules and chains, runs nothing and commits nothing', async () => {
    const v4 = createRecordingExec();
    const v6 = createRecordingExec();
    // The nf_tables link: what the warm-up asks of the kernel (reads only).
    const asked: string[] = [];
    const link = (family: string): NftLink => ({
      chains: () => Promise.resolve([]),
      generation: () => {
        asked.push(`${family} generation`);
        return Promise.resolve(7);
      },
      rules: (table, chain) => {
        asked.push(`${family} rules ${table} ${chain}`);
        return Promise.resolve([]);
      },
      chainExists: (table, chain) => {
        asked.push(`${family} chain ${table} ${chain}`);
        return Promise.resolve(true);
      },
      commit: () => Promise.reject(new Error('the warm-up committed')),
      close: () => undefined,
    });
    const configurator = await createCniConfigurator({
      node: recordingNode().node,
      runtime: createFakeRuntime(join(dir, 'cache')),
      iptables: {
        ipv4: createIptables({ exec: v4, nft: () => link('ipv4') }),
        ipv6: createIptables({ family: 'ipv6', exec: v6, nft: () => link('ipv6') }),
      },
      defaultNetwork: { ipamDataDir: join(dir, 'ipam') },
    });
    try {
      const report = await configurator.warmReap(40);
      expect(report.leaks.map((l) => l.allocId)).toEqual(
        Array.from({ length: 40 }, (_, i) => warmAllocId(i)),
      );
      for (const leak of report.leaks) {
        expect(leak.networks).toEqual(['nomad']);
        // The jumps to its two chains (which go whole) and the firewall's two accepts.
        expect(leak.state.rules.map((r) => r.chain).sort()).toEqual([
          'CNI-FORWARD',
          'CNI-FORWARD',
          'CNI-HOSTPORT-DNAT',
          'POSTROUTING',
        ]);
        expect(leak.state.chains).toHaveLength(2);
      }
      expect([...v4.calls, ...v6.calls]).toEqual([]);
      // One removal's reads per batch of 500: 40 leaks are one batch.
      expect(asked).toEqual(['ipv4 generation', 'ipv4 rules nat POSTROUTING']);
    } finally {
      await configurator.close();
    }
  });
});
