// An ADD decoded (request.ts) as the runner's spec, and back: the attachment's allocation id
// (the container id, or a hash of it and the ifname), the identity from CNI_ARGS, the runtime's
// port mappings, and its networks (the one `delegate`, or every one of `delegates`: the first
// on CNI_IFNAME, the others on net1…); and for an error about a field of that spec, the field
// of the request it came from.
import { createHash } from 'node:crypto';
import type { FieldPath } from '@allocnet/base';
import type { CniOrigin, RunnerSpec } from '@allocnet/alloc-runner';
import { MAX_ALLOC_ID_LENGTH, RESERVED_ARG_KEYS } from '@allocnet/cni-configurator';
import type { CniCall } from './request.js';

/**
 * The allocation id of an attachment: the container id itself when it can be one and the
 * interface is `eth0` (what Nomad, containerd and podman use: `allocnet alloc status <id>`
 * then takes the id the runtime shows), otherwise `cni-` and a hash of both.
 */
export function attachmentAllocId(containerId: string, ifName: string): string {
  if (ifName === 'eth0' && containerId.length <= MAX_ALLOC_ID_LENGTH) return containerId;
  const hash = createHash('sha256').update(`${containerId}\0${ifName}`).digest('hex');
  return `cni-${hash.slice(0, 40)}`;
}

/** The runtime, as its CNI_ARGS tell (docs/cni-plugin.md). */
export function runtimeOf(args: ReadonlyMap<string, string>): string {
  if (args.has('NOMAD_ALLOC_ID') || args.has('NOMAD_JOB_ID')) return 'nomad';
  if (args.has('K8S_POD_NAMESPACE')) return 'kubernetes';
  if (args.has('K8S_POD_NAME')) return 'podman';
  return 'cni';
}

/** Keys the configurator sets itself from the spec's identity fields. */
const IDENTITY_KEYS = new Set<string>(RESERVED_ARG_KEYS);

/**
 * The interfaces of `delegates`: the first on CNI_IFNAME, the others on net1, net2, … as Multus
 * names them (a name CNI_IFNAME already takes is skipped).
 */
export function delegateIfNames(ifName: string, count: number): string[] {
  const names = [ifName];
  for (let k = 1; names.length < count; k++) if (`net${k}` !== ifName) names.push(`net${k}`);
  return names.slice(0, count);
}

/** The spec's networks: one `delegate` (or the default), or every one of `delegates`. */
function networksOf(call: CniCall): Pick<RunnerSpec, 'network' | 'ifName' | 'attachments'> {
  if (call.delegates.length === 0)
    return {
      ...(call.delegate === undefined ? {} : { network: call.delegate }),
      ifName: call.ifName,
    };
  const names = delegateIfNames(call.ifName, call.delegates.length);
  return {
    attachments: call.delegates.map((network, k) => ({ network, ifName: names[k] ?? call.ifName })),
  };
}

/**
 * An ADD as the runner's spec: the identity from NOMAD_* (Nomad) or K8S_POD_* (containerd,
 * podman), every other CNI_ARGS pair passed to the delegate chain, the runtime's namespace
 * (never made or removed by allocnet), one port per mapping with its protocol. With
 * `delegates`, one attachment per network: the ports ride on the first (the runner puts the
 * top-level ports there), the args go to every one.
 */
export function specOfAdd(call: CniCall): RunnerSpec {
  const args = new Map(call.args);
  const runtime = runtimeOf(args);
  const origin: CniOrigin = { runtime, containerId: call.containerId, ifName: call.ifName };
  const region = args.get('NOMAD_REGION');
  const cniArgs = Object.fromEntries(call.args.filter(([k]) => !IDENTITY_KEYS.has(k)));
  return {
    allocId: attachmentAllocId(call.containerId, call.ifName),
    namespace: args.get('NOMAD_NAMESPACE') ?? args.get('K8S_POD_NAMESPACE') ?? 'default',
    jobId: args.get('NOMAD_JOB_ID') ?? args.get('K8S_POD_NAME') ?? call.containerId,
    groupName: args.get('NOMAD_GROUP_NAME') ?? runtime,
    ...(region === undefined || region === '' ? {} : { region }),
    ...(call.portMappings.length === 0
      ? {}
      : {
          ports: call.portMappings.map((p) => ({
            label: `${p.protocol}/${p.containerPort}`,
            value: p.hostPort,
            to: p.containerPort,
            protocol: p.protocol,
            ...(p.hostIP === '' ? {} : { hostIp: p.hostIP }),
          })),
        }),
    ...(Object.keys(cniArgs).length === 0 ? {} : { cniArgs }),
    ...networksOf(call),
    netnsPath: call.netns,
    origin,
  };
}

/** A port of the spec (`ports[index].sub`) as the runtime's mapping it came from. */
function portMappingField(call: CniCall, index: unknown, sub: unknown): FieldPath {
  const mapping = typeof index === 'number' ? call.portMappings[index] : undefined;
  if (mapping === undefined) return ['config', 'runtimeConfig', 'portMappings'];
  const name = sub === 'hostIp' ? 'hostIP' : sub === 'to' ? 'containerPort' : 'hostPort';
  return ['config', 'runtimeConfig', 'portMappings', mapping.index, name];
}

/** A field of `spec.attachments[k]` as the request's: the k-th delegate, its ports, the args. */
function attachmentField(call: CniCall, at: FieldPath): FieldPath {
  const [, k, field, index, sub] = at;
  if (typeof k !== 'number') return ['config', 'delegates'];
  switch (typeof field === 'string' ? field : '') {
    case 'ports':
      return portMappingField(call, index, sub);
    case 'cniArgs':
      return ['env', 'CNI_ARGS'];
    case 'ifName':
      return k === 0 ? ['env', 'CNI_IFNAME'] : ['config', 'delegates', k];
    default:
      return ['config', 'delegates', k];
  }
}

/**
 * Where a field of the runner's spec came from in the CNI request, for an error about it:
 * the delegate (or the k-th of `delegates`), a port mapping (by its index in the request), the
 * args, the namespace.
 */
export function requestFieldOf(path: FieldPath, call: CniCall): FieldPath {
  const at = path[0] === 'spec' ? path.slice(1) : path;
  const [field, index, sub] = at;
  switch (typeof field === 'string' ? field : '') {
    case 'network':
      return call.delegates.length > 0 ? ['config', 'delegates'] : ['config', 'delegate'];
    case 'attachments':
      return attachmentField(call, at);
    case 'ports':
      return portMappingField(call, index, sub);
    case 'netnsPath':
      return ['env', 'CNI_NETNS'];
    case 'ifName':
      return ['env', 'CNI_IFNAME'];
    case 'allocId':
    case 'origin':
      return ['env', 'CNI_CONTAINERID'];
    case 'namespace':
    case 'jobId':
    case 'groupName':
    case 'region':
    case 'cniArgs':
      return ['env', 'CNI_ARGS'];
    default:
      return ['config'];
  }
}
