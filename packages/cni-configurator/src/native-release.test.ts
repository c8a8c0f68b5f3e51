// When a teardown releases host-local's reservations itself (native-release.ts), and what it
// removes. On the real plugins: integration/src/native-ipam.test.ts.
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { silentLogger } from '@allocnet/base';
import { parseNetworkConfig } from '@allocnet/cni';
import { tempDir } from '@allocnet/cni/testing';
import { nativeRelease } from './native-release.js';

let tmp: Awaited<ReturnType<typeof tempDir>>;
beforeEach(async () => {
  tmp = await tempDir();
  plugins = join(tmp.path, 'plugins');
  await mkdir(plugins);
  await writeFile(join(plugins, 'static'), '');
});
afterEach(async () => {
  await tmp.remove();
});

/** The runtime's plugin directories: one with a `static` plugin, per test. */
let plugins: string;
const ctx = {
  logger: silentLogger,
  runtime: {
    get pluginDirs() {
      return [join(tmp.path, 'missing'), plugins];
    },
  },
};
const attachment = { allocId: 'a1', ifName: 'eth0', addresses: ['10.1.0.2', 'fd00::2'] };

function network(main: Record<string, unknown>, ipam: Record<string, unknown> = {}) {
  return parseNetworkConfig(
    {
      cniVersion: '1.0.0',
      name: 'n',
      plugins: [
        { type: 'loopback' },
        { ipMasq: false, ...main, ipam: { type: 'host-local', dataDir: tmp.path, ...ipam } },
        { type: 'firewall' },
      ],
    },
    'test',
  );
}

/** Writes `n`'s reservation files: address → text. */
async function reserve(files: Record<string, string>) {
  await mkdir(join(tmp.path, 'n'), { recursive: true });
  for (const [address, text] of Object.entries(files))
    await writeFile(join(tmp.path, 'n', address), text);
}

it('removes exactly the result’s files and runs the bridge without its IPAM, the rest as is', async () => {
  await reserve({ '10.1.0.2': 'a1\r\neth0', 'fd00::2': ' a1\r\neth0\n', '10.1.0.3': 'a2\r\neth0' });
  const net = network({ type: 'bridge' });
  const own = await nativeRelease(ctx, net, attachment);
  expect(own?.after).toBe('bridge');
  expect(own?.reduce(net).plugins.map((p) => p.raw)).toEqual([
    { type: 'loopback' },
    { type: 'bridge', ipMasq: false },
    { type: 'firewall' },
  ]);
  // The config given is untouched.
  expect(net.plugins[1]?.raw.ipam).toEqual({ type: 'host-local', dataDir: tmp.path });
  await own?.release();
  expect(await readdir(join(tmp.path, 'n'))).toEqual(['10.1.0.3']);
});

it('runs ptp with the static IPAM, whose DEL does nothing, and removes the files itself', async () => {
  await reserve({ '10.1.0.2': 'a1\r\neth0', 'fd00::2': 'a1\r\neth0' });
  const net = network({ type: 'ptp', ipMasq: true, mtu: 1400 });
  const own = await nativeRelease(ctx, net, attachment);
  expect(own?.after).toBe('ptp');
  expect(own?.reduce(net).plugins[1]?.raw).toEqual({
    type: 'ptp',
    ipMasq: true,
    mtu: 1400,
    ipam: { type: 'static' },
  });
  await own?.release();
  expect(await readdir(join(tmp.path, 'n'))).toEqual([]);
  // Without a static plugin in any plugin directory, ptp runs host-local's own DEL.
  await rm(join(plugins, 'static'));
  await reserve({ '10.1.0.2': 'a1\r\neth0', 'fd00::2': 'a1\r\neth0' });
  expect(await nativeRelease(ctx, net, attachment)).toBeUndefined();
});

it('leaves the release to host-local for anything it does not know', async () => {
  const exact = { '10.1.0.2': 'a1\r\neth0', 'fd00::2': 'a1\r\neth0' };
  const cases: [
    string,
    Record<string, string>,
    Record<string, unknown>,
    Record<string, unknown>,
  ][] = [
    ['a hold', { ...exact, 'fd00::2': 'a1\r\neth0\r\nallocnet-hold' }, { type: 'bridge' }, {}],
    ['the older text', { ...exact, '10.1.0.2': 'a1' }, { type: 'bridge' }, {}],
    ['another interface', { ...exact, '10.1.0.2': 'a1\r\neth1' }, { type: 'bridge' }, {}],
    ['a missing file', { '10.1.0.2': 'a1\r\neth0' }, { type: 'bridge' }, {}],
    ['a ptp option it does not know', exact, { type: 'ptp', someOption: 1 }, {}],
    ['ptp with another IPAM', exact, { type: 'ptp' }, { type: 'dhcp' }],
    ['a bridge option it does not know', exact, { type: 'bridge', macspoofchk: true }, {}],
    ['a host-local option it does not know', exact, { type: 'bridge' }, { someOption: 1 }],
  ];
  for (const [why, files, main, ipam] of cases) {
    await reserve(files);
    expect([why, await nativeRelease(ctx, network(main, ipam), attachment)]).toEqual([
      why,
      undefined,
    ]);
    await rm(join(tmp.path, 'n'), { recursive: true });
  }
  // No addresses: nothing to read by name.
  await reserve(exact);
  expect(
    await nativeRelease(ctx, network({ type: 'bridge' }), { ...attachment, addresses: [] }),
  ).toBeUndefined();
});
