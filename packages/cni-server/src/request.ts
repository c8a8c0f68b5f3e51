// A CNI server request (`POST /v1/cni`, docs/cni-plugin.md) decoded once, at the edge: the
// `env` allocnet-cni forwards (CNI_COMMAND, CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, CNI_ARGS,
// CNI_PATH) and the plugin's `config` (its stdin). Every field goes through io-ts; a bad one is a
// `CniFault` naming it (answer.ts gives it the spec's code: 7 for the environment, 4 for the
// configuration, 1 for a cniVersion allocnet cannot answer in). Then the call becomes the
// runner's spec: the attachment's allocation id (the container id, or a hash of it and the
// ifname), the identity from CNI_ARGS, the runtime's port mappings, and the networks: the one
// `delegate`, or every network of `delegates` (the first on CNI_IFNAME, the others on net1…).
import { isIP } from 'node:net';
import * as t from 'io-ts';
import { show } from '@allocnet/base';
import type { FieldPath } from '@allocnet/base';
import {
  MAX_IFNAME_BYTES,
  NAME_PATTERN,
  RESULT_VERSIONS,
  decode,
  failWith,
  isVersion,
  problem,
} from '@allocnet/cni';
import { absolutePathProblem } from '@allocnet/netns';
import { badField } from './errors.js';

/** The verbs the server takes (VERSION too, though allocnet-cni answers it itself). */
export type CniCommand = 'ADD' | 'DEL' | 'CHECK' | 'STATUS' | 'GC' | 'VERSION';

/** One of the runtime's port mappings, as allocnet maps it. */
export interface CniPortMapping {
  readonly hostPort: number;
  readonly containerPort: number;
  readonly protocol: 'tcp' | 'udp';
  readonly hostIP: string;
  /** Its index in `runtimeConfig.portMappings`, for errors. */
  readonly index: number;
}

export interface CniCall {
  readonly command: CniCommand;
  readonly containerId: string;
  /** Empty on a DEL without a namespace (containerd's second DEL), STATUS and GC. */
  readonly netns: string;
  readonly ifName: string;
  /** CNI_ARGS pairs, in order. */
  readonly args: readonly (readonly [string, string])[];
  readonly cniVersion: string;
  /** The conflist's name (the queue file of a DEL is keyed by it). */
  readonly networkName: string;
  /** The allocnet network to run; undefined means the embedded default (or `delegates`). */
  readonly delegate: string | undefined;
  /**
   * The conflist's `delegates` (exclusive with `delegate`): the allocation's networks in order,
   * the first on CNI_IFNAME. Empty when the conflist names at most one network.
   */
  readonly delegates: readonly string[];
  /** Mappings with a host port; the ones with none (or 0) are left out, as kubelet does. */
  readonly portMappings: readonly CniPortMapping[];
  /** GC: the attachments the runtime still has. */
  readonly validAttachments: readonly { readonly containerId: string; readonly ifName: string }[];
}

const COMMANDS: readonly CniCommand[] = ['ADD', 'DEL', 'CHECK', 'STATUS', 'GC', 'VERSION'];
const MAX_CONTAINER_ID = 256;
const MAX_ARGS_TEXT = 16 * 1024;
const MAX_PORT_MAPPINGS = 1024;
const MAX_VALID_ATTACHMENTS = 65_536;
/**
 * The most networks `delegates` may name: the highest `limits.maxAttachments` the agent accepts,
 * so that its limit (default 8), which the runner checks every spec against, is the one that
 * governs.
 */
export const MAX_DELEGATES = 64;

const text = (name: string, max: number) =>
  failWith(name, (u) => {
    if (typeof u !== 'string') return problem(`should be a string, got ${show(u)}`);
    return u.length > max ? problem(`is ${u.length} characters long; at most ${max}`) : u;
  });

const Env = t.intersection([
  t.type({
    CNI_COMMAND: failWith('Command', (u) =>
      typeof u === 'string' && (COMMANDS as readonly string[]).includes(u)
        ? (u as CniCommand)
        : problem(`should be one of ${COMMANDS.join(', ')}, got ${show(u)}`),
    ),
  }),
  t.partial({
    CNI_CONTAINERID: text('ContainerId', MAX_CONTAINER_ID),
    CNI_NETNS: text('Netns', 4096),
    CNI_IFNAME: text('IfName', 64),
    CNI_ARGS: text('Args', MAX_ARGS_TEXT),
    CNI_PATH: text('Path', 64 * 1024),
  }),
]);

const Version = failWith('CniVersion', (u) => {
  if (typeof u !== 'string') return problem(`should be a version string, got ${show(u)}`);
  if (!isVersion(u)) return problem(`${show(u)} is not a version`);
  return u;
});

const NetworkName = failWith('NetworkName', (u) =>
  typeof u === 'string' && u.length <= 256 && NAME_PATTERN.test(u)
    ? u
    : problem(`${show(u)} should be a name matching ${NAME_PATTERN.source}`),
);

const Config = t.intersection([
  t.type({ cniVersion: Version, name: NetworkName }),
  t.partial({
    delegate: NetworkName,
    // Checked by delegatesOf, which names a list's problems better than t.array.
    delegates: t.unknown,
    runtimeConfig: failWith('RuntimeConfig', (u) =>
      typeof u === 'object' && u !== null && !Array.isArray(u)
        ? (u as Record<string, unknown>)
        : problem(`should be an object, got ${show(u)}`),
    ),
  }),
]);

const Request = t.type({
  env: failWith('Env', (u) =>
    typeof u === 'object' && u !== null && !Array.isArray(u)
      ? (u as Record<string, unknown>)
      : problem(`should be an object of CNI_* variables, got ${show(u)}`),
  ),
  config: failWith('Config', (u) =>
    typeof u === 'object' && u !== null && !Array.isArray(u)
      ? (u as Record<string, unknown>)
      : problem(`should be the plugin's network configuration (an object), got ${show(u)}`),
  ),
});

/** The first problem of `codec` on `value`, as a fault at `at` + the problem's path. */
function decodeAt<A>(codec: t.Type<A, unknown>, value: unknown, at: FieldPath): A {
  const decoded = decode(codec, value);
  if (decoded.ok) return decoded.value;
  throw badField([...at, ...decoded.problem.path], decoded.problem.problem);
}

/** A key read case-insensitively: go-cni sends `HostPort`, kubelet-style clients `hostPort`. */
function keyed(entry: Record<string, unknown>, key: string): [string, unknown] | undefined {
  const found = Object.keys(entry).find((k) => k.toLowerCase() === key.toLowerCase());
  return found === undefined ? undefined : [found, entry[found]];
}

function portNumber(value: unknown, at: FieldPath, min: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > 65535)
    throw badField(at, `should be a port number from ${min} to 65535, got ${show(value)}`);
  return value;
}

function portMappingsOf(runtimeConfig: Record<string, unknown> | undefined): CniPortMapping[] {
  const at: FieldPath = ['config', 'runtimeConfig', 'portMappings'];
  const raw = runtimeConfig?.portMappings;
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw badField(at, `should be a list, got ${show(raw)}`);
  if (raw.length > MAX_PORT_MAPPINGS)
    throw badField(at, `has ${raw.length} mappings; at most ${MAX_PORT_MAPPINGS}`);
  const out: CniPortMapping[] = [];
  raw.forEach((entry: unknown, index) => {
    const here = [...at, index];
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry))
      throw badField(here, `should be an object, got ${show(entry)}`);
    const e = entry as Record<string, unknown>;
    const host = keyed(e, 'hostPort');
    const container = keyed(e, 'containerPort');
    const protocol = keyed(e, 'protocol');
    const hostIp = keyed(e, 'hostIP');
    const hostPort =
      host === undefined || host[1] === null ? 0 : portNumber(host[1], [...here, host[0]], 0);
    if (container === undefined) throw badField([...here, 'containerPort'], 'is missing');
    const containerPort = portNumber(container[1], [...here, container[0]], 1);
    let proto: 'tcp' | 'udp' = 'tcp';
    if (protocol !== undefined && protocol[1] !== '' && protocol[1] !== null) {
      const p = typeof protocol[1] === 'string' ? protocol[1].toLowerCase() : protocol[1];
      if (p !== 'tcp' && p !== 'udp')
        throw badField(
          [...here, protocol[0]],
          `should be "tcp" or "udp", got ${show(protocol[1])}`,
        );
      proto = p;
    }
    let ip = '';
    if (hostIp !== undefined && hostIp[1] !== '' && hostIp[1] !== null) {
      if (typeof hostIp[1] !== 'string' || isIP(hostIp[1]) === 0)
        throw badField([...here, hostIp[0]], `${show(hostIp[1])} is not an IP address`);
      ip = hostIp[1];
    }
    // Container-only ports (no host port) are what runtimes pass for every exposed port.
    if (hostPort === 0) return;
    out.push({ hostPort, containerPort, protocol: proto, hostIP: ip, index });
  });
  return out;
}

/**
 * The conflist's `delegates`, checked: not with `delegate`, one to MAX_DELEGATES networks, each
 * named once (two attachments of one network would share its plugins' chains and state).
 */
function delegatesOf(config: { delegate?: string; delegates?: unknown }): string[] {
  const at: FieldPath = ['config', 'delegates'];
  const raw = config.delegates;
  if (raw === undefined) return [];
  if (!Array.isArray(raw))
    throw badField(at, `should be a list of network names, got ${show(raw)}`);
  if (config.delegate !== undefined)
    throw badField(at, 'cannot be given with config.delegate: name every network in delegates');
  if (raw.length === 0) throw badField(at, 'is empty; it should name at least one network');
  if (raw.length > MAX_DELEGATES)
    throw badField(at, `names ${raw.length} networks; at most ${MAX_DELEGATES}`);
  const list = raw.map((name: unknown, i) => decodeAt(NetworkName, name, [...at, i]));
  list.forEach((name, i) => {
    const first = list.indexOf(name);
    if (first !== i)
      throw badField(
        [...at, i],
        `${show(name)} is named twice (config.delegates[${first}]); each network can be attached once`,
      );
  });
  return list;
}

function validAttachmentsOf(
  config: Record<string, unknown>,
): { containerId: string; ifName: string }[] {
  const at: FieldPath = ['config', 'cni.dev/valid-attachments'];
  const raw = config['cni.dev/valid-attachments'];
  if (raw === undefined) throw badField(at, 'is missing; GC needs the attachments to keep');
  if (!Array.isArray(raw)) throw badField(at, `should be a list, got ${show(raw)}`);
  if (raw.length > MAX_VALID_ATTACHMENTS)
    throw badField(at, `has ${raw.length} entries; at most ${MAX_VALID_ATTACHMENTS}`);
  return raw.map((entry: unknown, i) => {
    const e = (typeof entry === 'object' && entry !== null ? entry : {}) as Record<string, unknown>;
    const containerId = e.containerID;
    const ifName = e.ifname;
    if (typeof containerId !== 'string' || containerId === '')
      throw badField(
        [...at, i, 'containerID'],
        `should be a container id, got ${show(containerId)}`,
      );
    if (typeof ifName !== 'string' || ifName === '')
      throw badField([...at, i, 'ifname'], `should be an interface name, got ${show(ifName)}`);
    return { containerId, ifName };
  });
}

function checkContainerId(value: string | undefined): string {
  const at = ['env', 'CNI_CONTAINERID'];
  if (value === undefined || value === '') throw badField(at, 'is missing or empty');
  if (!NAME_PATTERN.test(value))
    throw badField(
      at,
      `${show(value)} has characters other than [a-zA-Z0-9_.-] or starts with one of "_.-"`,
    );
  return value;
}

function checkIfName(value: string | undefined): string {
  const at = ['env', 'CNI_IFNAME'];
  if (value === undefined || value === '') throw badField(at, 'is missing or empty');
  if (
    Buffer.byteLength(value) > MAX_IFNAME_BYTES ||
    !/^[A-Za-z0-9_.-]+$/.test(value) ||
    value === '.' ||
    value === '..'
  )
    throw badField(
      at,
      `${show(value)} is not an interface name (1 to ${MAX_IFNAME_BYTES} of [A-Za-z0-9_.-], not "." or "..")`,
    );
  return value;
}

function checkNetns(value: string | undefined, required: boolean): string {
  const at = ['env', 'CNI_NETNS'];
  if (value === undefined || value === '') {
    if (required) throw badField(at, 'is missing or empty');
    return '';
  }
  const why = absolutePathProblem(value);
  if (why !== undefined) throw badField(at, `${show(value)} ${why}`);
  return value;
}

function argsOf(text: string | undefined): [string, string][] {
  if (text === undefined || text.trim() === '') return [];
  return text.split(';').map((part, i) => {
    const eq = part.indexOf('=');
    if (eq <= 0)
      throw badField(['env', 'CNI_ARGS'], `part ${i + 1} (${show(part)}) is not KEY=VALUE`);
    return [part.slice(0, eq), part.slice(eq + 1)];
  });
}

/**
 * Decodes a request body (already parsed JSON). Throws a `CniFault` naming the first bad field;
 * what a verb needs and did not get is a fault too (ADD without CNI_NETNS).
 */
export function decodeCniRequest(body: unknown): CniCall {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw badField(['body'], `should be an object with env and config, got ${show(body)}`);
  const request = decodeAt(Request, body, []);
  const env = decodeAt(Env, request.env, ['env']);
  const config = decodeAt(Config, request.config, ['config']);
  if (!(RESULT_VERSIONS as readonly string[]).includes(config.cniVersion))
    throw badField(
      ['config', 'cniVersion'],
      `${show(config.cniVersion)} is not a version allocnet answers in (${RESULT_VERSIONS.join(', ')})`,
      'incompatible-version',
    );
  const command = env.CNI_COMMAND;
  const perAttachment = command === 'ADD' || command === 'DEL' || command === 'CHECK';
  return {
    command,
    containerId: perAttachment ? checkContainerId(env.CNI_CONTAINERID) : '',
    netns: perAttachment ? checkNetns(env.CNI_NETNS, command !== 'DEL') : '',
    ifName: perAttachment ? checkIfName(env.CNI_IFNAME) : '',
    args: perAttachment ? argsOf(env.CNI_ARGS) : [],
    cniVersion: config.cniVersion,
    networkName: config.name,
    delegate: config.delegate,
    delegates: delegatesOf(config),
    portMappings: command === 'ADD' ? portMappingsOf(config.runtimeConfig) : [],
    validAttachments: command === 'GC' ? validAttachmentsOf(request.config) : [],
  };
}
