// What the agent runs with when the config file, the environment and the flags say nothing.
// Defaults shared with a library come from it (CNI directories from @allocnet/cni, the
// namespace prefix, concurrency and reconcile mode and interval from @allocnet/alloc-runner, the default
// network's IPAM dir from @allocnet/cni-configurator); the agent's own are written here. The
// config loader, the `allocnet agent` help and the CLI read them from here; the CLI through
// `@allocnet/agent/defaults`, so this module imports only the libraries' own defaults modules.
import {
  DEFAULT_MAX_CONCURRENT,
  DEFAULT_NETNS_PREFIX,
  DEFAULT_RECONCILE_INTERVAL_MS,
  DEFAULT_RECONCILE_MODE,
} from '@allocnet/alloc-runner/defaults';
import { DEFAULT_CONF_DIR } from '@allocnet/cni/defaults';
import { DEFAULT_IPAM_DATA_DIR } from '@allocnet/cni-configurator/defaults';

/** Every default of the configuration but the CNI plugin dirs (@allocnet/cni's `DEFAULT_PLUGIN_DIRS`). */
export const DEFAULTS = {
  dataDir: '/var/lib/allocnet',
  socket: '/run/allocnet/agent.sock',
  confDir: DEFAULT_CONF_DIR,
  cniTimeoutMs: 60_000,
  ipamDataDir: DEFAULT_IPAM_DATA_DIR,
  netnsPrefix: DEFAULT_NETNS_PREFIX,
  region: 'global',
  concurrency: DEFAULT_MAX_CONCURRENT,
  reconcileMode: DEFAULT_RECONCILE_MODE,
  reconcileIntervalMs: DEFAULT_RECONCILE_INTERVAL_MS,
  logLevel: 'info',
  metricsAddress: '127.0.0.1:9464',
  shutdownTimeoutMs: 30_000,
  /**
   * Ports one allocation may ask for: through portmap, 300 ports take 14 s to set up and 1,000
   * never finish within a plugin's timeout; Nomad's own jobs rarely have more than a few dozen.
   */
  maxPorts: 128,
  /** CNI args one allocation may give (the decoder's fixed limit as well). */
  maxCniArgs: 64,
  /** Networks one allocation may have, the primary included (each is a chain of plugin runs). */
  maxAttachments: 8,
} as const;

/**
 * The CNI result cache is `<dataDir>/<this>` unless set: the agent's state stays under its data
 * dir, not in libcni's /var/lib/cni, which other runtimes on the node may use.
 */
export const CNI_CACHE_SUBDIR = 'cni';

/** The CNI server's socket is this name beside the gRPC socket unless set (`/run/allocnet/cni.sock`). */
export const CNI_SOCKET_NAME = 'cni.sock';

/** `allocnet-cni`'s DEL queue is `<dataDir>/<this>` unless set (`/var/lib/allocnet/cni-queue`). */
export const CNI_QUEUE_SUBDIR = 'cni-queue';

/** How often the agent looks for DELs queued after its start's replay. */
export const CNI_QUEUE_REPLAY_INTERVAL_MS = 5000;

/**
 * Made-up leaked allocations the agent runs the reap's code over once after its start
 * (compose.ts `warmReapPath`): enough for V8 to compile the parse, the plan and the encoding
 * before an operator's first reap (measured in docs/performance.md, reap-agent).
 */
export const WARM_REAP_ALLOCATIONS = 2000;
