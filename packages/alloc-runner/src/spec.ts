import * as t from 'io-ts';
import { checkedString, decode } from '@allocnet/cni';
import type { FieldPath } from '@allocnet/base';
import {
  checkAllocId as checkConfiguratorAllocId,
  decodeSpec as decodeConfiguratorSpec,
} from '@allocnet/cni-configurator';
import type { AllocNetworkSpec, AllocPort, ValidAllocSpec } from '@allocnet/cni-configurator';
import { absolutePathProblem } from '@allocnet/netns';
import { invalidInput, invalidInputOf } from './errors.js';

/**
 * Where an attachment made through the agent's CNI server came from: the runtime that asked (as
 * its CNI_ARGS tell: `kubernetes`, `nomad`, `podman`, or `cni` when they tell nothing), and the
 * CNI_CONTAINERID and CNI_IFNAME it asked with. The namespace is `netnsPath`, the network
 * `network`. Absent for an allocation set up over gRPC.
 */
export interface CniOrigin {
  readonly runtime: string;
  readonly containerId: string;
  readonly ifName: string;
}

/** What restore does with a setup that a crash (or a kill) interrupted. */
export type InterruptedSetup = 'fail' | 'finish';

/**
 * One of an allocation's networks (docs/architecture.md): a CNI network on its own interface in
 * the allocation's namespace. `network` empty or absent is the embedded default; `ifName`
 * defaults to `eth0` for the first, `net<k>` for the one at index k.
 */
export interface AttachmentSpec {
  readonly network?: string;
  readonly ifName?: string;
  readonly ports?: readonly AllocPort[];
  readonly cniArgs?: Readonly<Record<string, string>>;
  /** Addresses asked for through the plugins' `ips` capability (or host-local's args). */
  readonly ips?: readonly string[];
  /** Asked for through the `mac` capability (tuning). */
  readonly mac?: string;
  /** Whether this attachment carries the default route (by default the first does). */
  readonly defaultRoute?: boolean;
}

/**
 * What the runner is asked to set up: the configurator's spec, plus where the allocation's
 * network namespace is when a task driver made it.
 */
export interface RunnerSpec extends AllocNetworkSpec {
  /**
   * A network namespace a task driver made (`/proc/<pid>/ns/net`, `/var/run/docker/netns/…`).
   * Absent: the runner makes `/run/netns/<netnsPrefix><allocId>` and removes it at teardown. The
   * runner never removes a namespace it did not make.
   */
  readonly netnsPath?: string;
  /**
   * After a crash during this allocation's setup, restore undoes what was done; then `fail`
   * (default) reports the allocation failed, `finish` sets it up again.
   */
  readonly interruptedSetup?: InterruptedSetup;
  /** Set when a CNI runtime asked for this attachment (the agent's CNI server). */
  readonly origin?: CniOrigin;
  /**
   * The whole list of the allocation's networks, the first the primary. Absent or empty: the
   * single form (the top-level network, ports, legacy networks, args and ifName), one attachment.
   * With it, the top-level `network` and `ifName` stay empty; the top-level ports and legacy
   * networks ride on the first attachment, the top-level args on every one (its own on top).
   */
  readonly attachments?: readonly AttachmentSpec[];
}

/** A spec `decodeSpec` gave (or that came back from the store): what the runner takes as is. */
export type ValidRunnerSpec = RunnerSpec & { readonly [validRunnerSpec]: true };
declare const validRunnerSpec: unique symbol;

// Specs this process decoded, and the configurator's own decoded part of each (see
// `configuratorSpec`): a spec decoded once at the edge is not decoded again below it.
const decoded = new WeakMap<object, ValidAllocSpec>();

/** Whether `decodeSpec` made this spec (so that `setup` takes it as is). */
export function isValidSpec(value: unknown): value is ValidRunnerSpec {
  return typeof value === 'object' && value !== null && decoded.has(value);
}

const WHAT = 'invalid allocation spec';

function show(value: unknown): string {
  const text = (JSON.stringify(value) as string | undefined) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/**
 * What is wrong with `path` as a namespace path, or undefined: @allocnet/netns's clean absolute
 * path without a repeated "/" (the record keeps the path as given, and the reconciler compares
 * paths). A trailing "/" stays allowed: records written before this rule may hold one, and a
 * store must open whatever it accepted before.
 */
function netnsPathProblem(path: string): string | undefined {
  return (
    absolutePathProblem(path) ??
    (path.includes('//') ? 'is not a normalized path (no repeated "/")' : undefined)
  );
}

const netnsPathCodec = checkedString(
  'NetnsPath',
  (s) => netnsPathProblem(s) === undefined,
  (s) => `${JSON.stringify(s)} ${netnsPathProblem(s) ?? ''}`,
);

const interruptedSetupCodec = t.keyof({ fail: null, finish: null });

const originText = (name: string, max: number) =>
  checkedString(
    name,
    (s) => s !== '' && s.length <= max && /^[A-Za-z0-9_.-]+$/.test(s),
    (s) => `${JSON.stringify(s.slice(0, 80))} is not 1 to ${max} of [A-Za-z0-9_.-]`,
  );
const originCodec = t.exact(
  t.type({
    runtime: originText('Runtime', 32),
    containerId: originText('ContainerId', 256),
    ifName: originText('IfName', 15),
  }),
);

/** The fields a spec may have, by where they are; anything else is a mistake (a misspelling). */
const PORT_FIELDS = new Set(['label', 'value', 'to', 'hostIp', 'protocol']);
const LEGACY_PORT_FIELDS = new Set(['label', 'value', 'to']);
const LEGACY_NETWORK_FIELDS = new Set(['reservedPorts', 'dynamicPorts']);
const SPEC_FIELDS = new Set([
  'allocId',
  'region',
  'namespace',
  'jobId',
  'groupName',
  'network',
  'ports',
  'legacyNetworks',
  'cniArgs',
  'netnsPath',
  'interruptedSetup',
  'origin',
  'ifName',
]);

function unknownField(
  value: unknown,
  known: ReadonlySet<string>,
  at: FieldPath,
): FieldPath | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const key = Object.keys(value).find((k) => !known.has(k));
  return key === undefined ? undefined : [...at, key];
}

function firstUnknownField(
  spec: AllocNetworkSpec & Record<string, unknown>,
): FieldPath | undefined {
  const top = unknownField(spec, SPEC_FIELDS, ['spec']);
  if (top !== undefined) return top;
  for (const [i, port] of (spec.ports ?? []).entries()) {
    const found = unknownField(port, PORT_FIELDS, ['spec', 'ports', i]);
    if (found !== undefined) return found;
  }
  for (const [i, net] of (spec.legacyNetworks ?? []).entries()) {
    const found = unknownField(net, LEGACY_NETWORK_FIELDS, ['spec', 'legacyNetworks', i]);
    if (found !== undefined) return found;
    for (const list of ['reservedPorts', 'dynamicPorts'] as const) {
      for (const [j, port] of (net[list] ?? []).entries()) {
        const inner = unknownField(port, LEGACY_PORT_FIELDS, [
          'spec',
          'legacyNetworks',
          i,
          list,
          j,
        ]);
        if (inner !== undefined) return inner;
      }
    }
  }
  return undefined;
}

/**
 * The agent's caps on what one allocation may ask for (its `limits.maxPorts` and
 * `limits.maxCniArgs`), below the decoder's fixed limits (1024 ports, 64 CNI args): each port
 * costs portmap rules in every plugin run, and a few hundred make a setup take seconds (1,000
 * never finish within a plugin's timeout). Front doors pass them to `decodeSpec`; the store does
 * not, so that a record written under a larger cap still restores and tears down.
 */
export interface SpecLimits {
  /** Ports: `ports`, or when it is empty every legacy network's reserved and dynamic ports together. */
  readonly maxPorts: number;
  /** Entries of `cniArgs`. */
  readonly maxCniArgs: number;
}

/** What a setup will map: `ports`, or (only when there are none) the legacy networks' ports. */
function portCount(spec: RunnerSpec): { path: FieldPath; count: number } {
  const ports = spec.ports ?? [];
  if (ports.length > 0) return { path: ['spec', 'ports'], count: ports.length };
  const legacy = (spec.legacyNetworks ?? []).reduce(
    (n, net) => n + (net.reservedPorts ?? []).length + (net.dynamicPorts ?? []).length,
    0,
  );
  return { path: ['spec', 'legacyNetworks'], count: legacy };
}

function checkLimits(spec: RunnerSpec, limits: SpecLimits): void {
  const ports = portCount(spec);
  if (ports.count > limits.maxPorts)
    throw invalidInput(WHAT, ports.path, [
      `has ${ports.count} ports, more than the agent's limit of ${limits.maxPorts} (limits.maxPorts)`,
    ]);
  const args = Object.keys(spec.cniArgs ?? {}).length;
  if (args > limits.maxCniArgs)
    throw invalidInput(
      WHAT,
      ['spec', 'cniArgs'],
      [
        `has ${args} entries, more than the agent's limit of ${limits.maxCniArgs} (limits.maxCniArgs)`,
      ],
    );
}

/**
 * Decodes a spec at the runner's edge; a bad one is `invalid-argument` naming the field. The
 * configurator's own decoder checks the fields it owns (so that the runner accepts exactly what
 * the configurator will); the runner checks its own two fields and refuses unknown fields at
 * every level, so that a misspelt field (`hostIP`) is an error rather than silently ignored.
 * With `limits` (a front door's), a spec over them is refused too, also one decoded before.
 * The result is taken as is by `setup`, and its configurator part by the configurator.
 */
export function decodeSpec(value: unknown, limits?: SpecLimits): ValidRunnerSpec {
  const spec = isValidSpec(value) ? value : decodeNew(value);
  if (limits !== undefined) checkLimits(spec, limits);
  return spec;
}

function decodeNew(value: unknown): ValidRunnerSpec {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalidInput(WHAT, ['spec'], [`should be an object, got ${show(value)}`]);
  }
  const input = value as Record<string, unknown>;
  const { netnsPath, interruptedSetup, origin, ...rest } = input;
  let spec: ValidAllocSpec;
  try {
    spec = decodeConfiguratorSpec(rest);
  } catch (error) {
    const bad = invalidInputOf(error);
    if (bad === undefined) throw error;
    throw invalidInput(WHAT, ['spec', ...bad.path], bad.problem, { cause: error });
  }
  const unknown = firstUnknownField(spec as unknown as AllocNetworkSpec & Record<string, unknown>);
  if (unknown !== undefined) throw invalidInput(WHAT, unknown, ['is not a known field']);
  const out: { -readonly [K in keyof RunnerSpec]: RunnerSpec[K] } = { ...spec };
  if (netnsPath !== undefined) {
    const path = decode(netnsPathCodec, netnsPath);
    if (!path.ok) throw invalidInput(WHAT, ['spec', 'netnsPath'], [path.problem.problem]);
    out.netnsPath = path.value;
  }
  if (interruptedSetup !== undefined) {
    const policy = decode(interruptedSetupCodec, interruptedSetup);
    if (!policy.ok) {
      throw invalidInput(
        WHAT,
        ['spec', 'interruptedSetup'],
        [`should be "fail" or "finish", got ${show(interruptedSetup)}`],
      );
    }
    out.interruptedSetup = policy.value;
  }
  if (origin !== undefined) {
    const known = decode(originCodec, origin);
    if (!known.ok)
      throw invalidInput(WHAT, ['spec', 'origin', ...known.problem.path], [known.problem.problem]);
    out.origin = known.value;
  }
  decoded.set(out, spec);
  return out as unknown as ValidRunnerSpec;
}

/** Checks an allocation id given on its own (teardown, check), as the configurator does. */
export function checkAllocId(value: unknown, field = 'allocId'): string {
  try {
    return checkConfiguratorAllocId(value, field);
  } catch (error) {
    const bad = invalidInputOf(error);
    if (bad === undefined) throw error;
    throw invalidInput('invalid allocation id', bad.path, bad.problem, { cause: error });
  }
}

/**
 * The spec the configurator gets: the runner's own fields taken off; for a spec `decodeSpec`
 * made, the configurator's decoded spec itself.
 */
export function configuratorSpec(spec: RunnerSpec): AllocNetworkSpec {
  const known = decoded.get(spec);
  if (known !== undefined) return known;
  const out: { -readonly [K in keyof RunnerSpec]?: RunnerSpec[K] } = { ...spec };
  delete out.netnsPath;
  delete out.interruptedSetup;
  delete out.origin;
  return out as AllocNetworkSpec;
}

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
  const ports = spec.ports ?? [];
  const legacy = ports.length > 0 ? [] : (spec.legacyNetworks ?? []);
  const args = spec.cniArgs ?? {};
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
  return sortKeys(out) as Record<string, Json>;
}

/** The top-level fields on which two specs differ (by their canonical forms), sorted. */
export function specDifferences(a: RunnerSpec, b: RunnerSpec): string[] {
  const ca = canonicalSpec(a);
  const cb = canonicalSpec(b);
  const keys = new Set([...Object.keys(ca), ...Object.keys(cb)]);
  return [...keys].filter((k) => JSON.stringify(ca[k]) !== JSON.stringify(cb[k])).sort();
}
