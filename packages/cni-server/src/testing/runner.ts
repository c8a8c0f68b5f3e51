// A fake of the runner's members the CNI door uses: records in a map, every call recorded, a
// setup that stores the record a test makes of the spec (a record with several attachments and
// their CNI results, which the recording configurator does not make), leaks a test sets.
import type { AllocRecord, RunnerSpec } from '@allocnet/alloc-runner';
import type { HostState, Leak } from '@allocnet/cni-configurator';
import type { CniRunner } from '../handler.js';

export interface FakeRunnerCall {
  readonly method: 'setup' | 'check' | 'teardown' | 'findLeaks';
  /** The spec (setup) or the allocation id. */
  readonly arg: RunnerSpec | string | undefined;
}

export interface FakeCniRunner extends CniRunner {
  readonly calls: FakeRunnerCall[];
  /** Stores a record as if a setup had made it. */
  put(rec: AllocRecord): void;
  /** What `findLeaks` reports. */
  leaks: readonly Leak[];
}

const NOTHING: HostState = { rules: [], chains: [], reservations: [], cacheFiles: [] };

/** A ready record of the spec with no attachment: what `recordOf` makes unless told otherwise. */
export function readyRecordOf(spec: RunnerSpec): AllocRecord {
  return {
    schema: 1,
    allocId: spec.allocId,
    spec,
    phase: 'ready',
    netnsPath: spec.netnsPath ?? '',
    netnsCreated: false,
    updatedAtMs: 0,
  };
}

export function createFakeCniRunner(
  recordOf: (spec: RunnerSpec) => AllocRecord = readyRecordOf,
): FakeCniRunner {
  const records = new Map<string, AllocRecord>();
  const calls: FakeRunnerCall[] = [];
  const fake: FakeCniRunner = {
    calls,
    leaks: [],
    put(rec) {
      records.set(rec.allocId, rec);
    },
    async setup(spec) {
      calls.push({ method: 'setup', arg: spec });
      const rec = recordOf(spec);
      records.set(rec.allocId, rec);
      return Promise.resolve({
        allocId: rec.allocId,
        network: rec.attachment?.network.name ?? '',
        interfaceName: rec.attachment?.ifName ?? '',
        address: '',
        addressIpv6: '',
        dns: undefined,
        portMappings: [],
        attempts: 1,
      });
    },
    get: (allocId) => records.get(allocId),
    list: () => [...records.values()],
    async check(allocId) {
      calls.push({ method: 'check', arg: allocId });
      return Promise.resolve({ allocId, ran: records.has(allocId) });
    },
    async teardown(allocId) {
      calls.push({ method: 'teardown', arg: allocId });
      const known = records.delete(allocId);
      return Promise.resolve({
        allocId,
        known,
        report: { allocId, delError: undefined, delRan: known, removed: NOTHING },
        netnsRemoved: false,
      });
    },
    async findLeaks() {
      calls.push({ method: 'findLeaks', arg: undefined });
      return Promise.resolve({ leaks: fake.leaks, orphans: NOTHING, namespaces: [] });
    },
  };
  return fake;
}
