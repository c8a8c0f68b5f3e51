import { RunnerError } from '../errors.js';
import type { NetnsManager } from '../netns.js';

export type NetnsMethod = 'create' | 'remove' | 'exists' | 'list';

export interface NetnsCall {
  readonly method: NetnsMethod;
  /** create/remove: the name; exists: the path. */
  readonly arg?: string;
}

/**
 * A hand-written fake `NetnsManager` that records calls and keeps a set of namespaces: the named
 * ones under `dir` and, for task drivers, any other paths added with `addPath`. `create` of a
 * name that exists fails as `ip netns add` does.
 */
export interface RecordingNetns extends NetnsManager {
  readonly calls: readonly NetnsCall[];
  callsOf(method: NetnsMethod): readonly NetnsCall[];
  /** Names of the namespaces under `dir`. */
  readonly names: ReadonlySet<string>;
  /** Makes a named namespace out of band (another program, a leftover). */
  add(name: string): this;
  /** Deletes a named namespace out of band. */
  delete(name: string): this;
  /** Makes a namespace at any path (a task driver's). */
  addPath(path: string): this;
  deletePath(path: string): this;
  /** The next `times` calls of `method` throw `error`. */
  fail(method: NetnsMethod, error: unknown, times?: number): this;
  /** Awaited at the start of every call, after it is recorded. */
  before: ((call: NetnsCall) => Promise<void> | void) | undefined;
  clearCalls(): void;
}

export function createRecordingNetns(options: { readonly dir?: string } = {}): RecordingNetns {
  const dir = options.dir ?? '/run/netns';
  const calls: NetnsCall[] = [];
  const names = new Set<string>();
  const paths = new Set<string>();
  const failures: { method: NetnsMethod; error: unknown }[] = [];

  async function enter(call: NetnsCall): Promise<void> {
    calls.push(call);
    await fake.before?.(call);
    const i = failures.findIndex((f) => f.method === call.method);
    if (i >= 0) {
      const [failure] = failures.splice(i, 1);
      throw failure?.error;
    }
  }

  const fake: RecordingNetns = {
    calls,
    callsOf: (method) => calls.filter((c) => c.method === method),
    names,
    before: undefined,
    add(name) {
      names.add(name);
      return fake;
    },
    delete(name) {
      names.delete(name);
      return fake;
    },
    addPath(path) {
      paths.add(path);
      return fake;
    },
    deletePath(path) {
      paths.delete(path);
      return fake;
    },
    fail(method, error, times = 1) {
      for (let i = 0; i < times; i++) failures.push({ method, error });
      return fake;
    },
    clearCalls() {
      calls.length = 0;
    },
    pathOf: (name) => `${dir}/${name}`,

    async create(name) {
      await enter({ method: 'create', arg: name });
      if (names.has(name)) {
        throw new RunnerError(
          `ip netns add ${name} failed (exit status 1): Cannot create namespace file "${dir}/${name}": File exists`,
          { code: 'netns' },
        );
      }
      names.add(name);
      return `${dir}/${name}`;
    },

    async remove(name) {
      await enter({ method: 'remove', arg: name });
      return names.delete(name);
    },

    async exists(path) {
      await enter({ method: 'exists', arg: path });
      if (paths.has(path)) return true;
      return path.startsWith(`${dir}/`) && names.has(path.slice(dir.length + 1));
    },

    async list() {
      await enter({ method: 'list' });
      return [...names].sort();
    },
  };
  return fake;
}
