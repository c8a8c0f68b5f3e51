// The native CHECK of loopback and bridge (with host-local): what their CHECK verifies in
// containernetworking/plugins 1.1.1, read from the kernel (rtnetlink, route-reader.ts) and
// host-local's files instead of exec'ing them. Pure comparisons over what was read; check.ts
// does the reading. What each plugin's CHECK verifies (docs/cni.md, "CHECK"):
// - loopback: `lo` in the sandbox exists and is up;
// - host-local (bridge's IPAM CHECK, first): a file of its data dir whose trimmed text is
//   `<container id>\r\n<ifname>` or `<container id>`, whatever address it is named by;
// - bridge: with the cached ADD result as prevResult: the result's bridge (by the config's name)
//   exists here, is a bridge, its MAC is the result's, its promiscuous flag is `promiscMode`; the
//   result's interface named `ifName` has the sandbox `netns`, exists there, is a veth, its MAC is
//   the result's; every other interface of the result exists here, outside a sandbox, and one of
//   them is the veth whose peer is that interface, enslaved to the bridge, with the result's MAC;
//   in the sandbox every result IP is on `ifName` (address and prefix) and the main table has a
//   route to its subnet; every result route is in the main table (a default route: any default
//   route of its family; another: same destination and gateway).
// Anything else in the config (another IPAM, a key listed nowhere below, CNI_ARGS `IP`) makes
// the plugin run its own CHECK, as before.
import { join } from 'node:path';
import ipaddr from 'ipaddr.js';
import type { CniArgs, CniResult, NetworkConfig, PluginConfig } from '@allocnet/cni';
import { HOST_LOCAL_DATA_DIR } from './networks.js';
import type { NamespaceState } from './route-reader.js';
import { IFF_PROMISC, IFF_UP, RTM_F_CLONED, RT_TABLE_MAIN } from './rtnetlink.js';
import type { NetLink } from './rtnetlink.js';

/** A plugin whose CHECK is done here. */
export type NativePlugin =
  | { readonly type: 'loopback' }
  | {
      readonly type: 'bridge';
      readonly bridge: string;
      readonly promiscMode: boolean;
      /** host-local's directory of this network. */
      readonly ipamDir: string;
    };

const LOOPBACK_KEYS = new Set(['type', 'name', 'cniVersion']);
/** bridge's keys whose values its CHECK ignores or reads here (1.1.1's NetConf). */
const BRIDGE_KEYS = new Set([
  'type',
  'name',
  'cniVersion',
  'bridge',
  'isGateway',
  'isDefaultGateway',
  'forceAddress',
  'ipMasq',
  'mtu',
  'hairpinMode',
  'promiscMode',
  'ipam',
  'args',
]);
const HOST_LOCAL_KEYS = new Set([
  'type',
  'subnet',
  'rangeStart',
  'rangeEnd',
  'gateway',
  'ranges',
  'routes',
  'dataDir',
]);
/** bridge's default bridge name. */
const DEFAULT_BRIDGE = 'cni0';

function isRecord(value: unknown): value is Readonly<Record<string, unknown>> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function onlyKeys(raw: Readonly<Record<string, unknown>>, known: ReadonlySet<string>): boolean {
  return Object.keys(raw).every((k) => known.has(k));
}

/**
 * The native form of `plugin` of `network`, or undefined when the native CHECK does not know
 * something of its config (the plugin then runs its own CHECK).
 */
export function nativePluginOf(
  plugin: PluginConfig,
  network: NetworkConfig,
): NativePlugin | undefined {
  const raw = plugin.raw;
  if (plugin.type === 'loopback')
    return onlyKeys(raw, LOOPBACK_KEYS) ? { type: 'loopback' } : undefined;
  if (plugin.type !== 'bridge' || !onlyKeys(raw, BRIDGE_KEYS)) return undefined;
  const { bridge, promiscMode } = raw;
  if (bridge !== undefined && typeof bridge !== 'string') return undefined;
  if (promiscMode !== undefined && typeof promiscMode !== 'boolean') return undefined;
  const ipamDir = hostLocalDirOf(plugin, network);
  if (ipamDir === undefined) return undefined;
  return {
    type: 'bridge',
    bridge: bridge === undefined || bridge === '' ? DEFAULT_BRIDGE : bridge,
    promiscMode: promiscMode ?? false,
    ipamDir,
  };
}

/**
 * The directory of `plugin`'s host-local IPAM in `network` when that IPAM has known keys only;
 * undefined for another IPAM or one with a key listed nowhere here.
 */
export function hostLocalDirOf(plugin: PluginConfig, network: NetworkConfig): string | undefined {
  const { ipam } = plugin.raw;
  if (!isRecord(ipam) || ipam.type !== 'host-local' || !onlyKeys(ipam, HOST_LOCAL_KEYS))
    return undefined;
  const dataDir = ipam.dataDir ?? HOST_LOCAL_DATA_DIR;
  if (typeof dataDir !== 'string') return undefined;
  return join(dataDir === '' ? HOST_LOCAL_DATA_DIR : dataDir, network.name);
}

/** Whether CNI_ARGS ask host-local for an address (its CHECK then validates it: the plugin's). */
export function argsNeedPlugin(args: CniArgs): boolean {
  return args.some(([key]) => key === 'IP');
}

/** loopback's CHECK: what is wrong with `lo` in the sandbox, or undefined. */
export function loopbackProblem(sandbox: NamespaceState): string | undefined {
  const lo = sandbox.links.find((l) => l.name === 'lo');
  if (lo === undefined) return 'loopback: the sandbox has no interface "lo"';
  if ((lo.flags & IFF_UP) === 0) return 'loopback: interface "lo" is down in the sandbox';
  return undefined;
}

/** host-local's reservation texts that stand for `containerId` on `ifName` (its FindByID). */
export function reservationTexts(containerId: string, ifName: string): readonly string[] {
  const id = containerId.trim();
  return [`${id}\r\n${ifName}`, id];
}

/** What bridge's CHECK reads, already read. */
export interface BridgeState {
  readonly plugin: Extract<NativePlugin, { type: 'bridge' }>;
  readonly result: CniResult;
  readonly netns: string;
  readonly ifName: string;
  /** Links of the node by name: every name of the result outside `ifName`'s entry. */
  readonly host: ReadonlyMap<string, NetLink>;
  readonly sandbox: NamespaceState;
}

/** The names of the result's interfaces that bridge's CHECK looks up on the node. */
export function hostNamesOf(result: CniResult, ifName: string, netns: string): string[] {
  const container = result.interfaces.find((i) => i.name === ifName && i.sandbox === netns);
  return [...new Set(result.interfaces.map((i) => i.name).filter((n) => n !== container?.name))];
}

/** A link of `where` looked up by name the way validateInterface does. */
function lookUp(
  name: string,
  sandboxed: string | undefined,
  expectInSandbox: boolean,
  links: ReadonlyMap<string, NetLink>,
): NetLink | string {
  if (name === '') return 'bridge: an interface of the result has no name';
  const link = links.get(name);
  if (link === undefined)
    return `bridge: interface "${name}" is not there${expectInSandbox ? ' in the sandbox' : ' on the node'}`;
  if (expectInSandbox && (sandboxed ?? '') === '')
    return `bridge: interface "${name}" should be in a sandbox, the result says it is not`;
  if (!expectInSandbox && (sandboxed ?? '') !== '')
    return `bridge: interface "${name}" should not be in a sandbox, the result says "${sandboxed}"`;
  return link;
}

function macProblem(name: string, want: string | undefined, link: NetLink): string | undefined {
  if (want === undefined || want === '' || want === link.mac) return undefined;
  return `bridge: interface "${name}" has MAC ${link.mac ?? 'none'}, the result says ${want}`;
}

/** bridge's CHECK (after host-local's): what is wrong, or undefined. */
export function bridgeProblem(state: BridgeState): string | undefined {
  const { plugin, result, netns, ifName, host, sandbox } = state;
  const bridgeIf = result.interfaces.find((i) => i.name === plugin.bridge);
  const containerIf = result.interfaces.find((i) => i.name === ifName && i.sandbox === netns);
  const br = lookUp(bridgeIf?.name ?? '', bridgeIf?.sandbox, false, host);
  if (typeof br === 'string') return br;
  if (br.kind !== 'bridge') return `bridge: interface "${br.name}" is not a bridge`;
  const brMac = macProblem(br.name, bridgeIf?.mac, br);
  if (brMac !== undefined) return brMac;
  if (((br.flags & IFF_PROMISC) !== 0) !== plugin.promiscMode)
    return `bridge: bridge "${br.name}" is ${plugin.promiscMode ? 'not ' : ''}in promiscuous mode, its config says promiscMode ${String(plugin.promiscMode)}`;
  if (containerIf?.sandbox !== netns)
    return `bridge: the result has no interface "${ifName}" in the sandbox "${netns}"`;
  const inSandbox = new Map(sandbox.links.map((l) => [l.name, l]));
  const cont = lookUp(containerIf.name, containerIf.sandbox, true, inSandbox);
  if (typeof cont === 'string') return cont;
  if (cont.kind !== 'veth') return `bridge: interface "${cont.name}" in the sandbox is not a veth`;
  const contMac = macProblem(cont.name, containerIf.mac, cont);
  if (contMac !== undefined) return contMac;
  let vethFound = false;
  for (const intf of result.interfaces) {
    if (intf.name === br.name || intf.name === cont.name) continue;
    const veth = lookUp(intf.name, intf.sandbox, false, host);
    if (typeof veth === 'string') return veth;
    if (veth.kind !== 'veth') continue;
    if (veth.index !== cont.peer || veth.peer !== cont.index || veth.master !== br.index) continue;
    const vethMac = macProblem(veth.name, intf.mac, veth);
    if (vethMac !== undefined) return vethMac;
    vethFound = true;
    break;
  }
  if (!vethFound)
    return `bridge: no veth of the result on the node is the peer of "${ifName}" enslaved to bridge "${br.name}"`;
  return addressesProblem(result, ifName, cont, sandbox) ?? routesProblem(result, sandbox);
}

function sameIp(a: string, b: string): boolean {
  return ipaddr.parse(a).toString() === ipaddr.parse(b).toString();
}

function mainRoutes(sandbox: NamespaceState, family: 'ipv4' | 'ipv6') {
  return sandbox.routes.filter(
    (r) => r.family === family && r.table === RT_TABLE_MAIN && (r.flags & RTM_F_CLONED) === 0,
  );
}

/** ValidateExpectedInterfaceIPs: each result IP on `ifName`, and a route to its subnet. */
function addressesProblem(
  result: CniResult,
  ifName: string,
  link: NetLink,
  sandbox: NamespaceState,
): string | undefined {
  for (const { address } of result.ips) {
    const [ip = '', length = ''] = address.split('/');
    const prefixLength = Number(length);
    const on = sandbox.addresses.some(
      (a) => a.index === link.index && a.prefixLength === prefixLength && sameIp(a.ip, ip),
    );
    if (!on) return `bridge: address ${address} is not on "${ifName}" in the sandbox`;
    const parsed = ipaddr.parse(ip);
    const family = parsed.kind() === 'ipv4' ? 'ipv4' : 'ipv6';
    const subnet = ipaddr.parseCIDR(address);
    const network = ipaddr.fromByteArray(
      parsed.toByteArray().map((byte, i) => {
        const bits = Math.max(0, Math.min(8, subnet[1] - i * 8));
        return byte & ((0xff << (8 - bits)) & 0xff);
      }),
    );
    const routed = mainRoutes(sandbox, family).some(
      (r) =>
        r.dst !== undefined &&
        r.dst.prefixLength === prefixLength &&
        sameIp(r.dst.ip, network.toString()),
    );
    if (!routed)
      return `bridge: the sandbox has no route to ${network.toString()}/${prefixLength} (the subnet of ${address})`;
  }
  return undefined;
}

/** ValidateExpectedRoute: each result route in the sandbox's main table. */
function routesProblem(result: CniResult, sandbox: NamespaceState): string | undefined {
  for (const route of result.routes) {
    const [dst, length] = ipaddr.parseCIDR(route.dst);
    const family = dst.kind() === 'ipv4' ? 'ipv4' : 'ipv6';
    const routes = mainRoutes(sandbox, family);
    // A default route: any default route of the family, whatever its gateway (the plugin
    // filters on the destination alone there).
    const found =
      length === 0
        ? routes.some((r) => r.dst === undefined)
        : routes.some(
            (r) =>
              r.dst !== undefined &&
              r.dst.prefixLength === length &&
              sameIp(r.dst.ip, dst.toString()) &&
              (route.gw === undefined
                ? r.gateway === undefined
                : r.gateway !== undefined && sameIp(r.gateway, route.gw)),
          );
    if (!found)
      return `bridge: the sandbox has no route to ${route.dst}${route.gw === undefined ? '' : ` via ${route.gw}`}`;
  }
  return undefined;
}
