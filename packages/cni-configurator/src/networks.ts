import { watch } from 'node:fs';
import type { FSWatcher } from 'node:fs';
import ipaddr from 'ipaddr.js';
import { invalidInputOf, show } from '@allocnet/base';
import type { FieldPath } from '@allocnet/base';
import { checkIfName, listNetworks, parseNetworkConfig } from '@allocnet/cni';
import type { Logger, NetworkConfig } from '@allocnet/cni';
import { absolutePathProblem } from '@allocnet/netns';
import { DEFAULT_IPAM_DATA_DIR } from './defaults.js';
import { ConfiguratorError, invalidField, messageOf } from './errors.js';
import type { DefaultNetworkOptions, NetworkCatalog } from './types.js';

export const DEFAULT_NETWORK_NAME = 'nomad';
export const DEFAULT_BRIDGE = 'nomad';
export const DEFAULT_SUBNET = '172.26.64.0/20';
export const DEFAULT_ADMIN_CHAIN = 'NOMAD-ADMIN';
/** host-local's own default, for networks that do not set `dataDir`. */
export const HOST_LOCAL_DATA_DIR = '/var/lib/cni/networks';

/** The default network's settings, checked, with defaults filled in. */
export interface DefaultNetworkSettings {
  readonly name: string;
  readonly bridge: string;
  readonly subnet: string;
  readonly ipv6Subnet: string | undefined;
  readonly hairpinMode: boolean;
  readonly mtu: number | undefined;
  readonly ipamDataDir: string;
  readonly adminChain: string;
}

function checkSubnet(field: FieldPath, value: string, kind: 'ipv4' | 'ipv6'): string {
  let parsed: [ipaddr.IPv4 | ipaddr.IPv6, number];
  try {
    parsed = ipaddr.parseCIDR(value);
  } catch {
    // parseCIDR's own message does not name the field; ours does.
    throw invalidField(field, `${JSON.stringify(value)} is not a subnet in CIDR form`);
  }
  const [address, prefix] = parsed;
  if (address.kind() !== kind)
    throw invalidField(
      field,
      `${JSON.stringify(value)} is not an ${kind === 'ipv4' ? 'IPv4' : 'IPv6'} subnet`,
    );
  const max = kind === 'ipv4' ? 30 : 126;
  if (prefix > max)
    throw invalidField(
      field,
      `${JSON.stringify(value)} leaves no room for allocations (/${prefix}; at most /${max})`,
    );
  const network =
    kind === 'ipv4'
      ? ipaddr.IPv4.networkAddressFromCIDR(value)
      : ipaddr.IPv6.networkAddressFromCIDR(value);
  if (network.toString() !== address.toString())
    throw invalidField(
      field,
      `${JSON.stringify(value)} has host bits set; the subnet is ${network.toString()}/${prefix}`,
    );
  return `${address.toString()}/${prefix}`;
}

/** Checks the default network's options and fills in Nomad's defaults. */
export function defaultNetworkSettings(
  options: DefaultNetworkOptions = {},
): DefaultNetworkSettings {
  const field = (name: string): FieldPath => ['defaultNetwork', name];
  const name = options.name ?? DEFAULT_NETWORK_NAME;
  if (!/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/.test(name))
    throw invalidField(field('name'), `${JSON.stringify(name)} is not a network name`);
  const bridge = options.bridge ?? DEFAULT_BRIDGE;
  try {
    checkIfName(bridge, 'defaultNetwork.bridge');
  } catch (error) {
    const bad = invalidInputOf(error);
    if (bad !== undefined) throw invalidField(field('bridge'), bad.problem);
    throw error;
  }
  const adminChain = options.adminChain ?? DEFAULT_ADMIN_CHAIN;
  if (!/^[A-Za-z0-9_.-]{1,28}$/.test(adminChain))
    throw invalidField(
      field('adminChain'),
      `${JSON.stringify(adminChain)} is not an iptables chain name`,
    );
  const mtu = options.mtu;
  if (mtu !== undefined && (!Number.isInteger(mtu) || mtu < 576 || mtu > 65535))
    throw invalidField(
      field('mtu'),
      `should be a whole number from 576 to 65535, got ${JSON.stringify(mtu)}`,
    );
  const ipv6Subnet =
    options.ipv6Subnet === undefined || options.ipv6Subnet === ''
      ? undefined
      : checkSubnet(field('ipv6Subnet'), options.ipv6Subnet, 'ipv6');
  if (ipv6Subnet !== undefined && mtu !== undefined && mtu < 1280)
    throw invalidField(field('mtu'), `is ${mtu}; IPv6 needs at least 1280`);
  const ipamDataDir = options.ipamDataDir ?? DEFAULT_IPAM_DATA_DIR;
  const ipamDataDirProblem = absolutePathProblem(ipamDataDir);
  if (ipamDataDirProblem !== undefined)
    throw invalidField(field('ipamDataDir'), `${show(ipamDataDir)} ${ipamDataDirProblem}`);
  if (options.hairpinMode !== undefined && typeof options.hairpinMode !== 'boolean')
    throw invalidField(field('hairpinMode'), 'should be true or false');
  return {
    name,
    bridge,
    subnet: checkSubnet(field('subnet'), options.subnet ?? DEFAULT_SUBNET, 'ipv4'),
    ipv6Subnet,
    hairpinMode: options.hairpinMode ?? false,
    mtu,
    ipamDataDir,
    adminChain,
  };
}

/**
 * The embedded default network as a configuration list: Nomad's bridge network (loopback; bridge
 * with ipMasq, isGateway, forceAddress and host-local IPAM; firewall with the admin chain;
 * portmap with snat), at CNI 1.0.0.
 */
export function defaultNetworkConfig(settings: DefaultNetworkSettings): NetworkConfig {
  const ranges: unknown[] = [[{ subnet: settings.subnet }]];
  const routes: unknown[] = [{ dst: '0.0.0.0/0' }];
  if (settings.ipv6Subnet !== undefined) {
    ranges.push([{ subnet: settings.ipv6Subnet }]);
    routes.push({ dst: '::/0' });
  }
  return parseNetworkConfig(
    {
      cniVersion: '1.0.0',
      name: settings.name,
      plugins: [
        { type: 'loopback' },
        {
          type: 'bridge',
          bridge: settings.bridge,
          ipMasq: true,
          isGateway: true,
          forceAddress: true,
          hairpinMode: settings.hairpinMode,
          ...(settings.mtu === undefined ? {} : { mtu: settings.mtu }),
          ipam: { type: 'host-local', ranges, routes, dataDir: settings.ipamDataDir },
        },
        { type: 'firewall', backend: 'iptables', iptablesAdminChainName: settings.adminChain },
        { type: 'portmap', capabilities: { portMappings: true }, snat: true },
      ],
    },
    'default',
  );
}

/** The networks one operation sees: read once at its start, never changed under it. */
export interface CatalogSnapshot {
  readonly defaultNetwork: NetworkConfig;
  readonly named: ReadonlyMap<string, NetworkConfig>;
  readonly invalid: readonly { readonly file: string; readonly reason: string }[];
}

export interface Catalog {
  /** The current snapshot; re-reads the conf dir first when it changed since the last read. */
  current(): Promise<CatalogSnapshot>;
  reload(): Promise<CatalogSnapshot>;
  /**
   * The snapshot of the last read, without reading (synchronous checks: `checkSpec`); `stale`
   * when the watcher saw a change since (a re-read is under way) or a read is running.
   */
  latest(): { readonly snapshot: CatalogSnapshot; readonly stale: boolean };
  view(): NetworkCatalog;
  close(): void;
}

/** `network` as a spec names it: empty or the default's name is the default network. */
export function resolveNetwork(snapshot: CatalogSnapshot, name: string | undefined): NetworkConfig {
  if (name === undefined || name === '' || name === snapshot.defaultNetwork.name)
    return snapshot.defaultNetwork;
  const found = snapshot.named.get(name);
  if (found !== undefined) return found;
  const known = [snapshot.defaultNetwork.name, ...snapshot.named.keys()].map((n) =>
    JSON.stringify(n),
  );
  throw new ConfiguratorError(
    `network ${JSON.stringify(name)} is not known (networks: ${known.join(', ')})`,
    {
      code: 'network-not-found',
      path: ['network'],
      problem: [`${JSON.stringify(name)} is not known (networks: ${known.join(', ')})`],
      network: name,
    },
  );
}

/**
 * The default network and the named networks of `confDir`. The conf dir is read at creation, on
 * `reload()`, and lazily after the watcher saw a change; a read replaces the whole snapshot, so an
 * operation that took a snapshot keeps it to the end.
 */
export async function createCatalog(options: {
  readonly defaultNetwork: NetworkConfig;
  readonly confDir: string | undefined;
  readonly watch: boolean;
  readonly logger: Logger;
}): Promise<Catalog> {
  const { defaultNetwork, confDir, logger } = options;
  let snapshot: CatalogSnapshot = { defaultNetwork, named: new Map(), invalid: [] };
  let dirty = false;
  let watcher: FSWatcher | undefined;
  let reading: Promise<CatalogSnapshot> | undefined;

  async function read(): Promise<CatalogSnapshot> {
    if (confDir === undefined) return snapshot;
    dirty = false;
    const listing = await listNetworks(confDir);
    const named = new Map<string, NetworkConfig>();
    const invalid = listing.invalid.map((i) => ({ file: i.file, reason: i.error.message }));
    for (const network of listing.networks) {
      if (network.name === defaultNetwork.name) {
        invalid.push({
          file: network.source ?? confDir,
          reason: `network ${JSON.stringify(network.name)} has the embedded default network's name; rename it`,
        });
        continue;
      }
      named.set(network.name, network);
    }
    snapshot = { defaultNetwork, named, invalid };
    if (invalid.length > 0)
      logger.warn('cni conf dir has invalid files', { confDir, invalid: invalid.length });
    return snapshot;
  }

  /** One read at a time; callers during a read share it. */
  function reread(): Promise<CatalogSnapshot> {
    reading ??= read().finally(() => {
      reading = undefined;
    });
    return reading;
  }

  if (confDir !== undefined) {
    await reread();
    if (options.watch) {
      try {
        watcher = watch(confDir, { persistent: false }, () => {
          dirty = true;
          // Read it now, so that `latest()` is soon fresh again; operations share this read.
          reread().catch((error: unknown) => {
            logger.warn('cni conf dir cannot be read after a change', {
              confDir,
              error: messageOf(error),
            });
          });
        });
        watcher.on('error', (error) => {
          // The directory went away or cannot be watched: read it before every operation instead.
          logger.warn('cni conf dir watch stopped; reading it before each operation', {
            confDir,
            error: messageOf(error),
          });
          watcher?.close();
          watcher = undefined;
        });
      } catch (error) {
        logger.warn('cni conf dir cannot be watched; reading it before each operation', {
          confDir,
          error: messageOf(error),
        });
      }
    }
  }

  return {
    async current() {
      if (confDir !== undefined && (dirty || (options.watch && watcher === undefined)))
        return reread();
      return reading ?? snapshot;
    },
    reload: reread,
    latest: () => ({ snapshot, stale: dirty || reading !== undefined }),
    view() {
      const describe = (n: NetworkConfig, source: string) => ({
        name: n.name,
        source,
        plugins: n.plugins.map((p) => p.type),
      });
      return {
        networks: [
          describe(snapshot.defaultNetwork, 'default'),
          ...[...snapshot.named.values()].map((n) => describe(n, n.source ?? '')),
        ],
        invalid: snapshot.invalid,
      };
    },
    close() {
      watcher?.close();
      watcher = undefined;
    },
  };
}
