/** The newest spec version this runtime implements. */
export const SPEC_VERSION = '1.1.0';

/** The versions whose results this runtime reads and writes. */
export const RESULT_VERSIONS = ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] as const;

const VERSION = /^(\d+)\.(\d+)\.(\d+)$/;

/** True for `MAJOR.MINOR.PATCH` with decimal parts, the only form CNI versions take. */
export function isVersion(text: string): boolean {
  return VERSION.test(text);
}

function parts(version: string): [number, number, number] {
  const m = VERSION.exec(version);
  if (m === null)
    throw new RangeError(`${JSON.stringify(version)} is not a CNI version (MAJOR.MINOR.PATCH)`);
  return [Number(m[1]), Number(m[2]), Number(m[3])];
}

/** Negative, zero or positive as `a` is older than, the same as, or newer than `b`. */
export function compareVersions(a: string, b: string): number {
  const [pa, pb] = [parts(a), parts(b)];
  for (let i = 0; i < 3; i++) {
    const d = (pa[i] as number) - (pb[i] as number);
    if (d !== 0) return d;
  }
  return 0;
}

export function atLeast(version: string, min: string): boolean {
  return compareVersions(version, min) >= 0;
}

/** What one plugin binary said it supports. */
export interface PluginVersions {
  readonly type: string;
  readonly path: string;
  readonly supportedVersions: readonly string[];
}

/**
 * The version to run a chain at: the highest of the versions the configuration offers that every
 * plugin of the chain supports, or undefined when there is none. (libcni takes the highest offered
 * without asking the plugins, so a list offering 1.1.0 and 1.0.0 fails on plugins that stop at
 * 1.0.0; here it runs at 1.0.0.)
 */
export function negotiateVersion(
  offered: readonly string[],
  plugins: readonly PluginVersions[],
): string | undefined {
  const candidates = [...new Set(offered)].sort(compareVersions).reverse();
  return candidates.find((v) => plugins.every((p) => p.supportedVersions.includes(v)));
}
