// The agent's configuration: a file (JSON or YAML), then ALLOCNET_* environment variables, then
// command-line flags, each layer decoded with io-ts on its own (so an error names the key and
// where the value came from), merged key by key, then checked as a whole and given defaults.
// The keys' codecs are in config-codec.ts, the environment variables and flags in settings.ts,
// the defaults in defaults.ts.
import { readFile } from 'node:fs/promises';
import { extname, posix } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { formatPath, invalidInputOf, renderProblem } from '@allocnet/base';
import { DEFAULT_PLUGIN_DIRS, decode } from '@allocnet/cni';
import { defaultNetworkSettings } from '@allocnet/cni-configurator';
import { LayerCodec, MAX_SOCKET_PATH_BYTES, isLoopback, parseHostPort } from './config-codec.js';
import type { Layer, LogFormat, LogLevel, ReconcileMode } from './config-codec.js';
import { CNI_CACHE_SUBDIR, CNI_QUEUE_SUBDIR, CNI_SOCKET_NAME, DEFAULTS } from './defaults.js';
import { AgentError, messageOf, show } from './errors.js';
import type { AllocLimits } from './requests.js';
import { ENV_SETTINGS, fromText, setPath } from './settings.js';

export type { LogFormat, LogLevel, ReconcileMode } from './config-codec.js';

/** TLS for the TCP listener: the agent's certificate and key, and the CA of client certificates. */
export interface TlsConfig {
  readonly cert: string;
  readonly key: string;
  readonly clientCa: string;
}

export interface TcpConfig {
  /** `ip:port` or `[ipv6]:port`; port 0 picks a free port (reported in the log and ready file). */
  readonly address: string;
  /** Required unless the address is a loopback address. */
  readonly tls?: TlsConfig;
  /** A file holding a bearer token that grants the operator role over TCP. */
  readonly operatorTokenFile?: string;
}

export interface CniSettings {
  /** Searched in order for plugin binaries; also the plugins' CNI_PATH. */
  readonly pluginDirs: readonly string[];
  /** Named networks (`.conf`, `.conflist`, `.json`). */
  readonly confDir: string;
  /** The CNI result cache (libcni's layout). Default `<dataDir>/cni`. */
  readonly cacheDir: string;
  /** Per plugin process. */
  readonly timeoutMs: number;
  /**
   * The CNI server's unix socket, where `allocnet-cni` calls (docs/cni-plugin.md). Default
   * `cni.sock` beside `socket` (`/run/allocnet/cni.sock`).
   */
  readonly socket: string;
  /**
   * Where `allocnet-cni` queues a DEL while the agent is down; replayed before the CNI server
   * turns ready. Default `<dataDir>/cni-queue` (`/var/lib/allocnet/cni-queue`).
   */
  readonly queueDir: string;
}

/** The embedded default bridge network (the configurator's `DefaultNetworkOptions`). */
export interface DefaultNetworkConfig {
  readonly name?: string;
  readonly bridge?: string;
  readonly subnet?: string;
  readonly ipv6Subnet?: string;
  readonly hairpinMode?: boolean;
  readonly mtu?: number;
  /** host-local's data directory. Default `/var/run/cni`. */
  readonly ipamDataDir: string;
  readonly adminChain?: string;
}

/** The agent's whole configuration, every default filled in. Keys as in the config file. */
export interface AgentConfig {
  readonly dataDir: string;
  readonly socket: string;
  readonly tcp?: TcpConfig;
  readonly cni: CniSettings;
  readonly defaultNetwork: DefaultNetworkConfig;
  /** Allocation namespaces are `<netnsPrefix><allocId>`; no other program may use the prefix. */
  readonly netnsPrefix: string;
  readonly ignoreHostIps: boolean;
  /** Interfaces of IPv4-only networks keep IPv6 (by default they have none: docs/cni.md). */
  readonly ipv6OnIpv4Interfaces: boolean;
  /** NOMAD_REGION for requests that give none. */
  readonly region: string;
  /** Operations on different allocations at once. */
  readonly concurrency: number;
  readonly reconcile: { readonly mode: ReconcileMode; readonly intervalMs: number };
  readonly log: { readonly level: LogLevel; readonly format: LogFormat };
  /** `ip:port` on loopback, or `off`. */
  readonly metrics: { readonly address: string };
  /** How long SIGTERM waits for in-flight RPCs before cancelling them. */
  readonly shutdownTimeoutMs: number;
  /** Written (JSON: pid, socket, tcp and metrics addresses) once the agent serves; removed at exit. */
  readonly readyFile?: string;
  /**
   * What one allocation may ask for, over gRPC and through the CNI server alike: `maxPorts`
   * (default 128, at most 1024), `maxCniArgs` (default 64, at most 64) and `maxAttachments`
   * (networks, the primary included: default 8, 1 to 64). More is refused before anything runs,
   * naming the field and the key.
   */
  readonly limits: AllocLimits;
}

// ---- layers, merge, resolve -----------------------------------------------------------------

interface SourcedLayer {
  readonly layer: Layer;
  /** Where each leaf key's value came from, by key path. */
  readonly sources: ReadonlyMap<string, string>;
}

function invalid(field: string, problem: string, source: string | undefined): AgentError {
  return new AgentError(
    `config: ${field} ${problem}${source === undefined ? '' : ` (${source})`}`,
    {
      code: 'invalid-config',
      field,
      ...(source === undefined ? {} : { source }),
    },
  );
}

function isMap(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Decodes one layer; `sourceOf(path)` names where the value at `path` came from. */
function decodeLayer(value: unknown, sourceOf: (path: string) => string): SourcedLayer {
  const decoded = decode(LayerCodec, value);
  if (!decoded.ok) {
    const field = decoded.problem.field;
    throw invalid(field === '' ? '(top level)' : field, decoded.problem.problem, sourceOf(field));
  }
  const sources = new Map<string, string>();
  const walk = (node: unknown, at: string) => {
    if (isMap(node))
      for (const [k, v] of Object.entries(node)) walk(v, at === '' ? k : `${at}.${k}`);
    else sources.set(at, sourceOf(at));
  };
  walk(decoded.value, '');
  return { layer: decoded.value, sources };
}

function mergeMaps(
  a: Record<string, unknown>,
  b: Record<string, unknown>,
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a };
  for (const [key, value] of Object.entries(b)) {
    const prev = out[key];
    out[key] = isMap(prev) && isMap(value) ? mergeMaps(prev, value) : value;
  }
  return out;
}

function merge(layers: readonly SourcedLayer[]): SourcedLayer {
  let layer: Record<string, unknown> = {};
  const sources = new Map<string, string>();
  for (const l of layers) {
    layer = mergeMaps(layer, l.layer);
    for (const [k, v] of l.sources) sources.set(k, v);
  }
  return { layer: layer, sources };
}

/** Where the first key under `prefix` that is set came from. */
function sourceUnder(sources: ReadonlyMap<string, string>, prefix: string): string | undefined {
  for (const [k, v] of sources) if (k === prefix || k.startsWith(`${prefix}.`)) return v;
  return undefined;
}

/** The merged layers as a whole configuration: defaults filled, keys checked against each other. */
function resolve(merged: SourcedLayer, stderrIsTTY: boolean): AgentConfig {
  const { layer, sources } = merged;
  const src = (key: string) => sources.get(key);
  const dataDir = layer.dataDir ?? DEFAULTS.dataDir;
  const socket = layer.socket ?? DEFAULTS.socket;
  if (Buffer.byteLength(socket) > MAX_SOCKET_PATH_BYTES)
    throw invalid(
      'socket',
      `${show(socket)} is ${Buffer.byteLength(socket)} bytes long; a unix socket path has at most ${MAX_SOCKET_PATH_BYTES}`,
      src('socket'),
    );

  const cniSocket = layer.cni?.socket ?? posix.join(posix.dirname(socket), CNI_SOCKET_NAME);
  if (Buffer.byteLength(cniSocket) > MAX_SOCKET_PATH_BYTES)
    throw invalid(
      'cni.socket',
      `${show(cniSocket)} is ${Buffer.byteLength(cniSocket)} bytes long; a unix socket path has at most ${MAX_SOCKET_PATH_BYTES}`,
      src('cni.socket') ?? src('socket'),
    );
  if (cniSocket === socket)
    throw invalid(
      'cni.socket',
      `${show(cniSocket)} is also the gRPC socket (socket); give the CNI server a path of its own`,
      src('cni.socket') ?? src('socket'),
    );

  let tcp: TcpConfig | undefined;
  if (layer.tcp !== undefined && Object.keys(layer.tcp).length > 0) {
    const given = layer.tcp;
    if (given.address === undefined)
      throw invalid(
        'tcp.address',
        'is missing, but other tcp keys are set',
        sourceUnder(sources, 'tcp'),
      );
    let tls: TlsConfig | undefined;
    if (given.tls !== undefined && Object.keys(given.tls).length > 0) {
      for (const k of ['cert', 'key', 'clientCa'] as const)
        if (given.tls[k] === undefined)
          throw invalid(
            `tcp.tls.${k}`,
            'is missing: TLS needs cert, key and clientCa (client certificates are required)',
            sourceUnder(sources, 'tcp.tls'),
          );
      tls = given.tls as TlsConfig;
    }
    const host = parseHostPort(given.address)?.host ?? '';
    if (tls === undefined && !isLoopback(host))
      throw invalid(
        'tcp.tls',
        `is missing: a TCP listener on ${given.address}, which is not a loopback address, needs TLS with client certificates`,
        src('tcp.address'),
      );
    tcp = {
      address: given.address,
      ...(tls === undefined ? {} : { tls }),
      ...(given.operatorTokenFile === undefined
        ? {}
        : { operatorTokenFile: given.operatorTokenFile }),
    };
  }

  const defaultNetwork: DefaultNetworkConfig = {
    ...layer.defaultNetwork,
    ipamDataDir: layer.defaultNetwork?.ipamDataDir ?? DEFAULTS.ipamDataDir,
  };
  try {
    defaultNetworkSettings(defaultNetwork);
  } catch (error) {
    const bad = invalidInputOf(error);
    if (bad === undefined) throw error;
    const field = formatPath(bad.path);
    throw invalid(
      field,
      renderProblem(bad.problem),
      src(field) ?? sourceUnder(sources, 'defaultNetwork'),
    );
  }

  const config: AgentConfig = {
    dataDir,
    socket,
    ...(tcp === undefined ? {} : { tcp }),
    cni: {
      pluginDirs: layer.cni?.pluginDirs ?? [...DEFAULT_PLUGIN_DIRS],
      confDir: layer.cni?.confDir ?? DEFAULTS.confDir,
      cacheDir: layer.cni?.cacheDir ?? posix.join(dataDir, CNI_CACHE_SUBDIR),
      timeoutMs: layer.cni?.timeoutMs ?? DEFAULTS.cniTimeoutMs,
      socket: cniSocket,
      queueDir: layer.cni?.queueDir ?? posix.join(dataDir, CNI_QUEUE_SUBDIR),
    },
    defaultNetwork,
    netnsPrefix: layer.netnsPrefix ?? DEFAULTS.netnsPrefix,
    ignoreHostIps: layer.ignoreHostIps ?? false,
    ipv6OnIpv4Interfaces: layer.ipv6OnIpv4Interfaces ?? false,
    region: layer.region ?? DEFAULTS.region,
    concurrency: layer.concurrency ?? DEFAULTS.concurrency,
    reconcile: {
      mode: layer.reconcile?.mode ?? DEFAULTS.reconcileMode,
      intervalMs: layer.reconcile?.intervalMs ?? DEFAULTS.reconcileIntervalMs,
    },
    log: {
      level: layer.log?.level ?? DEFAULTS.logLevel,
      format: layer.log?.format ?? (stderrIsTTY ? 'text' : 'json'),
    },
    metrics: { address: layer.metrics?.address ?? DEFAULTS.metricsAddress },
    shutdownTimeoutMs: layer.shutdownTimeoutMs ?? DEFAULTS.shutdownTimeoutMs,
    ...(layer.readyFile === undefined ? {} : { readyFile: layer.readyFile }),
    limits: {
      maxPorts: layer.limits?.maxPorts ?? DEFAULTS.maxPorts,
      maxCniArgs: layer.limits?.maxCniArgs ?? DEFAULTS.maxCniArgs,
      maxAttachments: layer.limits?.maxAttachments ?? DEFAULTS.maxAttachments,
    },
  };
  return config;
}

/** Flags by their long name without dashes (`data-dir`); repeatable ones as lists. */
export type AgentFlags = Readonly<Record<string, string | readonly string[] | undefined>>;

export interface LoadAgentConfigOptions {
  /** The config file (JSON when it ends in `.json`, YAML otherwise). */
  readonly file?: string | undefined;
  /** Usually process.env; only the ALLOCNET_* variables of ENV_SETTINGS are read. */
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly flags?: AgentFlags;
  /** Picks the default log format: text for a terminal, JSON lines otherwise. Default false. */
  readonly stderrIsTTY?: boolean;
}

async function fileLayer(file: string): Promise<SourcedLayer> {
  const source = `file ${file}`;
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new AgentError(`config: file ${show(file)} cannot be read: ${messageOf(error)}`, {
      code: 'invalid-config',
      source,
      cause: error,
    });
  }
  let value: unknown;
  const json = extname(file) === '.json';
  try {
    value = json ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    throw new AgentError(
      `config: file ${show(file)} is not valid ${json ? 'JSON' : 'YAML'}: ${messageOf(error)}`,
      { code: 'invalid-config', source, cause: error },
    );
  }
  // An empty YAML file is null: no settings.
  return decodeLayer(value ?? {}, () => source);
}

function envLayer(env: Readonly<Record<string, string | undefined>>): SourcedLayer {
  const raw: Record<string, unknown> = {};
  const byKey = new Map<string, string>();
  for (const s of ENV_SETTINGS) {
    const value = env[s.env];
    // An empty variable counts as unset, as most tools read them.
    if (value === undefined || value === '') continue;
    setPath(raw, s.key.split('.'), fromText(s.kind, value));
    byKey.set(s.key, `env ${s.env}`);
  }
  return decodeLayer(raw, (path) => byKey.get(keyOf(path)) ?? 'env');
}

function flagLayer(flags: AgentFlags): SourcedLayer {
  const raw: Record<string, unknown> = {};
  const byKey = new Map<string, string>();
  for (const [flag, value] of Object.entries(flags)) {
    if (value === undefined) continue;
    const s = ENV_SETTINGS.find((e) => e.flag === flag);
    if (s === undefined)
      throw new AgentError(`config: --${flag} is not a flag of the agent`, {
        code: 'invalid-config',
        source: `flag --${flag}`,
      });
    setPath(raw, s.key.split('.'), fromText(s.kind, value));
    byKey.set(s.key, `flag --${flag}`);
  }
  return decodeLayer(raw, (path) => byKey.get(keyOf(path)) ?? 'flags');
}

/** The setting's key for a decode path (`cni.pluginDirs[2]` → `cni.pluginDirs`). */
function keyOf(path: string): string {
  return path.replace(/\[[0-9]+\]$/, '');
}

/**
 * Reads the configuration: the file, then the environment, then the flags, each over the one
 * before, key by key. Throws `AgentError` (`invalid-config`) naming the key and its source:
 * `config: cni.timeoutMs should be a whole number of milliseconds from 1 to 2147483647, got "soon" (env ALLOCNET_CNI_TIMEOUT_MS)`.
 */
export async function loadAgentConfig(options: LoadAgentConfigOptions): Promise<AgentConfig> {
  const layers: SourcedLayer[] = [];
  if (options.file !== undefined) layers.push(await fileLayer(options.file));
  layers.push(envLayer(options.env));
  layers.push(flagLayer(options.flags ?? {}));
  return resolve(merge(layers), options.stderrIsTTY ?? false);
}

/**
 * Checks a configuration built in code (what `startAgent` is given) as a file's would be, and
 * fills what is missing: `source` names it in errors.
 */
export function checkAgentConfig(value: unknown, source = 'the given config'): AgentConfig {
  return resolve(
    decodeLayer(value, () => source),
    false,
  );
}
