// The settings that also come from ALLOCNET_* environment variables and (the common ones) from
// flags of `allocnet agent`, and how their text becomes a config layer's values.

export type Kind = 'text' | 'int' | 'bool' | 'list';

/** One setting that also comes from the environment and (for the common ones) a flag. */
export interface EnvSetting {
  /** The key path in the config file. */
  readonly key: string;
  readonly env: string;
  /** The long flag, without dashes. */
  readonly flag?: string;
  readonly kind: Kind;
}

/** Every environment variable (and flag) the agent reads, with the key it sets. */
export const ENV_SETTINGS: readonly EnvSetting[] = [
  { key: 'dataDir', env: 'ALLOCNET_DATA_DIR', flag: 'data-dir', kind: 'text' },
  { key: 'socket', env: 'ALLOCNET_SOCKET', flag: 'socket', kind: 'text' },
  { key: 'tcp.address', env: 'ALLOCNET_TCP_ADDRESS', flag: 'tcp-address', kind: 'text' },
  { key: 'tcp.tls.cert', env: 'ALLOCNET_TLS_CERT', kind: 'text' },
  { key: 'tcp.tls.key', env: 'ALLOCNET_TLS_KEY', kind: 'text' },
  { key: 'tcp.tls.clientCa', env: 'ALLOCNET_TLS_CLIENT_CA', kind: 'text' },
  { key: 'tcp.operatorTokenFile', env: 'ALLOCNET_OPERATOR_TOKEN_FILE', kind: 'text' },
  { key: 'cni.pluginDirs', env: 'ALLOCNET_PLUGIN_DIRS', flag: 'plugin-dir', kind: 'list' },
  { key: 'cni.confDir', env: 'ALLOCNET_CONF_DIR', flag: 'conf-dir', kind: 'text' },
  { key: 'cni.cacheDir', env: 'ALLOCNET_CACHE_DIR', flag: 'cache-dir', kind: 'text' },
  { key: 'cni.timeoutMs', env: 'ALLOCNET_CNI_TIMEOUT_MS', kind: 'int' },
  { key: 'cni.socket', env: 'ALLOCNET_CNI_SOCKET', flag: 'cni-socket', kind: 'text' },
  { key: 'cni.queueDir', env: 'ALLOCNET_CNI_QUEUE_DIR', flag: 'cni-queue-dir', kind: 'text' },
  {
    key: 'defaultNetwork.ipamDataDir',
    env: 'ALLOCNET_IPAM_DATA_DIR',
    flag: 'ipam-data-dir',
    kind: 'text',
  },
  { key: 'netnsPrefix', env: 'ALLOCNET_NETNS_PREFIX', flag: 'netns-prefix', kind: 'text' },
  { key: 'ignoreHostIps', env: 'ALLOCNET_IGNORE_HOST_IPS', kind: 'bool' },
  { key: 'ipv6OnIpv4Interfaces', env: 'ALLOCNET_IPV6_ON_IPV4_INTERFACES', kind: 'bool' },
  { key: 'region', env: 'ALLOCNET_REGION', kind: 'text' },
  { key: 'concurrency', env: 'ALLOCNET_CONCURRENCY', kind: 'int' },
  { key: 'reconcile.mode', env: 'ALLOCNET_RECONCILE_MODE', kind: 'text' },
  { key: 'reconcile.intervalMs', env: 'ALLOCNET_RECONCILE_INTERVAL_MS', kind: 'int' },
  { key: 'log.level', env: 'ALLOCNET_LOG_LEVEL', flag: 'log-level', kind: 'text' },
  { key: 'log.format', env: 'ALLOCNET_LOG_FORMAT', flag: 'log-format', kind: 'text' },
  {
    key: 'metrics.address',
    env: 'ALLOCNET_METRICS_ADDRESS',
    flag: 'metrics-address',
    kind: 'text',
  },
  { key: 'shutdownTimeoutMs', env: 'ALLOCNET_SHUTDOWN_TIMEOUT_MS', kind: 'int' },
  { key: 'readyFile', env: 'ALLOCNET_READY_FILE', flag: 'ready-file', kind: 'text' },
  { key: 'limits.maxPorts', env: 'ALLOCNET_MAX_PORTS', flag: 'max-ports', kind: 'int' },
  { key: 'limits.maxCniArgs', env: 'ALLOCNET_MAX_CNI_ARGS', flag: 'max-cni-args', kind: 'int' },
  {
    key: 'limits.maxAttachments',
    env: 'ALLOCNET_MAX_ATTACHMENTS',
    flag: 'max-attachments',
    kind: 'int',
  },
];

/** The environment variable that names the config file when `--config` is not given. */
export const CONFIG_ENV = 'ALLOCNET_CONFIG';

/** A value from text: numbers and booleans parsed when they look right, else kept for the codec to refuse. */
export function fromText(kind: Kind, value: string | readonly string[]): unknown {
  if (kind === 'list') return typeof value === 'string' ? value.split(':') : [...value];
  const text = typeof value === 'string' ? value : value.join(':');
  if (kind === 'int') return /^-?[0-9]+$/.test(text) ? Number(text) : text;
  if (kind === 'bool') {
    if (['true', '1', 'yes'].includes(text)) return true;
    if (['false', '0', 'no'].includes(text)) return false;
  }
  return text;
}

export function setPath(
  target: Record<string, unknown>,
  path: readonly string[],
  value: unknown,
): void {
  let at = target;
  for (const key of path.slice(0, -1)) {
    const next = at[key];
    if (typeof next === 'object' && next !== null) at = next as Record<string, unknown>;
    else {
      const made: Record<string, unknown> = {};
      at[key] = made;
      at = made;
    }
  }
  at[path[path.length - 1] ?? ''] = value;
}
