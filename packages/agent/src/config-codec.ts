// The config file's keys as io-ts codecs (codec.ts has the small ones they are made of): one
// layer of the configuration — the file, the environment or the flags — decodes with
// `LayerCodec`, every key optional. Also the address checks the listeners use.
import { BlockList, isIP } from 'node:net';
import type * as t from 'io-ts';
import { Bool, Text, failWith, list, oneOf, problem, section, whole } from '@allocnet/cni';
import { AbsolutePath } from './codec.js';
import { show } from './errors.js';
import { LIMITS } from './requests.js';

export type LogLevel = 'error' | 'warn' | 'info' | 'debug';
export type LogFormat = 'json' | 'text';
export type ReconcileMode = 'reap' | 'report';

/** setTimeout's limit: a longer duration would fire at once. */
const MAX_TIMER_MS = 2_147_483_647;
/** sockaddr_un's sun_path holds 108 bytes, the terminating NUL included. */
export const MAX_SOCKET_PATH_BYTES = 107;

const hostPortPattern = /^(?:\[([0-9A-Fa-f:.]+)\]|([0-9.]+)):([0-9]{1,5})$/;

/** `ip:port` or `[ipv6]:port`, port 0–65535, the address an IP literal. */
export function parseHostPort(text: string): { host: string; port: number } | undefined {
  const m = hostPortPattern.exec(text);
  if (m === null) return undefined;
  const host = m[1] ?? m[2] ?? '';
  const port = Number(m[3]);
  if (isIP(host) === 0 || port > 65535) return undefined;
  if (m[1] !== undefined && isIP(host) !== 6) return undefined;
  if (m[2] !== undefined && isIP(host) !== 4) return undefined;
  return { host, port };
}

const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

/** Whether an IP literal is a loopback address (127.0.0.0/8, ::1). */
export function isLoopback(host: string): boolean {
  const family = isIP(host);
  if (family === 0) return false;
  return loopback.check(host, family === 4 ? 'ipv4' : 'ipv6');
}

const TcpAddress = failWith('TcpAddress', (u) => {
  if (typeof u !== 'string') return problem(`should be an address as ip:port, got ${show(u)}`);
  return parseHostPort(u) === undefined
    ? problem(
        `${show(u)} is not ip:port with an IP address (e.g. 10.0.0.5:4647, [::1]:4647; port 0 picks one)`,
      )
    : u;
});

const MetricsAddress = failWith('MetricsAddress', (u) => {
  if (typeof u !== 'string')
    return problem(`should be ip:port on loopback or "off", got ${show(u)}`);
  if (u === 'off') return u;
  const parsed = parseHostPort(u);
  if (parsed === undefined)
    return problem(`${show(u)} is not ip:port with an IP address, or "off" (e.g. 127.0.0.1:9464)`);
  if (!isLoopback(parsed.host))
    return problem(
      `${show(u)} is not a loopback address; metrics are served on loopback only (127.0.0.0/8 or ::1), or "off"`,
    );
  return u;
});

const NetnsPrefix = failWith('NetnsPrefix', (u) => {
  if (typeof u !== 'string') return problem(`should be a string, got ${show(u)}`);
  return /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/.test(u)
    ? u
    : problem(
        `${show(u)} should be 1 to 64 characters of [A-Za-z0-9_.-], starting with a letter or digit`,
      );
});

const Region = failWith('Region', (u) => {
  if (typeof u !== 'string') return problem(`should be a string, got ${show(u)}`);
  return u !== '' && u.length <= 256 && !/[;=\0]/.test(u)
    ? u
    : problem(
        `${show(u)} should be 1 to 256 characters without ";", "=" or NUL (it goes into CNI_ARGS)`,
      );
});

export const LayerCodec = section('config', {
  dataDir: AbsolutePath,
  socket: AbsolutePath,
  tcp: section('tcp', {
    address: TcpAddress,
    tls: section('tls', { cert: AbsolutePath, key: AbsolutePath, clientCa: AbsolutePath }),
    operatorTokenFile: AbsolutePath,
  }),
  cni: section('cni', {
    pluginDirs: list('PluginDirs', AbsolutePath, { max: 32 }),
    confDir: AbsolutePath,
    cacheDir: AbsolutePath,
    timeoutMs: whole('TimeoutMs', 1, MAX_TIMER_MS, ' of milliseconds'),
    socket: AbsolutePath,
    queueDir: AbsolutePath,
  }),
  defaultNetwork: section('defaultNetwork', {
    name: Text,
    bridge: Text,
    subnet: Text,
    ipv6Subnet: Text,
    hairpinMode: Bool,
    mtu: whole('Mtu', 576, 65535),
    ipamDataDir: AbsolutePath,
    adminChain: Text,
  }),
  netnsPrefix: NetnsPrefix,
  ignoreHostIps: Bool,
  ipv6OnIpv4Interfaces: Bool,
  region: Region,
  concurrency: whole('Concurrency', 1, 1024),
  reconcile: section('reconcile', {
    mode: oneOf<ReconcileMode>('ReconcileMode', ['reap', 'report']),
    intervalMs: whole('IntervalMs', 0, MAX_TIMER_MS, ' of milliseconds'),
  }),
  log: section('log', {
    level: oneOf<LogLevel>('LogLevel', ['error', 'warn', 'info', 'debug']),
    format: oneOf<LogFormat>('LogFormat', ['json', 'text']),
  }),
  metrics: section('metrics', { address: MetricsAddress }),
  shutdownTimeoutMs: whole('ShutdownTimeoutMs', 0, MAX_TIMER_MS, ' of milliseconds'),
  readyFile: AbsolutePath,
  // Up to the fixed limits every request is decoded with (requests.ts).
  limits: section('limits', {
    maxPorts: whole('MaxPorts', 0, LIMITS.ports),
    maxCniArgs: whole('MaxCniArgs', 0, LIMITS.cniArgs),
    maxAttachments: whole('MaxAttachments', 1, LIMITS.attachments),
  }),
});

export type Layer = t.TypeOf<typeof LayerCodec>;
