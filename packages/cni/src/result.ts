import ipaddr from 'ipaddr.js';
import * as t from 'io-ts';
import { formatPath, show } from '@allocnet/base';
import type { FieldPath } from '@allocnet/base';
import { decode } from './decode.js';
import { CniError } from './errors.js';
import { atLeast, isVersion } from './version.js';

export interface CniInterface {
  readonly name: string;
  readonly mac?: string;
  readonly sandbox?: string;
  readonly mtu?: number;
  readonly socketPath?: string;
  readonly pciID?: string;
}

export interface CniIp {
  /** CIDR with the host bits kept, e.g. `172.26.64.2/20`. */
  readonly address: string;
  readonly gateway?: string;
  /** Index into `interfaces`. */
  readonly interface?: number;
}

export interface CniRoute {
  readonly dst: string;
  readonly gw?: string;
  readonly mtu?: number;
  readonly advmss?: number;
  readonly priority?: number;
  readonly table?: number;
  readonly scope?: number;
}

export interface CniDns {
  readonly nameservers?: readonly string[];
  readonly domain?: string;
  readonly search?: readonly string[];
  readonly options?: readonly string[];
}

/**
 * A plugin's result in one shape whatever version it came in (1.x's, with `ips[].version` gone):
 * interfaces as an ordered list, in the plugin's order.
 */
export interface CniResult {
  /** The version the plugin labelled its output with. */
  readonly cniVersion: string;
  readonly interfaces: readonly CniInterface[];
  readonly ips: readonly CniIp[];
  readonly routes: readonly CniRoute[];
  readonly dns: CniDns;
}

const Interface = t.intersection([
  t.type({ name: t.string }),
  t.partial({
    mac: t.string,
    sandbox: t.string,
    mtu: t.number,
    socketPath: t.string,
    pciID: t.string,
  }),
]);
const Ip = t.intersection([
  t.type({ address: t.string }),
  t.partial({ version: t.string, gateway: t.string, interface: t.number }),
]);
const Route = t.intersection([
  t.type({ dst: t.string }),
  t.partial({
    gw: t.string,
    mtu: t.number,
    advmss: t.number,
    priority: t.number,
    table: t.number,
    scope: t.number,
  }),
]);
const Dns = t.partial({
  nameservers: t.array(t.string),
  domain: t.string,
  search: t.array(t.string),
  options: t.array(t.string),
});
// Lenient: every list optional, `null` read as missing, unknown fields ignored, and the shape read
// whatever the label says (the Debian loopback plugin labels 1.x-shaped output "0.4.0").
const ResultShape = t.partial({
  cniVersion: t.string,
  interfaces: t.union([t.array(Interface), t.null]),
  ips: t.union([t.array(Ip), t.null]),
  routes: t.union([t.array(Route), t.null]),
  dns: t.union([Dns, t.null]),
});

/**
 * The `invalid-result` error for a result that cannot be read, naming the field (`[]` for the
 * value itself). Its message is `<field> <problem>` unless `message` says otherwise.
 */
function invalidResult(
  path: FieldPath,
  problem: string,
  message = path.length === 0 ? problem : `${formatPath(path)} ${problem}`,
): CniError {
  return new CniError(message, { code: 'invalid-result', msg: message, path, problem: [problem] });
}

function isCidr(text: string): boolean {
  try {
    ipaddr.parseCIDR(text);
    return true;
  } catch {
    // parseCIDR throws for anything that is not a CIDR; that is the answer.
    return false;
  }
}

/** Drops keys whose value is undefined, so optional fields are absent rather than undefined. */
function strip<T>(value: { readonly [K in keyof T]: T[K] | undefined }): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

/**
 * Reads a result (a plugin's stdout, parsed, or a cached one). `fallbackVersion` labels a result
 * that has no `cniVersion`. Checks addresses, gateways and `ips[].interface` indices; throws an
 * `invalid-result` `CniError` naming the field (`field` is `''` for a value that is not an object).
 */
export function parseResult(value: unknown, fallbackVersion: string): CniResult {
  if (
    typeof value === 'object' &&
    value !== null &&
    ('ip4' in value || 'ip6' in value) &&
    !('ips' in value)
  ) {
    const problem = 'is a 0.1.0/0.2.0 result (ip4/ip6), which this runtime does not read';
    throw invalidResult(['ip4'], problem, problem);
  }
  // A value that is no object at all has no field to name: say so in a few words, rather than
  // with the whole shape io-ts would spell (`null` is read as an empty result).
  if (value !== null && value !== undefined && (typeof value !== 'object' || Array.isArray(value)))
    throw invalidResult([], `is not a JSON object, got ${show(value)}`);
  const decoded = decode(ResultShape, value ?? {});
  if (!decoded.ok) throw invalidResult(decoded.problem.path, decoded.problem.problem);
  const r = decoded.value;
  const cniVersion =
    r.cniVersion !== undefined && r.cniVersion !== '' ? r.cniVersion : fallbackVersion;
  if (!isVersion(cniVersion))
    throw invalidResult(['cniVersion'], `${JSON.stringify(cniVersion)} is not a version`);
  // Only the fields of the spec are kept (libcni's types do the same): an unknown field is not
  // passed on in prevResult or the cache, where one nested thousands deep would make
  // JSON.stringify throw.
  const interfaces = (r.interfaces ?? []).map((i) =>
    strip<CniInterface>({
      name: i.name,
      mac: i.mac,
      sandbox: i.sandbox,
      mtu: i.mtu,
      socketPath: i.socketPath,
      pciID: i.pciID,
    }),
  );
  const ips = (r.ips ?? []).map((ip, i) => {
    if (!isCidr(ip.address))
      throw invalidResult(['ips', i, 'address'], `${JSON.stringify(ip.address)} is not a CIDR`);
    if (ip.gateway !== undefined && !ipaddr.isValid(ip.gateway))
      throw invalidResult(['ips', i, 'gateway'], `${JSON.stringify(ip.gateway)} is not an address`);
    if (
      ip.interface !== undefined &&
      !(Number.isInteger(ip.interface) && ip.interface >= 0 && ip.interface < interfaces.length)
    ) {
      throw invalidResult(
        ['ips', i, 'interface'],
        `${ip.interface} is not an index into interfaces (${interfaces.length} of them)`,
      );
    }
    return strip<CniIp>({ address: ip.address, gateway: ip.gateway, interface: ip.interface });
  });
  const routes = (r.routes ?? []).map((route, i) => {
    if (!isCidr(route.dst))
      throw invalidResult(['routes', i, 'dst'], `${JSON.stringify(route.dst)} is not a CIDR`);
    if (route.gw !== undefined && !ipaddr.isValid(route.gw))
      throw invalidResult(['routes', i, 'gw'], `${JSON.stringify(route.gw)} is not an address`);
    return strip<CniRoute>({
      dst: route.dst,
      gw: route.gw,
      mtu: route.mtu,
      advmss: route.advmss,
      priority: route.priority,
      table: route.table,
      scope: route.scope,
    });
  });
  const dns = r.dns ?? {};
  return {
    cniVersion,
    interfaces,
    ips,
    routes,
    dns: strip<CniDns>({
      nameservers: dns.nameservers,
      domain: dns.domain,
      search: dns.search,
      options: dns.options,
    }),
  };
}

/** "4" or "6", as 0.3.x/0.4.0 results label an address (an IPv4-mapped IPv6 address counts as 4). */
export function ipFamily(address: string): '4' | '6' {
  const [ip] = ipaddr.parseCIDR(address);
  if (ip.kind() === 'ipv4') return '4';
  return (ip as ipaddr.IPv6).isIPv4MappedAddress() ? '4' : '6';
}

/**
 * The JSON of a result at a spec version (0.3.0 … 1.1.0), as a plugin at that version expects it
 * in `prevResult`: 0.3.x/0.4.0 get `ips[].version` and lose the interface fields 1.1 added; 1.x
 * drops an empty `dns`.
 */
export function encodeResult(result: CniResult, cniVersion: string): Record<string, unknown> {
  const v1 = atLeast(cniVersion, '1.0.0');
  const interfaces = result.interfaces.map((i) =>
    v1 ? { ...i } : strip<CniInterface>({ name: i.name, mac: i.mac, sandbox: i.sandbox }),
  );
  const ips = result.ips.map((ip) => (v1 ? { ...ip } : { version: ipFamily(ip.address), ...ip }));
  const hasDns = Object.keys(result.dns).length > 0;
  return {
    cniVersion,
    ...(interfaces.length > 0 ? { interfaces } : {}),
    ...(ips.length > 0 ? { ips } : {}),
    ...(result.routes.length > 0 ? { routes: result.routes.map((r) => ({ ...r })) } : {}),
    ...(hasDns || !v1 ? { dns: { ...result.dns } } : {}),
  };
}
