// Every request is decoded here before anything uses it: first its shape and sizes with io-ts
// (field names as in the .proto), then the allocation spec with the runner's own decoder (ids,
// CNI_ARGS characters, ports, the agent's `limits`), then what the configurator would only find after the runner had
// recorded an intent and made a namespace (duplicate host ports, an unknown network), so that a
// bad request changes nothing at all. A request's networks (`attachments`, AttachNetwork's
// `attachment`) become the runner's AttachmentSpecs here; request-checks.ts checks their own
// ports and names.
import * as t from 'io-ts';
import { decodeSpec } from '@allocnet/alloc-runner';
import type { AttachmentSpec, RunnerSpec } from '@allocnet/alloc-runner';
import { NAME_PATTERN, decode, failWith, list, problem } from '@allocnet/cni';
import { checkAllocId, portMappings } from '@allocnet/cni-configurator';
import type { NetworkCatalog } from '@allocnet/cni-configurator';
import type {
  AttachNetworkRequest__Output,
  CheckAllocNetworkRequest__Output,
  DetachNetworkRequest__Output,
  ForceCleanupRequest__Output,
  GetAllocNetworkRequest__Output,
  ReapLeaksRequest__Output,
  SetupAllocNetworkRequest__Output,
  TeardownAllocNetworkRequest__Output,
} from '@allocnet/proto';
import { DEFAULTS } from './defaults.js';
import { invalidRequest, show } from './errors.js';
import { protoField } from './status.js';
import { checkNetworksKnown, checkOwnPorts } from './request-checks.js';

/**
 * The agent's caps on one allocation (config `limits.maxPorts`, `limits.maxCniArgs`,
 * `limits.maxAttachments`): the runner's `SpecLimits`, which `decodeSpec` applies for both front
 * doors (this one and the CNI server's). Read off `decodeSpec`, as @allocnet/alloc-runner does not
 * export the type by name.
 */
export type AllocLimits = NonNullable<Parameters<typeof decodeSpec>[1]> & {
  readonly maxAttachments: number;
};

/** The caps when none are given: the agent's defaults. */
export const DEFAULT_LIMITS: AllocLimits = {
  maxPorts: DEFAULTS.maxPorts,
  maxCniArgs: DEFAULTS.maxCniArgs,
  maxAttachments: DEFAULTS.maxAttachments,
};

/**
 * The same limits the configurator applies, so that either check gives the same message; the
 * agent's `limits` (`AllocLimits`) may only lower `ports` and `cniArgs`.
 */
export const LIMITS = {
  allocId: 64,
  field: 256,
  label: 128,
  netnsPath: 4096,
  ports: 1024,
  legacyNetworks: 16,
  cniArgs: 64,
  attachments: 64,
  ips: 16,
  batchSize: 10_000,
} as const;

/** Leaks reaped in one iptables-restore batch when the request gives 0. */
export const DEFAULT_REAP_BATCH = 500;

function text(name: string, max: number) {
  return failWith(name, (u) => {
    if (typeof u !== 'string') return problem(`should be a string, got ${show(u)}`);
    return u.length > max ? problem(`is ${u.length} characters long; at most ${max}`) : u;
  });
}

function integer(name: string) {
  return failWith(name, (u) =>
    typeof u === 'number' && Number.isInteger(u)
      ? u
      : problem(`should be a whole number, got ${show(u)}`),
  );
}

const Bool = failWith('Bool', (u) =>
  typeof u === 'boolean' ? u : problem(`should be true or false, got ${show(u)}`),
);

const StringMap = failWith('StringMap', (u) => {
  if (typeof u !== 'object' || u === null || Array.isArray(u))
    return problem(`should be a map of strings, got ${show(u)}`);
  const entries = Object.entries(u as Record<string, unknown>);
  if (entries.length > LIMITS.cniArgs)
    return problem(`has ${entries.length} entries; at most ${LIMITS.cniArgs}`);
  for (const [k, v] of entries) {
    if (typeof v !== 'string')
      return problem(`[${JSON.stringify(k)}] should be a string, got ${show(v)}`);
    if (k.length > LIMITS.field || v.length > LIMITS.field)
      return problem(
        `[${show(k)}] is ${Math.max(k.length, v.length)} characters long; at most ${LIMITS.field}`,
      );
  }
  return u as Record<string, string>;
});

const PortShape = t.type({
  label: text('Label', LIMITS.label),
  value: integer('Port'),
  to: integer('Port'),
  hostIp: text('HostIp', LIMITS.field),
});
const LegacyPortShape = t.type({
  label: text('Label', LIMITS.label),
  value: integer('Port'),
  to: integer('Port'),
});
const LegacyNetworkShape = t.type({
  reservedPorts: list('Ports', LegacyPortShape, {
    max: LIMITS.ports,
    what: 'ports',
    allowEmpty: true,
  }),
  dynamicPorts: list('Ports', LegacyPortShape, {
    max: LIMITS.ports,
    what: 'ports',
    allowEmpty: true,
  }),
});

const NetworkAttachmentShape = t.type({
  network: text('Network', LIMITS.field),
  interfaceName: text('InterfaceName', LIMITS.field),
  ports: list('Ports', PortShape, { max: LIMITS.ports, what: 'ports', allowEmpty: true }),
  cniArgs: StringMap,
  ips: list('Ips', text('Ip', LIMITS.field), {
    max: LIMITS.ips,
    what: 'addresses',
    allowEmpty: true,
  }),
  mac: text('Mac', LIMITS.field),
  defaultRoute: Bool,
});
type NetworkAttachmentShape = t.TypeOf<typeof NetworkAttachmentShape>;

const SetupShape = t.type({
  allocId: text('AllocId', LIMITS.allocId),
  region: text('Region', LIMITS.field),
  namespace: text('Namespace', LIMITS.field),
  jobId: text('JobId', LIMITS.field),
  groupName: text('GroupName', LIMITS.field),
  network: text('Network', LIMITS.field),
  ports: list('Ports', PortShape, { max: LIMITS.ports, what: 'ports', allowEmpty: true }),
  networks: list('LegacyNetworks', LegacyNetworkShape, {
    max: LIMITS.legacyNetworks,
    what: 'networks',
    allowEmpty: true,
  }),
  cniArgs: StringMap,
  netnsPath: text('NetnsPath', LIMITS.netnsPath),
  attachments: list('Attachments', NetworkAttachmentShape, {
    max: LIMITS.attachments,
    what: 'attachments',
    allowEmpty: true,
  }),
});

const AttachShape = t.type({
  allocId: text('AllocId', LIMITS.allocId),
  attachment: NetworkAttachmentShape,
});

const DetachShape = t.type({
  allocId: text('AllocId', LIMITS.allocId),
  interfaceName: text('InterfaceName', LIMITS.field),
});

const AllocIdShape = t.type({ allocId: text('AllocId', LIMITS.allocId) });

const ForceCleanupShape = t.type({
  allocId: text('AllocId', LIMITS.allocId),
  network: text('Network', LIMITS.field),
  dryRun: Bool,
});

const ReapShape = t.type({ batchSize: integer('BatchSize'), dryRun: Bool });

/** Decodes a request's shape; a problem is INVALID_ARGUMENT naming the .proto field. */
function shape<A>(codec: t.Type<A, unknown>, request: unknown): A {
  const decoded = decode(codec, request);
  if (decoded.ok) return decoded.value;
  const path = decoded.problem.path.length === 0 ? ['request'] : decoded.problem.path;
  throw invalidRequest(path, [decoded.problem.problem], protoField);
}

/** An allocation id on its own, as the configurator checks it; the error names `alloc_id`. */
function allocIdOf(request: unknown): string {
  const { allocId } = shape(AllocIdShape, request);
  return checkAllocId(allocId, 'alloc_id');
}

export interface SetupContext {
  /** The networks the configurator offers now. */
  readonly catalog: () => NetworkCatalog;
  /** Re-reads the conf dir: a network just added may not be in the catalog yet. */
  readonly reload: () => Promise<NetworkCatalog>;
  readonly ignoreHostIps: boolean;
  /** The agent's caps (config `limits`). Default `DEFAULT_LIMITS`. */
  readonly limits?: AllocLimits;
}

function portOf(p: { label: string; value: number; to: number; hostIp?: string }) {
  return {
    label: p.label,
    value: p.value,
    ...(p.to === 0 ? {} : { to: p.to }),
    ...(p.hostIp === undefined || p.hostIp === '' ? {} : { hostIp: p.hostIp }),
  };
}

/**
 * A NetworkAttachment as the runner's `AttachmentSpec`: the proto's defaults (empty strings and
 * lists, `default_route` false) mean "not set", so that the runner's own defaults apply.
 */
export function attachmentSpecOf(a: NetworkAttachmentShape): AttachmentSpec {
  return {
    ...(a.network === '' ? {} : { network: a.network }),
    ...(a.interfaceName === '' ? {} : { ifName: a.interfaceName }),
    ...(a.ports.length === 0 ? {} : { ports: a.ports.map(portOf) }),
    ...(Object.keys(a.cniArgs).length === 0 ? {} : { cniArgs: a.cniArgs }),
    ...(a.ips.length === 0 ? {} : { ips: a.ips }),
    ...(a.mac === '' ? {} : { mac: a.mac }),
    ...(a.defaultRoute ? { defaultRoute: true } : {}),
  };
}

/**
 * A SetupAllocNetworkRequest as the runner's spec, or INVALID_ARGUMENT naming the field. The
 * proto's defaults (empty strings, `to` 0, empty lists) mean "not set". More ports or CNI args
 * than the agent's `limits` allow are refused here, before the runner records anything.
 * `attachments` become the spec's `attachments`, which the runner's decoder checks as a whole
 * (interfaces, networks, default routes, ports across attachments, `limits.maxAttachments`).
 */
export async function decodeSetupRequest(
  request: SetupAllocNetworkRequest__Output,
  context: SetupContext,
): Promise<RunnerSpec> {
  const r = shape(SetupShape, request);
  const input = {
    allocId: r.allocId,
    namespace: r.namespace,
    jobId: r.jobId,
    groupName: r.groupName,
    ...(r.region === '' ? {} : { region: r.region }),
    ...(r.network === '' ? {} : { network: r.network }),
    ...(r.ports.length === 0 ? {} : { ports: r.ports.map(portOf) }),
    ...(r.networks.length === 0
      ? {}
      : {
          legacyNetworks: r.networks.map((n) => ({
            ...(n.reservedPorts.length === 0 ? {} : { reservedPorts: n.reservedPorts.map(portOf) }),
            ...(n.dynamicPorts.length === 0 ? {} : { dynamicPorts: n.dynamicPorts.map(portOf) }),
          })),
        }),
    ...(Object.keys(r.cniArgs).length === 0 ? {} : { cniArgs: r.cniArgs }),
    ...(r.netnsPath === '' ? {} : { netnsPath: r.netnsPath }),
    ...(r.attachments.length === 0 ? {} : { attachments: r.attachments.map(attachmentSpecOf) }),
  };
  // The runner's decoder: the same rules its setup applies, and the agent's limits (a RunnerError
  // naming `spec.…`).
  const spec = decodeSpec(input, context.limits ?? DEFAULT_LIMITS);
  // Two ports on one host port: the configurator would find it only after the intent and the
  // namespace exist (a ConfiguratorError naming `ports[1].value`).
  portMappings(spec, context.ignoreHostIps);
  const attachments = spec.attachments ?? [];
  attachments.forEach((a, k) => {
    checkOwnPorts(['attachments', k], spec, a, context.ignoreHostIps);
  });
  await checkNetworksKnown(
    [
      { path: ['network'], network: spec.network },
      ...attachments.map((a, k) => ({ path: ['attachments', k, 'network'], network: a.network })),
    ],
    context,
  );
  return spec;
}

/** What AttachNetwork asks for. */
export interface AttachArgs {
  readonly allocId: string;
  readonly attachment: AttachmentSpec;
}

/**
 * An AttachNetworkRequest, or INVALID_ARGUMENT naming the field (`attachment.ports[1].value`):
 * its shape, the agent's `limits.maxPorts` and `limits.maxCniArgs` for the attachment, its own
 * ports, its network known. The runner checks the rest against the allocation it joins.
 */
export async function decodeAttachRequest(
  request: AttachNetworkRequest__Output,
  context: SetupContext,
): Promise<AttachArgs> {
  if ((request as { attachment?: unknown }).attachment === null)
    throw invalidRequest(['attachment'], ['is missing'], protoField);
  const r = shape(AttachShape, request);
  const allocId = checkAllocId(r.allocId, 'alloc_id');
  const attachment = attachmentSpecOf(r.attachment);
  const limits = context.limits ?? DEFAULT_LIMITS;
  const over = (field: string, count: number, max: number, key: string) => {
    if (count > max)
      throw invalidRequest(
        ['attachment', field],
        [`has ${count} entries, more than the agent's limit of ${max} (limits.${key})`],
        protoField,
      );
  };
  over('ports', r.attachment.ports.length, limits.maxPorts, 'maxPorts');
  over('cniArgs', Object.keys(r.attachment.cniArgs).length, limits.maxCniArgs, 'maxCniArgs');
  checkOwnPorts(
    ['attachment'],
    { allocId, namespace: '', jobId: '', groupName: '' },
    attachment,
    context.ignoreHostIps,
  );
  await checkNetworksKnown(
    [{ path: ['attachment', 'network'], network: attachment.network }],
    context,
  );
  return { allocId, attachment };
}

/** What DetachNetwork asks for. */
export interface DetachArgs {
  readonly allocId: string;
  readonly ifName: string;
}

/** A DetachNetworkRequest, or INVALID_ARGUMENT naming the field. */
export function decodeDetachRequest(request: DetachNetworkRequest__Output): DetachArgs {
  const r = shape(DetachShape, request);
  const allocId = checkAllocId(r.allocId, 'alloc_id');
  if (r.interfaceName === '')
    throw invalidRequest(
      ['interfaceName'],
      ["is empty; name the attachment's interface"],
      protoField,
    );
  return { allocId, ifName: r.interfaceName };
}

export function decodeTeardownRequest(request: TeardownAllocNetworkRequest__Output): string {
  return allocIdOf(request);
}

export function decodeGetRequest(request: GetAllocNetworkRequest__Output): string {
  return allocIdOf(request);
}

export function decodeCheckRequest(request: CheckAllocNetworkRequest__Output): string {
  return allocIdOf(request);
}

export interface ForceCleanupArgs {
  readonly allocId: string;
  readonly network: string | undefined;
  readonly dryRun: boolean;
}

export function decodeForceCleanupRequest(request: ForceCleanupRequest__Output): ForceCleanupArgs {
  const r = shape(ForceCleanupShape, request);
  const allocId = checkAllocId(r.allocId, 'alloc_id');
  if (r.network !== '' && !NAME_PATTERN.test(r.network))
    throw invalidRequest(
      ['network'],
      [`${JSON.stringify(r.network)} does not match ${NAME_PATTERN.source}`],
      protoField,
    );
  return { allocId, network: r.network === '' ? undefined : r.network, dryRun: r.dryRun };
}

export interface ReapArgs {
  readonly batchSize: number;
  readonly dryRun: boolean;
}

export function decodeReapRequest(request: ReapLeaksRequest__Output): ReapArgs {
  const r = shape(ReapShape, request);
  if (r.batchSize < 0 || r.batchSize > LIMITS.batchSize)
    throw invalidRequest(
      ['batchSize'],
      [
        `should be from 0 (the agent's default, ${DEFAULT_REAP_BATCH}) to ${LIMITS.batchSize}, got ${r.batchSize}`,
      ],
      protoField,
    );
  return { batchSize: r.batchSize === 0 ? DEFAULT_REAP_BATCH : r.batchSize, dryRun: r.dryRun };
}

/** A request without fields: checked to be one (an object), nothing more to read. */
export function decodeEmptyRequest(request: unknown): void {
  shape(t.UnknownRecord, request);
}
