import type { CniArgs } from '@allocnet/cni';
import type { AllocNetworkSpec } from './types.js';

/**
 * The CNI args of an allocation: `IgnoreUnknown=1` (plugins that do not know a key would refuse
 * it otherwise), then the user's args sorted by key (gRPC maps have no order; ADD, CHECK and DEL
 * must get the same text), then the workload identity, which the spec cannot override (its
 * decoder refuses those keys). The same args go to ADD, CHECK and DEL.
 */
export function cniArgs(spec: AllocNetworkSpec, defaultRegion: string): CniArgs {
  const user = Object.entries(spec.cniArgs ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return [
    ['IgnoreUnknown', '1'],
    ...user,
    ['NOMAD_REGION', spec.region === undefined || spec.region === '' ? defaultRegion : spec.region],
    ['NOMAD_NAMESPACE', spec.namespace],
    ['NOMAD_JOB_ID', spec.jobId],
    ['NOMAD_GROUP_NAME', spec.groupName],
    ['NOMAD_ALLOC_ID', spec.allocId],
  ];
}
