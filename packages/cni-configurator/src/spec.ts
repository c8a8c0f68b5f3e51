import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import * as t from 'io-ts';
import { show } from '@allocnet/base';
import { NAME_PATTERN, checkedString, decode } from '@allocnet/cni';
import { invalidField } from './errors.js';
import type { AllocNetworkSpec } from './types.js';

/** Allocation ids reach netns names, file names and iptables comments (255 bytes at most). */
export const MAX_ALLOC_ID_LENGTH = 64;
/** Identity fields and CNI args reach CNI_ARGS and logs. */
export const MAX_FIELD_LENGTH = 256;
/** Port labels only reach messages. */
export const MAX_LABEL_LENGTH = 128;
/** More is a mistake, not an allocation: 2 entries each in portmap's config. */
export const MAX_PORTS = 1024;
export const MAX_CNI_ARGS = 64;
/** Addresses one attachment may ask for: one per range is what host-local gives. */
export const MAX_REQUESTED_IPS = 16;

/** Keys the configurator sets itself; a spec cannot give them. */
export const RESERVED_ARG_KEYS: readonly string[] = [
  'IgnoreUnknown',
  'NOMAD_REGION',
  'NOMAD_NAMESPACE',
  'NOMAD_JOB_ID',
  'NOMAD_GROUP_NAME',
  'NOMAD_ALLOC_ID',
];

export const AllocId = checkedString(
  'AllocId',
  (s) => s.length <= MAX_ALLOC_ID_LENGTH && NAME_PATTERN.test(s),
  (s) =>
    s === ''
      ? 'is empty'
      : s.length > MAX_ALLOC_ID_LENGTH
        ? `is ${s.length} characters long; at most ${MAX_ALLOC_ID_LENGTH}`
        : `${JSON.stringify(s)} has characters other than [a-zA-Z0-9_.-] or starts with one of "_.-"`,
);

/** A value that goes into CNI_ARGS: no `;`, `=` or NUL (plugins split on them, unescaped). */
function argText(name: string, options: { readonly allowEmpty: boolean }) {
  return checkedString(
    name,
    (s) => (options.allowEmpty || s !== '') && s.length <= MAX_FIELD_LENGTH && !/[;=\0]/.test(s),
    (s) =>
      s === ''
        ? 'is empty'
        : s.length > MAX_FIELD_LENGTH
          ? `is ${s.length} characters long; at most ${MAX_FIELD_LENGTH}`
          : `${JSON.stringify(s)} contains ";", "=" or a NUL character, which CNI_ARGS cannot carry`,
  );
}

const NetworkName = checkedString(
  'NetworkName',
  (s) => s === '' || NAME_PATTERN.test(s),
  (s) => `${JSON.stringify(s)} does not match ${NAME_PATTERN.source}`,
);

/** A Linux interface name: 1–15 bytes, no `/`, `:` or space, not `.` or `..`. */
const IfName = checkedString(
  'IfName',
  (s) => /^[A-Za-z0-9_.-]{1,15}$/.test(s) && s !== '.' && s !== '..',
  (s) =>
    `${JSON.stringify(s)} is not an interface name (1 to 15 of [A-Za-z0-9_.-], not "." or "..")`,
);

/**
 * An address as the plugins read a requested one (Go's `net.ParseIP`, or `net.ParseCIDR` with a
 * prefix length): dotted IPv4 or IPv6 text, no zone, an optional `/<prefix>` within the family.
 */
export function requestedIpProblem(s: string): string | undefined {
  const [address = '', prefix, ...rest] = s.split('/');
  const family = address.includes('%') ? 0 : isIP(address);
  if (family === 0 || rest.length > 0)
    return `${JSON.stringify(s)} is not an IPv4 or IPv6 address (with or without a prefix length)`;
  if (prefix !== undefined) {
    const max = family === 4 ? 32 : 128;
    if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > max)
      return `${JSON.stringify(s)} has a prefix length other than 0 to ${max}`;
  }
  return undefined;
}

const RequestedIp = checkedString(
  'RequestedIp',
  (s) => requestedIpProblem(s) === undefined,
  (s) => requestedIpProblem(s) ?? '',
);

/** A unicast MAC address, six colon-separated pairs of hex digits (an interface takes no other). */
const Mac = checkedString(
  'Mac',
  (s) => /^([0-9A-Fa-f]{2}:){5}[0-9A-Fa-f]{2}$/.test(s) && (parseInt(s.slice(0, 2), 16) & 1) === 0,
  (s) =>
    /^([0-9A-Fa-f]{2}:){5}[0-9A-Fa-f]{2}$/.test(s)
      ? `${JSON.stringify(s)} is a multicast address; an interface needs a unicast one`
      : `${JSON.stringify(s)} is not a MAC address (six colon-separated pairs of hex digits)`,
);

const Protocol = t.keyof({ tcp: null, udp: null });

const Label = checkedString(
  'Label',
  (s) => s !== '' && s.length <= MAX_LABEL_LENGTH && !/\p{Cc}/u.test(s),
  (s) =>
    s === ''
      ? 'is empty'
      : s.length > MAX_LABEL_LENGTH
        ? `is ${s.length} characters long; at most ${MAX_LABEL_LENGTH}`
        : 'contains a control character',
);

const HostIp = checkedString(
  'HostIp',
  (s) => s === '' || ipaddr.isValid(s),
  (s) => `${JSON.stringify(s)} is not an IPv4 or IPv6 address`,
);

function integer(name: string, min: number, max: number, what: string) {
  return new t.Type<number, number, unknown>(
    name,
    (u): u is number => typeof u === 'number' && Number.isInteger(u) && u >= min && u <= max,
    (u, c) =>
      u === undefined
        ? t.failure(u, c, 'is missing')
        : typeof u === 'number' && Number.isInteger(u) && u >= min && u <= max
          ? t.success(u)
          : t.failure(u, c, `should be ${what}, got ${show(u)}`),
    t.identity,
  );
}

const HostPort = integer('HostPort', 1, 65535, 'a port number from 1 to 65535');
/** Below 1 means "the same as the host port" (Nomad's rule); a big negative number is a mistake. */
const ToPort = integer('ToPort', -1, 65535, 'a port number up to 65535 (below 1: the host port)');

function limited<C extends t.Mixed>(codec: C, max: number, what: string) {
  const list = t.array(codec);
  return new t.Type<t.TypeOf<C>[], t.OutputOf<C>[], unknown>(
    `Limited<${list.name}>`,
    list.is,
    (u, c) =>
      u !== undefined && !Array.isArray(u)
        ? t.failure(u, c, `should be a list of ${what}, got ${show(u)}`)
        : Array.isArray(u) && u.length > max
          ? t.failure(u, c, `has ${u.length} ${what}; at most ${max}`)
          : list.validate(u, c),
    list.encode,
  );
}

const Port = t.intersection([
  t.type({ label: Label, value: HostPort }),
  t.partial({ to: ToPort, hostIp: HostIp, protocol: Protocol }),
]);
const LegacyPort = t.intersection([
  t.type({ label: Label, value: HostPort }),
  t.partial({ to: ToPort }),
]);
const LegacyNetwork = t.partial({
  reservedPorts: limited(LegacyPort, MAX_PORTS, 'ports'),
  dynamicPorts: limited(LegacyPort, MAX_PORTS, 'ports'),
});

const ArgKey = argText('ArgKey', { allowEmpty: false });
const ArgValue = argText('ArgValue', { allowEmpty: true });

const CniArgsMap = new t.Type<Record<string, string>, Record<string, string>, unknown>(
  'CniArgs',
  (u): u is Record<string, string> => typeof u === 'object' && u !== null,
  (u, c) => {
    if (typeof u !== 'object' || u === null || Array.isArray(u))
      return t.failure(u, c, `should be an object of names to values, got ${JSON.stringify(u)}`);
    const entries = Object.entries(u as Record<string, unknown>);
    if (entries.length > MAX_CNI_ARGS)
      return t.failure(u, c, `has ${entries.length} entries; at most ${MAX_CNI_ARGS}`);
    for (const [key, value] of entries) {
      const at = [...c, { key, type: ArgValue, actual: value }];
      const k = ArgKey.validate(key, at);
      if (k._tag === 'Left') return k;
      if (RESERVED_ARG_KEYS.includes(key))
        return t.failure(value, at, 'is set by allocnet and cannot be given');
      const v = ArgValue.validate(value, at);
      if (v._tag === 'Left') return v;
    }
    return t.success(u as Record<string, string>);
  },
  t.identity,
);

export const AllocNetworkSpecCodec = t.intersection([
  t.type({
    allocId: AllocId,
    namespace: argText('Namespace', { allowEmpty: false }),
    jobId: argText('JobId', { allowEmpty: false }),
    groupName: argText('GroupName', { allowEmpty: false }),
  }),
  t.partial({
    region: argText('Region', { allowEmpty: true }),
    network: NetworkName,
    ports: limited(Port, MAX_PORTS, 'ports'),
    legacyNetworks: limited(LegacyNetwork, 16, 'networks'),
    cniArgs: CniArgsMap,
    ifName: IfName,
    ips: limited(RequestedIp, MAX_REQUESTED_IPS, 'addresses'),
    mac: Mac,
    defaultRoute: t.boolean,
  }),
]);

/** A spec `decodeSpec` gave: what `setup` takes as is. */
export type ValidAllocSpec = AllocNetworkSpec & { readonly [validAllocSpec]: true };
declare const validAllocSpec: unique symbol;

// The specs this process decoded: one decoded at the edge is not decoded again in `setup`.
const decodedSpecs = new WeakSet<object>();

/** Whether `decodeSpec` made this spec. */
export function isValidSpec(value: unknown): value is ValidAllocSpec {
  return typeof value === 'object' && value !== null && decodedSpecs.has(value);
}

/**
 * Decodes an allocation's spec, refusing what could not reach the plugins intact, with an
 * `invalid-argument` error naming the field (`ports[1].value should be …`; the spec itself is
 * the empty path, `spec` in the message).
 */
export function decodeSpec(value: unknown): ValidAllocSpec {
  if (isValidSpec(value)) return value;
  const decoded = decode(AllocNetworkSpecCodec, value);
  if (!decoded.ok) throw invalidField(decoded.problem.path, decoded.problem.problem);
  // The codec gives back the object it was given: a copy, so that a later change by the
  // caller does not change a spec that is known to be valid.
  const spec = structuredClone(decoded.value);
  decodedSpecs.add(spec);
  return spec as unknown as ValidAllocSpec;
}

/** Checks an allocation id on its own (teardown, cleanup). */
export function checkAllocId(value: unknown, field = 'allocId'): string {
  const decoded = decode(AllocId, value);
  if (!decoded.ok) throw invalidField(field, decoded.problem.problem);
  return decoded.value;
}
