// The canonical form of a spec (what means the same written the same way), by which a repeated
// setup is found equal to the one recorded (`specDifferences`) and an attach to one it has
// (`sameAttachment`).
import type { AllocNetworkSpec } from '@allocnet/cni-configurator';
import { configuratorSpecsOf, hasAttachments } from './spec.js';
import type { RunnerSpec } from './spec.js';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function sortKeys(value: Json): Json {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    // fromEntries, not assignment: a CNI arg named `__proto__` stays an own key.
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, sortKeys(value[key] as Json)]),
    );
  }
  return value;
}

function canonicalPort(p: {
  label: string;
  value: number;
  to?: number;
  hostIp?: string;
  protocol?: string;
}): Record<string, Json> {
  return {
    label: p.label,
    value: p.value,
    to: p.to === undefined || p.to < 1 ? p.value : p.to,
    ...(p.hostIp === undefined || p.hostIp === '' ? {} : { hostIp: p.hostIp }),
    ...(p.protocol === undefined ? {} : { protocol: p.protocol }),
  };
}

/**
 * The spec with what means the same written the same way: an empty region, network, port list,
 * legacy network list or args map is left out; a port's `to` below 1 becomes its value; an empty host
 * IP is left out; legacy networks are left out when there are ports (the configurator ignores
 * them then); `interruptedSetup` defaults to `fail`. Keys sorted. Array order is kept: it is the
 * order of the port mappings.
 */
export function canonicalSpec(spec: RunnerSpec): Record<string, Json> {
  const list = hasAttachments(spec) ? configuratorSpecsOf(spec) : undefined;
  // The list form: the spec's ports and CNI args are written on the attachments they go to.
  const ports = list === undefined ? (spec.ports ?? []) : [];
  const firstPorts = list?.[0]?.ports ?? ports;
  const legacy = firstPorts.length > 0 ? [] : (spec.legacyNetworks ?? []);
  const args = list === undefined ? (spec.cniArgs ?? {}) : {};
  const out: Record<string, Json> = {
    allocId: spec.allocId,
    namespace: spec.namespace,
    jobId: spec.jobId,
    groupName: spec.groupName,
    interruptedSetup: spec.interruptedSetup ?? 'fail',
  };
  if (spec.region !== undefined && spec.region !== '') out.region = spec.region;
  if (spec.network !== undefined && spec.network !== '') out.network = spec.network;
  if (ports.length > 0) out.ports = ports.map(canonicalPort);
  if (legacy.length > 0) {
    out.legacyNetworks = legacy.map((n) => {
      const net: Record<string, Json> = {};
      if ((n.reservedPorts ?? []).length > 0)
        net.reservedPorts = (n.reservedPorts ?? []).map(canonicalPort);
      if ((n.dynamicPorts ?? []).length > 0)
        net.dynamicPorts = (n.dynamicPorts ?? []).map(canonicalPort);
      return net;
    });
  }
  if (Object.keys(args).length > 0) out.cniArgs = { ...args };
  if (spec.netnsPath !== undefined) out.netnsPath = spec.netnsPath;
  if (spec.ifName !== undefined) out.ifName = spec.ifName;
  if (spec.origin !== undefined) out.origin = { ...spec.origin };
  if (list !== undefined) out.attachments = list.map(canonicalAttachment);
  return sortKeys(out) as Record<string, Json>;
}

/** Whether two configurator specs of an attachment mean the same (by the canonical form). */
export function sameAttachment(a: AllocNetworkSpec, b: AllocNetworkSpec): boolean {
  const form = (s: AllocNetworkSpec) =>
    JSON.stringify(sortKeys({ ...canonicalSpec(s), ...canonicalAttachment(s, 1) }));
  return form(a) === form(b);
}

/**
 * An attachment as `canonicalSpec` writes it: its configurator spec's own fields, the interface
 * named, `defaultRoute: true` only on an attachment other than the first that carries it.
 */
function canonicalAttachment(s: AllocNetworkSpec, k: number): Record<string, Json> {
  const out: Record<string, Json> = { ifName: s.ifName ?? '' };
  if (s.network !== undefined && s.network !== '') out.network = s.network;
  if ((s.ports ?? []).length > 0) out.ports = (s.ports ?? []).map(canonicalPort);
  if (Object.keys(s.cniArgs ?? {}).length > 0) out.cniArgs = { ...s.cniArgs };
  if ((s.ips ?? []).length > 0) out.ips = [...(s.ips ?? [])];
  if (s.mac !== undefined && s.mac !== '') out.mac = s.mac;
  if (k > 0 && s.defaultRoute === true) out.defaultRoute = true;
  return out;
}

/** The top-level fields on which two specs differ (by their canonical forms), sorted. */
export function specDifferences(a: RunnerSpec, b: RunnerSpec): string[] {
  const ca = canonicalSpec(a);
  const cb = canonicalSpec(b);
  const keys = new Set([...Object.keys(ca), ...Object.keys(cb)]);
  return [...keys].filter((k) => JSON.stringify(ca[k]) !== JSON.stringify(cb[k])).sort();
}
