// What the CNI door answers for a failure: one table from the error's kind to the spec's error
// code and the HTTP status it comes with (docs/cni-plugin.md has it for the plugin's users). Bad
// input is refined by where the field is, as the spec's codes are: an `env.*` field is 7 (invalid
// environment variables), a `cniVersion` allocnet cannot answer in 1 (incompatible version),
// anything else 4 (invalid network config); a body over the limit is HTTP 413. Nothing reads a
// message. A success is the allocation's CNI result: every attachment's interfaces and
// addresses, the primary's (the first delegate's) first.
import { attachmentsOf } from '@allocnet/alloc-runner';
import type { AllocRecord } from '@allocnet/alloc-runner';
import { formatPath, invalidInputOf, messageIn, messageOf, renderProblem } from '@allocnet/base';
import type { ErrorKind, FieldPath } from '@allocnet/base';
import { SPEC_VERSION } from '@allocnet/cni';
import type { CniInterface, CniIp, CniResult, CniRoute } from '@allocnet/cni';
import { CniFault, isCniFault } from './errors.js';
import { requestFieldOf } from './add-spec.js';
import type { CniCall } from './request.js';

/** An answer: the HTTP status and the JSON body (undefined: empty). */
export interface CniAnswer {
  readonly status: number;
  readonly body: Record<string, unknown> | undefined;
}

/** The spec's error code (allocnet's own are 100 and up) and the HTTP status of the answer. */
export interface CniErrorAnswer {
  readonly code: number;
  readonly status: number;
}

/** Each kind of failure as the CNI door answers it. */
export const KIND_ANSWER: Readonly<Record<ErrorKind, CniErrorAnswer>> = {
  // 4: invalid network config (7 and 1 for the fields above).
  invalid: { code: 4, status: 400 },
  // allocnet's: CHECK of an attachment it does not have.
  'not-found': { code: 101, status: 404 },
  // allocnet's: the attachment is set up with a different request (another netns, other ports).
  conflict: { code: 100, status: 409 },
  // 11: try again later (a plugin could not run, the agent is not ready or is stopping).
  unavailable: { code: 11, status: 503 },
  aborted: { code: 11, status: 503 },
  // allocnet's: CHECK found the attachment not as it was set up.
  broken: { code: 102, status: 500 },
  // The data dir is full: the same call works once space is freed (the runtime retries).
  exhausted: { code: 11, status: 503 },
  internal: { code: 999, status: 500 },
};

/** The spec's codes for bad input by where it is, and STATUS's "not available". */
const INCOMPATIBLE_VERSION = 1;
const INVALID_ENV = 7;
const PLUGIN_NOT_AVAILABLE = 50;

/** The code and status of a fault's answer, for the verb it answers (STATUS: 50 when not ready). */
export function answerCode(fault: CniFault, command?: string): CniErrorAnswer {
  const answer = KIND_ANSWER[fault.kind];
  if (fault.code === 'incompatible-version') return { ...answer, code: INCOMPATIBLE_VERSION };
  if (fault.kind === 'invalid' && fault.path?.[0] === 'env')
    return { ...answer, code: INVALID_ENV };
  if (fault.code === 'body-too-large') return { ...answer, status: 413 };
  if (fault.code === 'not-ready' && command === 'STATUS')
    return { ...answer, code: PLUGIN_NOT_AVAILABLE };
  return answer;
}

/** The spec's error object for a fault, in the request's version (the spec's when unknown). */
export function faultAnswer(
  fault: CniFault,
  cniVersion: string | undefined,
  command?: string,
): CniAnswer {
  const { code, status } = answerCode(fault, command);
  return {
    status,
    body: {
      cniVersion: cniVersion ?? SPEC_VERSION,
      code,
      msg: fault.message,
      ...(fault.details === undefined ? {} : { details: fault.details }),
    },
  };
}

/** Any failure of a verb as a fault: bad input names the request's field, the rest keeps its kind. */
export function faultOf(error: unknown, call: CniCall): CniFault {
  if (isCniFault(error)) return error;
  const bad = invalidInputOf(error);
  if (bad === undefined) {
    // A message naming fields (a host port another allocation maps) names them as the request
    // does: `config.runtimeConfig.portMappings[0].hostPort`.
    const spell = (path: FieldPath) => formatPath(requestFieldOf(path, call));
    return new CniFault(messageIn(error, spell), { code: 'failed', cause: error });
  }
  const path = requestFieldOf(bad.path, call);
  // The usual cause: the agent in another mount namespace than the runtime's (its netns bind
  // mounts are invisible then).
  const hint =
    path[1] === 'CNI_NETNS'
      ? " (the agent opens CNI_NETNS in its own mount namespace: it must run in the runtime's; docs/cni-plugin.md)"
      : '';
  return new CniFault(`${formatPath(path)} ${renderProblem(bad.problem)}${hint}`, {
    code: 'invalid-request',
    path,
    problem: bad.problem,
    details: messageOf(error),
    cause: error,
  });
}

/**
 * The CNI result of an allocation, as an ADD answers it: one attachment's result as its chain
 * gave it; several merged in order, the primary's first (a runtime reads the first interface in
 * its sandbox and its addresses as the pod's): the interfaces listed one after the other, each
 * address's `interface` index moved by the interfaces before its attachment's, the routes of all
 * (each once; a secondary's default routes are already gone from its result), the primary's DNS.
 * Undefined when an attachment has no result (set up over gRPC, or by an older agent).
 */
export function cniResultOf(rec: AllocRecord): CniResult | undefined {
  const results: CniResult[] = [];
  for (const view of attachmentsOf(rec)) {
    const result = view.attachment?.result;
    if (result === undefined) return undefined;
    results.push(result);
  }
  const [primary, ...rest] = results;
  if (primary === undefined || rest.length === 0) return primary;
  const interfaces: CniInterface[] = [];
  const ips: CniIp[] = [];
  const routes = new Map<string, CniRoute>();
  for (const result of results) {
    const offset = interfaces.length;
    interfaces.push(...result.interfaces);
    for (const ip of result.ips)
      ips.push(ip.interface === undefined ? ip : { ...ip, interface: ip.interface + offset });
    for (const route of result.routes) routes.set(JSON.stringify(route), route);
  }
  return {
    cniVersion: primary.cniVersion,
    interfaces,
    ips,
    routes: [...routes.values()],
    dns: primary.dns,
  };
}
