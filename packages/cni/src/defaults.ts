// Where CNI's files are when nobody says otherwise: libcni's and the plugins' conventional
// directories, which the runtime, the agent and the CLI default to.

/** Where plugins are looked for by default: CNI's, then Debian's and Fedora's package dirs. */
export const DEFAULT_PLUGIN_DIRS: readonly string[] = [
  '/opt/cni/bin',
  '/usr/libexec/cni',
  '/usr/lib/cni',
];

/** Network configurations (`.conf`, `.conflist`, `.json`), as libcni's ConfFiles reads them. */
export const DEFAULT_CONF_DIR = '/etc/cni/net.d';

/** The result cache: libcni's `CacheDir` default (the runtime's `cacheDir` default too). */
export const DEFAULT_CACHE_DIR = '/var/lib/cni';
