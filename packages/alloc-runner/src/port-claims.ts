// The node's host ports: which allocation maps which host port, protocol and host address, so
// that no setup (either door, a restore's recreate, later an attach) maps one that a live or
// restoring allocation already maps. portmap itself would add a second DNAT behind the first and
// answer OK; the second allocation would never get a packet, and would get the port the day the
// first one goes.
//
// The rule, kept at every step: an allocation holds claims exactly while the store holds a record
// of it in `setting-up`, `ready` or `tearing-down` (a `failed` record's network is undone), and
// for the moment between its admission and its intent record:
// - a setup takes its claims in `claim`, one synchronous check-and-take (nothing can run between
//   the check and the take in the event loop), right before the intent record is written and
//   before any namespace or plugin; a conflict takes nothing and changes nothing;
// - every write of the store (`followingClaims`) releases the allocation's claims once the store
//   holds no live record of it: a removed record (teardown finished, setup rolled back), a
//   `failed` one (restore undid it), or a write that failed before a first record existed;
// - at the runner's creation, before any operation is admitted, `fromRecords` holds what every
//   live record maps (its attachment's mappings, or its spec's for an intent record without one),
//   so the claims hold across a restart.
// Claims are kept by allocation: `claim` adds to what the allocation holds (an attach later adds
// its ports to its allocation's), and an allocation never conflicts with itself (a restore's
// recreate claims again what its record holds); so two attachments of one allocation on one host
// port are refused before a claim: by the spec's decode, or for an attach by `admit`.
import { renderProblem } from '@allocnet/base';
import type { FieldPath, Logger } from '@allocnet/base';
import { portMappingsOverlap } from '@allocnet/cni-configurator';
import type {
  AllocAttachment,
  AllocNetworkSpec,
  AllocNetworkStatus,
  AllocNetworking,
  PortMapping,
  RequestedPortMapping,
} from '@allocnet/cni-configurator';
import { RunnerError, messageOf } from './errors.js';
import type { AllocRecord } from './record.js';
import { configuratorSpecsOf } from './spec.js';
import type { RunnerStore } from './store.js';

/** One host port an allocation maps: the host side of a port mapping. */
export type HeldPort = Pick<PortMapping, 'hostPort' | 'protocol' | 'hostIP'>;

export interface PortClaims {
  /**
   * Checks `wanted` against what other allocations hold and, when none overlaps, adds it to what
   * `allocId` holds, in one synchronous step. Otherwise takes nothing and throws `host-port-taken`
   * (conflict) naming the first wanted port's field, its host port, protocol and address, and the
   * holder. `root` is where the wanted ports' fields are: `spec` (a setup), `attachment` (an attach).
   */
  claim(allocId: string, wanted: readonly RequestedPortMapping[], root?: FieldPath): void;
  /** Adds `held` to what `allocId` holds without a check: what the records say is mapped. */
  hold(allocId: string, held: readonly HeldPort[]): void;
  /** Drops every claim of `allocId`. */
  release(allocId: string): void;
  /** Drops these claims of `allocId` (a detached attachment's, a failed attach's). */
  drop(allocId: string, ports: readonly HeldPort[]): void;
  /** What `allocId` holds. */
  heldBy(allocId: string): readonly HeldPort[];
  /** The allocations holding `port` (any that overlaps it). */
  holdersOf(port: HeldPort): readonly string[];
}

interface Entry {
  readonly allocId: string;
  readonly port: HeldPort;
}

/** The claims table's key: ports of another protocol or number never overlap. */
const keyOf = (p: HeldPort): string => `${p.protocol}/${p.hostPort}`;

const where = (p: HeldPort): string =>
  p.hostIP === undefined || p.hostIP === '' ? 'every address' : p.hostIP;

function portTaken(
  allocId: string,
  wanted: RequestedPortMapping,
  held: Entry,
  root: FieldPath,
): RunnerError {
  const path = [...root, ...wanted.field];
  const theirs = where(held.port) === where(wanted) ? '' : ` (on ${where(held.port)})`;
  const what = root[0] === 'spec' ? 'setup of' : 'attach to';
  const parts = [
    `${what} allocation ${JSON.stringify(allocId)} refused: `,
    { field: path },
    ` (${JSON.stringify(wanted.label)}): host port ${wanted.hostPort}/${wanted.protocol} on ${where(wanted)} is already mapped by allocation ${JSON.stringify(held.allocId)}${theirs}`,
  ];
  return new RunnerError(renderProblem(parts), {
    code: 'host-port-taken',
    allocId,
    path,
    parts,
  });
}

export function createPortClaims(log: Logger): PortClaims {
  const byPort = new Map<string, Entry[]>();
  const byAlloc = new Map<string, HeldPort[]>();

  function add(allocId: string, port: HeldPort): void {
    const entries = byPort.get(keyOf(port)) ?? [];
    const same = (e: Entry) =>
      e.allocId === allocId && (e.port.hostIP ?? '') === (port.hostIP ?? '');
    if (entries.some(same)) return;
    const held: HeldPort = {
      hostPort: port.hostPort,
      protocol: port.protocol,
      ...(port.hostIP === undefined || port.hostIP === '' ? {} : { hostIP: port.hostIP }),
    };
    entries.push({ allocId, port: held });
    byPort.set(keyOf(port), entries);
    byAlloc.set(allocId, [...(byAlloc.get(allocId) ?? []), held]);
  }

  const othersOn = (allocId: string, port: HeldPort): Entry | undefined =>
    byPort
      .get(keyOf(port))
      ?.find((e) => e.allocId !== allocId && portMappingsOverlap(e.port, port));

  return {
    claim(allocId, wanted, root = ['spec']) {
      for (const port of wanted) {
        const held = othersOn(allocId, port);
        if (held === undefined) continue;
        log.warn('setup refused: its host port is already mapped by another allocation', {
          allocId,
          holder: held.allocId,
          hostPort: port.hostPort,
          protocol: port.protocol,
          hostIp: port.hostIP ?? '',
        });
        throw portTaken(allocId, port, held, root);
      }
      for (const port of wanted) add(allocId, port);
    },

    hold(allocId, held) {
      for (const port of held) {
        const other = othersOn(allocId, port);
        if (other !== undefined) {
          // Records an older agent wrote could map a port twice: both keep their claim (the
          // port stays refused to anyone else until both are gone).
          log.warn('two recorded allocations map the same host port', {
            allocId,
            holder: other.allocId,
            hostPort: port.hostPort,
            protocol: port.protocol,
          });
        }
        add(allocId, port);
      }
    },

    release(allocId) {
      for (const port of byAlloc.get(allocId) ?? []) {
        const left = (byPort.get(keyOf(port)) ?? []).filter((e) => e.allocId !== allocId);
        if (left.length === 0) byPort.delete(keyOf(port));
        else byPort.set(keyOf(port), left);
      }
      byAlloc.delete(allocId);
    },

    drop(allocId, ports) {
      const gone = (p: HeldPort) =>
        ports.some(
          (q) =>
            keyOf(q) === keyOf(p) &&
            (q.hostIP === undefined || q.hostIP === '' ? undefined : q.hostIP) === p.hostIP,
        );
      for (const port of (byAlloc.get(allocId) ?? []).filter(gone)) {
        const left = (byPort.get(keyOf(port)) ?? []).filter(
          (e) => !(e.allocId === allocId && e.port === port),
        );
        if (left.length === 0) byPort.delete(keyOf(port));
        else byPort.set(keyOf(port), left);
      }
      const kept = (byAlloc.get(allocId) ?? []).filter((p) => !gone(p));
      if (kept.length === 0) byAlloc.delete(allocId);
      else byAlloc.set(allocId, kept);
    },

    heldBy: (allocId) => byAlloc.get(allocId) ?? [],

    holdersOf: (port) => [
      ...new Set(
        (byPort.get(keyOf(port)) ?? [])
          .filter((e) => portMappingsOverlap(e.port, port))
          .map((e) => e.allocId),
      ),
    ],
  };
}

/** Whether a record's allocation holds its ports (see the rule above). */
export const holdsPorts = (rec: AllocRecord | undefined): rec is AllocRecord =>
  rec !== undefined && rec.phase !== 'failed';

/**
 * The ports a live record maps, over every attachment: each one's attachment's, its status's,
 * else its spec's (all the spec's attachments' for a record that has not set its primary up).
 */
function recordedPorts(
  rec: AllocRecord,
  networking: Pick<AllocNetworking, 'portMappingsOf'>,
): readonly PortMapping[] {
  const of = (
    one: { readonly attachment?: AllocAttachment; readonly status?: AllocNetworkStatus },
    specs: () => readonly AllocNetworkSpec[],
  ): readonly PortMapping[] => {
    const recorded = one.attachment?.portMappings ?? one.status?.portMappings;
    if (Array.isArray(recorded)) return recorded as readonly PortMapping[];
    return specs().flatMap((s) => networking.portMappingsOf(s));
  };
  const extra = rec.extra ?? [];
  return [
    ...of(rec, () =>
      extra.length > 0
        ? [configuratorSpecsOf(rec.spec)[0] as AllocNetworkSpec]
        : configuratorSpecsOf(rec.spec),
    ),
    ...extra.flatMap((e) => of(e, () => [e.spec])),
  ];
}

/** The claims of every live record of `store`: what the runner starts with. */
export function fromRecords(
  store: Pick<RunnerStore, 'list'>,
  networking: Pick<AllocNetworking, 'portMappingsOf'>,
  log: Logger,
): PortClaims {
  const claims = createPortClaims(log);
  for (const rec of store.list()) {
    if (!holdsPorts(rec)) continue;
    try {
      claims.hold(rec.allocId, recordedPorts(rec, networking));
    } catch (error) {
      // A spec the configurator refuses now (its rules changed): it maps nothing it would set up.
      log.warn('the host ports of a record could not be read', {
        allocId: rec.allocId,
        error: messageOf(error),
      });
    }
  }
  return claims;
}

/**
 * `store`, releasing an allocation's claims after each of its writes (done or failed) once the
 * store holds no live record of it.
 */
export function followingClaims(store: RunnerStore, claims: PortClaims): RunnerStore {
  const follow = (allocId: string): void => {
    if (!holdsPorts(store.get(allocId))) claims.release(allocId);
  };
  return {
    path: store.path,
    health: () => store.health(),
    probe: () => store.probe(),
    get: (allocId) => store.get(allocId),
    list: () => store.list(),
    put: (record) =>
      store.put(record).finally(() => {
        follow(record.allocId);
      }),
    remove: (allocId) =>
      store.remove(allocId).finally(() => {
        follow(allocId);
      }),
    close: () => store.close(),
  };
}
