import { compareVersions, isVersion, negotiateVersion } from './version.js';

const debian = (type: string, supportedVersions: string[]) => ({
  type,
  path: `/usr/lib/cni/${type}`,
  supportedVersions,
});
// What the Debian 1.1.1 plugins answer to VERSION (measured).
const ALL = ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0'];
const NOMAD_CHAIN = [
  debian('loopback', ALL),
  debian('bridge', ALL),
  debian('firewall', ['0.4.0', '1.0.0']),
  debian('portmap', ALL),
];

describe('versions', () => {
  it('compares numerically', () => {
    expect(['1.0.0', '0.10.0', '0.4.0', '0.3.1', '1.1.0'].sort(compareVersions)).toEqual([
      '0.3.1',
      '0.4.0',
      '0.10.0',
      '1.0.0',
      '1.1.0',
    ]);
    expect(isVersion('1.0.0')).toBe(true);
    expect(isVersion('1.0')).toBe(false);
    expect(isVersion('1.0.0-rc1')).toBe(false);
  });

  it('runs at the highest offered version every plugin supports', () => {
    expect(negotiateVersion(['1.0.0'], NOMAD_CHAIN)).toBe('1.0.0');
    expect(negotiateVersion(['0.4.0', '1.0.0'], NOMAD_CHAIN)).toBe('1.0.0');
  });

  it('runs a list offering 1.1.0 over the Debian plugins at 1.0.0 (libcni picks 1.1.0 and fails)', () => {
    expect(negotiateVersion(['1.1.0', '1.0.0', '0.4.0'], NOMAD_CHAIN)).toBe('1.0.0');
  });

  it('finds nothing when no offered version suits every plugin (firewall does not speak 0.3.1)', () => {
    expect(negotiateVersion(['0.3.1'], NOMAD_CHAIN)).toBeUndefined();
    expect(negotiateVersion(['1.1.0'], NOMAD_CHAIN)).toBeUndefined();
  });
});
