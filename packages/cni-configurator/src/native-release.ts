// host-local's release, done by the teardown itself (issue 30): the main plugin's DEL runs without
// host-local (bridge with no IPAM: it then deletes the container's link and exec's nothing more;
// ptp with `static` IPAM, whose DEL does nothing), and the teardown removes the allocation's
// reservation files as soon as that plugin exited, before the audit's probes read them.
//
// Why: host-local's DEL (plugins 1.1.1, `ReleaseByID`) reads every file of its directory to find
// the ones whose trimmed text is `<container id>\r\n<ifname>`: its cost grows with the node's
// reservations, and it was most of the teardown's growth from 50 to 1,000 live allocations
// (docs/performance.md). The addresses are known here (the ADD's result), so their files are read
// by name.
//
// What goes is what host-local's DEL removes, nothing else: only when every address of the
// result has a file whose trimmed text is exactly `<container id>\r\n<ifname>` (then host-local's
// walk finds them, and its fallback to the older `<container id>` text does not run). Anything
// else (a missing file, the older text, a hold: holds.ts) and any option the native path does not
// know (`nativePluginOf` of native-check.ts for bridge; for ptp, a key outside `PTP_KEYS`, or an
// IPAM other than host-local with known keys) runs the plugin's own DEL, as before. ptp's DEL
// calls its IPAM whatever the config (an IPAM left out would be a plugin named "" not found), so
// ptp's goes native only when a `static` plugin is in the runtime's plugin directories. As in
// `removeReservation` (ipam.ts), no lock is taken: host-local only creates files O_EXCL or removes
// its own container's, and the runner never runs two operations of one allocation at once. The
// CNI cache keeps host-local in the config, so a DEL by any other runtime still releases what an
// ADD reserved.
//
// Order: bridge 1.1.1 deletes the link first and then calls its IPAM's DEL, so the address is
// never free while the link still holds it; ptp 1.1.1 calls its IPAM's DEL first. Here both
// release once the plugin exited, after the link is gone, and once the firewall's accepts of the
// addresses are gone too (their removal runs beside the DEL: teardown.ts).
import { existsSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { NetworkConfig, PluginConfig } from '@allocnet/cni';
import type { ConfiguratorContext } from './context.js';
import { messageOf } from './errors.js';
import { hostLocalDirOf, nativePluginOf, reservationTexts } from './native-check.js';
import type { AllocAttachment } from './types.js';

export interface NativeRelease {
  /** The plugin whose exit the release follows (`onPluginDone`'s type). */
  readonly after: 'bridge' | 'ptp';
  /** `network` with that plugin's host-local left out: its DEL then releases nothing. */
  reduce(network: NetworkConfig): NetworkConfig;
  /**
   * Removes the reservation files. Never throws: a file left is found by the audit's probe, which
   * then sweeps it.
   */
  release(): Promise<void>;
}

/** The file's text, or undefined when there is none (or it cannot be read). */
async function textOf(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** ptp's keys (1.1.1's NetConf and the common ones): its DEL reads `ipMasq` and `ipam` only. */
const PTP_KEYS = new Set(['type', 'name', 'cniVersion', 'ipMasq', 'mtu', 'ipam', 'dns', 'args']);

/** Which plugin releases, where its reservations are, and the IPAM its DEL runs instead. */
interface Releaser {
  readonly after: NativeRelease['after'];
  readonly ipamDir: string;
  /** undefined: no IPAM at all (bridge). */
  readonly ipam: { readonly type: 'static' } | undefined;
}

function releaserOf(
  main: PluginConfig,
  network: NetworkConfig,
  pluginDirs: readonly string[],
): Releaser | undefined {
  if (main.type === 'bridge') {
    const plugin = nativePluginOf(main, network);
    return plugin?.type === 'bridge'
      ? { after: 'bridge', ipamDir: plugin.ipamDir, ipam: undefined }
      : undefined;
  }
  if (main.type !== 'ptp' || !Object.keys(main.raw).every((k) => PTP_KEYS.has(k))) return undefined;
  if (!pluginDirs.some((dir) => existsSync(join(dir, 'static')))) return undefined;
  const ipamDir = hostLocalDirOf(main, network);
  return ipamDir === undefined ? undefined : { after: 'ptp', ipamDir, ipam: { type: 'static' } };
}

/**
 * The release of `attachment`'s reservations done here, or undefined when the plugin's own DEL
 * must do it (see above). Reads one file per address.
 */
export async function nativeRelease(
  ctx: Pick<ConfiguratorContext, 'logger'> & {
    readonly runtime: Pick<ConfiguratorContext['runtime'], 'pluginDirs'>;
  },
  network: NetworkConfig,
  attachment: Pick<AllocAttachment, 'allocId' | 'ifName' | 'addresses'>,
): Promise<NativeRelease | undefined> {
  const ipams = network.plugins.filter((p) => p.raw.ipam !== undefined);
  const main = ipams.length === 1 ? ipams[0] : undefined;
  const own = main === undefined ? undefined : releaserOf(main, network, ctx.runtime.pluginDirs);
  if (own === undefined || attachment.addresses.length === 0) return undefined;
  const [text] = reservationTexts(attachment.allocId, attachment.ifName);
  const paths = attachment.addresses.map((a) => join(own.ipamDir, a));
  const texts = await Promise.all(paths.map(textOf));
  if (texts.some((t) => t?.trim() !== text)) return undefined;
  return {
    after: own.after,
    reduce: (net) => ({
      ...net,
      plugins: net.plugins.map((p) => {
        if (p.type !== own.after) return p;
        const rest = Object.fromEntries(Object.entries(p.raw).filter(([k]) => k !== 'ipam'));
        return { ...p, raw: own.ipam === undefined ? rest : { ...rest, ipam: own.ipam } };
      }),
    }),
    async release() {
      await Promise.all(
        paths.map(async (path) => {
          try {
            await rm(path, { force: true });
          } catch (error) {
            ctx.logger.warn('releasing a reservation failed; the audit removes it', {
              allocId: attachment.allocId,
              path,
              error: messageOf(error),
            });
          }
        }),
      );
    },
  };
}

/**
 * `pluginDone` for a DEL: when `own`'s plugin exited and `after` (which must not reject) ended,
 * the release first, then `pluginDone` (the probes about that plugin read the reservations);
 * `released` resolves once it is over.
 */
export function releasingFirst(
  own: NativeRelease | undefined,
  pluginDone: (type: string) => void,
  after: Promise<unknown> = Promise.resolve(),
): { pluginDone: (type: string) => void; released: () => Promise<void> } {
  let released: Promise<void> | undefined;
  return {
    pluginDone(type) {
      if (own?.after !== type) {
        pluginDone(type);
        return;
      }
      released ??= after
        .then(() => own.release())
        .then(() => {
          pluginDone(type);
        });
    },
    released: async () => {
      await released;
    },
  };
}
