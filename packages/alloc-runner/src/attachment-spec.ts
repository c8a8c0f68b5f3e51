// An allocation's attachments as a spec gives them: the list form (`attachments`, first = the
// primary), its decode and every rule across the list, the configurator spec of each attachment
// (`specsOf`), and where a field of an attachment's configurator spec is in the runner's spec
// (`fieldOf`: errors name what the caller wrote). spec.ts holds the spec itself and calls this.
import * as t from 'io-ts';
import { decode } from '@allocnet/cni';
import { moveProblemFields } from '@allocnet/base';
import type { FieldPath, Problem } from '@allocnet/base';
import {
  decodeSpec as decodeConfiguratorSpec,
  portMappingsOverlap,
  requestedPortMappings,
} from '@allocnet/cni-configurator';
import type {
  AllocNetworkSpec,
  AllocPort,
  RequestedPortMapping,
  ValidAllocSpec,
} from '@allocnet/cni-configurator';
import { invalidInput, invalidInputOf } from './errors.js';

/**
 * One network of an allocation, on its own interface in the allocation's namespace. Every
 * attachment of an allocation is in a different network (the plugins' chains and state are named
 * by network and allocation id: the same network twice would collide).
 */
export interface AttachmentSpec {
  /** A CNI network the agent knows; empty or absent: the embedded default network. */
  readonly network?: string;
  /** Default `eth0` for the first attachment, `net<k>` for the k-th (as Multus names them). */
  readonly ifName?: string;
  /** The portmap entries that ride on this network; the spec's own `ports` go on the first. */
  readonly ports?: readonly AllocPort[];
  /** On top of the spec's `cniArgs`, which every attachment gets. */
  readonly cniArgs?: Readonly<Record<string, string>>;
  /** Addresses asked for through the CNI `ips` capability (host-local, static). */
  readonly ips?: readonly string[];
  /** A MAC address asked for through the CNI `mac` capability (tuning). */
  readonly mac?: string;
  /** At most one attachment says true; by default the first carries the default route. */
  readonly defaultRoute?: boolean;
}

/** The identity and single-form fields of a spec that the attachments' specs are made from. */
export type SpecBase = AllocNetworkSpec & { readonly attachments?: readonly AttachmentSpec[] };

/** The decoder's own cap on attachments (the agent's `limits.maxAttachments` is below it). */
export const MAX_ATTACHMENTS = 32;

const WHAT = 'invalid allocation spec';
const PORT_FIELDS = new Set(['label', 'value', 'to', 'hostIp', 'protocol']);
const ATTACHMENT_FIELDS = new Set([
  'network',
  'ifName',
  'ports',
  'cniArgs',
  'ips',
  'mac',
  'defaultRoute',
]);
const IDENTITY_FIELDS = new Set(['allocId', 'region', 'namespace', 'jobId', 'groupName']);

// What the configurator's decoder does not check (yet) of an attachment's own fields: their types.
const ownCodec = t.partial({ ips: t.array(t.string), mac: t.string, defaultRoute: t.boolean });

/** The interface of attachment `k`: its own, else `eth0` for the first, `net<k>` for the others. */
export function ifNameAt(k: number, own: string | undefined): string {
  return own ?? (k === 0 ? 'eth0' : `net${k}`);
}

const nonEmpty = <T>(list: readonly T[] | undefined): list is readonly T[] =>
  list !== undefined && list.length > 0;

/** The attachment that carries the default route: the one saying true, else the first. */
function routeCarrier(attachments: readonly AttachmentSpec[]): number {
  const k = attachments.findIndex((a) => a.defaultRoute === true);
  return k < 0 ? 0 : k;
}

/**
 * The configurator spec of every attachment of `spec`, in order (see `AttachmentSpec`). Made
 * without checks: `decodeAttachments` checks them.
 */
export function specsOf(spec: SpecBase): AllocNetworkSpec[] {
  const attachments = spec.attachments ?? [];
  const carrier = routeCarrier(attachments);
  return attachments.map((a, k) =>
    attachmentSpecOf(spec, a, {
      ifName: ifNameAt(k, a.ifName),
      first: k === 0,
      route: k === carrier ? (a.defaultRoute === true ? true : undefined) : false,
    }),
  );
}

/**
 * The configurator spec of one attachment `a` of the allocation `spec`: on interface `ifName`;
 * the spec's ports and legacy networks when it is the `first` and has no ports of its own; the
 * spec's CNI args with its own on top; `route`, its `defaultRoute` (undefined: as the plugins make it).
 */
export function attachmentSpecOf(
  spec: AllocNetworkSpec,
  a: AttachmentSpec,
  at: { readonly ifName: string; readonly first: boolean; readonly route: boolean | undefined },
): AllocNetworkSpec {
  const ports = at.first && !nonEmpty(a.ports) ? spec.ports : a.ports;
  const args = { ...(spec.cniArgs ?? {}), ...(a.cniArgs ?? {}) };
  return {
    allocId: spec.allocId,
    ...(spec.region === undefined ? {} : { region: spec.region }),
    namespace: spec.namespace,
    jobId: spec.jobId,
    groupName: spec.groupName,
    ...(a.network === undefined || a.network === '' ? {} : { network: a.network }),
    ifName: at.ifName,
    ...(nonEmpty(ports) ? { ports } : {}),
    ...(at.first && nonEmpty(spec.legacyNetworks) ? { legacyNetworks: spec.legacyNetworks } : {}),
    ...(Object.keys(args).length > 0 ? { cniArgs: args } : {}),
    ...(nonEmpty(a.ips) ? { ips: a.ips } : {}),
    ...(a.mac === undefined || a.mac === '' ? {} : { mac: a.mac }),
    ...(at.route === undefined ? {} : { defaultRoute: at.route }),
  };
}

/**
 * Where `path` of attachment `k`'s configurator spec is in the runner's spec: the identity
 * fields, the legacy networks, the spec's own ports (on the first) and CNI args (on every one)
 * are the spec's; the rest the attachment's.
 */
export function fieldOf(spec: SpecBase, k: number, path: FieldPath): FieldPath {
  const [head, key] = path;
  const own = spec.attachments?.[k];
  if (own === undefined) return ['spec', ...path];
  const spec_ =
    (typeof head === 'string' && IDENTITY_FIELDS.has(head)) ||
    head === 'legacyNetworks' ||
    (head === 'ports' && k === 0 && !nonEmpty(own.ports)) ||
    (head === 'cniArgs' && typeof key === 'string' && !(key in (own.cniArgs ?? {})));
  return spec_ ? ['spec', ...path] : ['spec', 'attachments', k, ...path];
}

/** The same network, as a spec names it (`''` and absent are the default network). */
export const networkKey = (network: string | undefined): string => network ?? '';

function firstUnknown(value: object, known: ReadonlySet<string>): string | undefined {
  return Object.keys(value).find((key) => !known.has(key));
}

/** One attachment's shape, at `at`: an object with known fields of the right types. */
function checkOne(a: unknown, at: FieldPath, what: string): AttachmentSpec {
  if (typeof a !== 'object' || a === null || Array.isArray(a))
    throw invalidInput(what, at, ['should be an object']);
  const unknown = firstUnknown(a, ATTACHMENT_FIELDS);
  if (unknown !== undefined) throw invalidInput(what, [...at, unknown], ['is not a known field']);
  const ports = (a as { ports?: unknown }).ports;
  for (const [j, port] of (Array.isArray(ports) ? (ports as unknown[]) : []).entries()) {
    const bad =
      typeof port === 'object' && port !== null ? firstUnknown(port, PORT_FIELDS) : undefined;
    if (bad !== undefined)
      throw invalidInput(what, [...at, 'ports', j, bad], ['is not a known field']);
  }
  const own = decode(ownCodec, a);
  if (!own.ok) throw invalidInput(what, [...at, ...own.problem.path], [own.problem.problem]);
  return a;
}

/** The list's shape: a list of objects with known fields of the right types. */
function checkShape(raw: unknown): readonly AttachmentSpec[] {
  if (!Array.isArray(raw))
    throw invalidInput(WHAT, ['spec', 'attachments'], ['should be a list of attachments']);
  if (raw.length > MAX_ATTACHMENTS)
    throw invalidInput(
      WHAT,
      ['spec', 'attachments'],
      [`has ${raw.length} attachments; at most ${MAX_ATTACHMENTS}`],
    );
  return (raw as unknown[]).map((a, k) => checkOne(a, ['spec', 'attachments', k], WHAT));
}

/**
 * Decodes an attachment an `attach` asks for, to be attachment `k` of the allocation whose spec
 * (configurator part) is `spec`, on `ifName` when it names none: its configurator spec, with
 * `defaultRoute: false` (the allocation's default route stays where it is). Errors name
 * `attachment.<field>`.
 */
export function decodeAttachment(
  spec: AllocNetworkSpec,
  raw: unknown,
  ifName: (own: string | undefined) => string,
): { attachment: AttachmentSpec; spec: ValidAllocSpec } {
  const what = 'invalid attachment';
  const attachment = checkOne(raw, ['attachment'], what);
  if (attachment.defaultRoute === true)
    throw invalidInput(
      what,
      ['attachment', 'defaultRoute'],
      ['is true, but the allocation has its default route (an attach cannot move it)'],
    );
  const one = attachmentSpecOf(spec, attachment, {
    ifName: ifName(typeof attachment.ifName === 'string' ? attachment.ifName : undefined),
    first: false,
    route: false,
  });
  if (attachment.ifName !== undefined && typeof attachment.ifName !== 'string')
    throw invalidInput(what, ['attachment', 'ifName'], ['should be a string']);
  try {
    return { attachment, spec: decodeConfiguratorSpec(one) };
  } catch (error) {
    const bad = invalidInputOf(error);
    if (bad === undefined) throw error;
    const moved = moveProblemFields(bad.problem, (field) => ['attachment', ...field]);
    throw invalidInput(what, ['attachment', ...bad.path], moved, { cause: error });
  }
}

/** The fields the list form moves off the spec: given there too, they are refused. */
function checkTopLevel(spec: SpecBase, first: AttachmentSpec): void {
  for (const field of ['network', 'ifName'] as const) {
    const value = spec[field];
    if (value !== undefined && value !== '')
      throw invalidInput(
        WHAT,
        ['spec', field],
        [
          'must be empty when attachments are given (set it on ',
          { field: ['spec', 'attachments', 0, field] },
          ')',
        ],
      );
  }
  if (nonEmpty(first.ports) && (nonEmpty(spec.ports) || nonEmpty(spec.legacyNetworks)))
    throw invalidInput(
      WHAT,
      ['spec', 'attachments', 0, 'ports'],
      [
        'cannot be given with ',
        { field: ['spec', nonEmpty(spec.ports) ? 'ports' : 'legacyNetworks'] },
        ' (those ride on the first attachment)',
      ],
    );
}

/** The rules across the list: distinct interfaces and networks, one default route, no port twice. */
function checkAcross(spec: SpecBase, specs: readonly AllocNetworkSpec[]): void {
  const attachments = spec.attachments ?? [];
  const refuse = (k: number, field: string, problem: Problem): never => {
    throw invalidInput(WHAT, ['spec', 'attachments', k, field], problem);
  };
  const mappings: { k: number; m: RequestedPortMapping }[] = [];
  specs.forEach((s, k) => {
    const at = (field: string, j: number): Problem => [
      { field: ['spec', 'attachments', j, field] },
    ];
    for (let j = 0; j < k; j++) {
      const other = specs[j] as AllocNetworkSpec;
      if (other.ifName === s.ifName)
        refuse(k, 'ifName', [
          `is ${JSON.stringify(s.ifName)}, the interface of `,
          ...at('ifName', j),
        ]);
      if (networkKey(other.network) === networkKey(s.network))
        refuse(k, 'network', [
          `is ${JSON.stringify(s.network ?? '')}, the network of `,
          ...at('network', j),
          ' (every attachment is in a different network)',
        ]);
      if (attachments[k]?.defaultRoute === true && attachments[j]?.defaultRoute === true)
        refuse(k, 'defaultRoute', ['is true, as ', ...at('defaultRoute', j), ' (at most one)']);
    }
    for (const m of ownMappings(spec, k, s)) {
      const taken = mappings.find((o) => o.k !== k && portMappingsOverlap(o.m, m));
      if (taken !== undefined)
        throw invalidInput(WHAT, fieldOf(spec, k, m.field), [
          `maps host port ${m.hostPort}/${m.protocol}, as `,
          { field: fieldOf(spec, taken.k, taken.m.field) },
          ' does (a host port goes to one attachment)',
        ]);
      mappings.push({ k, m });
    }
  });
}

/** Attachment k's port mappings; two of its own ports on one host port refused under its field. */
function ownMappings(spec: SpecBase, k: number, s: AllocNetworkSpec) {
  try {
    return requestedPortMappings(s, false);
  } catch (error) {
    const bad = invalidInputOf(error);
    if (bad === undefined) throw error;
    const moved = moveProblemFields(bad.problem, (field) => fieldOf(spec, k, field).slice(1));
    throw invalidInput(WHAT, fieldOf(spec, k, bad.path), moved, { cause: error });
  }
}

/**
 * Decodes `raw` (the spec's `attachments`) against `spec` (its configurator part, decoded):
 * undefined for an empty list (the single form), else the list and the configurator spec of each
 * attachment, decoded by the configurator's decoder, every error naming the runner's field.
 */
export function decodeAttachments(
  spec: AllocNetworkSpec,
  raw: unknown,
): { attachments: readonly AttachmentSpec[]; specs: ValidAllocSpec[] } | undefined {
  const attachments = checkShape(raw);
  const first = attachments[0];
  if (first === undefined) return undefined;
  const base: SpecBase = { ...spec, attachments };
  checkTopLevel(base, first);
  const specs = specsOf(base).map((s, k) => {
    try {
      return decodeConfiguratorSpec(s);
    } catch (error) {
      const bad = invalidInputOf(error);
      if (bad === undefined) throw error;
      // The fields the problem names are the attachment's too (`ports[0]` of attachment k).
      const moved = moveProblemFields(bad.problem, (field) => fieldOf(base, k, field).slice(1));
      throw invalidInput(WHAT, fieldOf(base, k, bad.path), moved, { cause: error });
    }
  });
  checkAcross(base, specs);
  return { attachments, specs };
}
