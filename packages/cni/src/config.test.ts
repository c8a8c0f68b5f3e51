import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  findNetwork,
  listConfigFiles,
  listNetworks,
  parseNetworkConfig,
  parseNetworkConfigText,
} from './config.js';
import { CniError } from './errors.js';
import { tempDir } from './testing/tmp.js';

const list = (extra: Record<string, unknown> = {}) => ({
  cniVersion: '1.0.0',
  name: 'nomad',
  plugins: [
    { type: 'loopback' },
    { type: 'bridge', bridge: 'nomad', capabilities: { portMappings: true, ips: false } },
  ],
  ...extra,
});

function problem(value: unknown, source?: string): string {
  try {
    parseNetworkConfig(value, source);
  } catch (error) {
    if (error instanceof CniError)
      return `${error.code}: ${error.message} [field ${error.field ?? '-'}]`;
    throw error;
  }
  return 'valid';
}

describe('parseNetworkConfig', () => {
  it('reads a list, keeping every plugin object as written and its true capabilities', () => {
    const network = parseNetworkConfig(
      list({ disableCheck: 'TRUE', disableGC: false }),
      '/etc/cni/net.d/10-nomad.conflist',
    );
    expect(network).toMatchObject({
      name: 'nomad',
      cniVersion: '1.0.0',
      cniVersions: [],
      disableCheck: true,
      disableGC: false,
      source: '/etc/cni/net.d/10-nomad.conflist',
    });
    expect(network.plugins.map((p) => [p.type, p.capabilities])).toEqual([
      ['loopback', []],
      ['bridge', ['portMappings']],
    ]);
    expect(network.plugins[1]?.raw).toEqual({
      type: 'bridge',
      bridge: 'nomad',
      capabilities: { portMappings: true, ips: false },
    });
  });

  it('turns a single-plugin configuration into a one-plugin list', () => {
    const network = parseNetworkConfig({
      cniVersion: '0.4.0',
      name: 'solo',
      type: 'ptp',
      ipMasq: true,
    });
    expect(network.plugins).toEqual([
      {
        type: 'ptp',
        capabilities: [],
        raw: { cniVersion: '0.4.0', name: 'solo', type: 'ptp', ipMasq: true },
      },
    ]);
    expect(JSON.parse(network.bytes)).toEqual({
      cniVersion: '0.4.0',
      name: 'solo',
      plugins: [{ cniVersion: '0.4.0', name: 'solo', type: 'ptp', ipMasq: true }],
    });
  });

  it('takes cniVersions alone', () => {
    expect(
      parseNetworkConfig({ name: 'n', cniVersions: ['1.0.0', '1.1.0'], plugins: [{ type: 'x' }] })
        .cniVersions,
    ).toEqual(['1.0.0', '1.1.0']);
  });

  it.each([
    [list({ name: '-bad' }), 'name "-bad" does not match ^[a-zA-Z0-9][a-zA-Z0-9_.-]*$', 'name'],
    [list({ name: 'a b' }), 'name "a b" does not match ^[a-zA-Z0-9][a-zA-Z0-9_.-]*$', 'name'],
    [list({ plugins: [] }), 'plugins is empty; a network needs at least one plugin', 'plugins'],
    [list({ plugins: {} }), 'plugins should be a list of plugins, got {}', 'plugins'],
    [
      list({ plugins: [{ type: 'loopback' }, { type: '../bin/sh' }] }),
      'plugins[1].type "../bin/sh" contains "/"',
      'plugins[1].type',
    ],
    [list({ plugins: [{ type: '' }] }), 'plugins[0].type is empty', 'plugins[0].type'],
    [list({ plugins: [{ bridge: 'x' }] }), 'plugins[0].type is missing', 'plugins[0].type'],
    [
      list({ plugins: [{ type: 'a', capabilities: { portMappings: 'yes' } }] }),
      'plugins[0].capabilities.portMappings should be boolean, got "yes"',
      'plugins[0].capabilities.portMappings',
    ],
    [
      list({ cniVersion: '1.0' }),
      'cniVersion "1.0" is not a version (MAJOR.MINOR.PATCH)',
      'cniVersion',
    ],
    [
      list({ cniVersion: undefined }),
      'cniVersion is missing (and there is no cniVersions)',
      'cniVersion',
    ],
    [
      list({ cniVersions: ['1.0.0', 'x'] }),
      'cniVersions[1] "x" is not a version (MAJOR.MINOR.PATCH)',
      'cniVersions[1]',
    ],
    [
      list({ disableCheck: 'yes' }),
      'disableCheck should be true, false, "true" or "false", got "yes"',
      'disableCheck',
    ],
    [{ name: 'solo', type: 'ptp' }, 'cniVersion is missing', 'cniVersion'],
    [[], 'should be a JSON object, got []', '-'],
  ])('refuses %j: %s', (value, message, field) => {
    expect(problem(value, '/etc/cni/net.d/x.conflist')).toBe(
      `invalid-config: "/etc/cni/net.d/x.conflist": ${message} [field ${field === '-' ? '' : field}]`,
    );
  });

  it('says which text is not JSON', () => {
    expect(() => parseNetworkConfigText('{"name": ', 'f.conf')).toThrow(/^"f.conf": is not JSON: /);
  });
});

describe('configuration directories', () => {
  let dir: Awaited<ReturnType<typeof tempDir>>;
  beforeEach(async () => {
    dir = await tempDir();
  });
  afterEach(async () => {
    await dir.remove();
  });
  const put = (name: string, value: unknown) =>
    writeFile(join(dir.path, name), typeof value === 'string' ? value : JSON.stringify(value));

  it('lists .conf, .conflist and .json regular files in byte order, symlinks to files included', async () => {
    for (const name of ['b.conflist', 'B.conf', '10-x.json', '9-x.conf', 'a.txt', 'c.conf.bak'])
      await put(name, '{}');
    await mkdir(join(dir.path, 'd.conf'));
    await symlink(join(dir.path, 'b.conflist'), join(dir.path, 'e.conflist'));
    await symlink(join(dir.path, 'missing'), join(dir.path, 'f.conf'));
    expect((await listConfigFiles(dir.path)).map((p) => p.slice(dir.path.length + 1))).toEqual([
      '10-x.json',
      '9-x.conf',
      'B.conf',
      'b.conflist',
      'e.conflist',
    ]);
    expect(await listConfigFiles(join(dir.path, 'nope'))).toEqual([]);
  });

  it('finds a network by name, the first file in byte order winning, past broken files', async () => {
    await put('00-broken.conflist', '{"name": "nomad", "plugins": [');
    await put('10-nomad.conflist', list());
    await put('20-nomad.conflist', list({ plugins: [{ type: 'ptp' }] }));
    await put('30-solo.conf', { cniVersion: '1.0.0', name: 'solo', type: 'ptp' });
    const found = await findNetwork(dir.path, 'nomad');
    expect(found.source).toBe(join(dir.path, '10-nomad.conflist'));
    expect((await findNetwork(dir.path, 'solo')).plugins.map((p) => p.type)).toEqual(['ptp']);
  });

  it('lists every network and every file that is not one, with the reason', async () => {
    await put('00-broken.conflist', '{"name": "nomad", "plugins": [');
    await put('10-nomad.conflist', list());
    await put('20-nomad.conflist', list());
    await put('30-bad.json', list({ plugins: [{ type: 'a/b' }] }));
    const listing = await listNetworks(dir.path);
    expect(listing.networks.map((n) => n.name)).toEqual(['nomad']);
    expect(
      listing.invalid.map((i) => [i.file.slice(dir.path.length + 1), i.error.message]),
    ).toEqual([
      ['00-broken.conflist', expect.stringMatching(/^".*00-broken\.conflist": is not JSON: /)],
      [
        '20-nomad.conflist',
        `"${join(dir.path, '20-nomad.conflist')}": name "nomad" is already defined by "${join(dir.path, '10-nomad.conflist')}"`,
      ],
      ['30-bad.json', `"${join(dir.path, '30-bad.json')}": plugins[0].type "a/b" contains "/"`],
    ]);
  });

  it('says what it skipped when a network is not found', async () => {
    await put('00-broken.conflist', '[]');
    await expect(findNetwork(dir.path, 'nomad')).rejects.toThrow(
      `no network "nomad" in "${dir.path}"; 1 file(s) could not be read: "${join(dir.path, '00-broken.conflist')}": should be a JSON object, got []`,
    );
  });
});
