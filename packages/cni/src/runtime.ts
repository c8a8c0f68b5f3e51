import { statSync } from 'node:fs';
import * as t from 'io-ts';
import { createCniCache } from './cache.js';
import type { CacheEntry, CniCache } from './cache.js';
import { offeredVersions, parseNetworkConfigText } from './config.js';
import type { NetworkConfig, PluginConfig } from './config.js';
import { decode } from './decode.js';
import { CniError, codeName, invalidArgument, isCniError } from './errors.js';
import type { CniVerb } from './errors.js';
import { createNodePluginExec } from './exec.js';
import type { PluginExec, PluginExecResult, StartedPlugin } from './exec.js';
import { silentLogger } from './logger.js';
import type { Logger } from './logger.js';
import { DEFAULT_PLUGIN_DIRS, findPlugin } from './lookup.js';
import { ResultError, encodeResult, parseResult } from './result.js';
import type { CniResult } from './result.js';
import { checkArgs, checkContainerId, checkIfName, formatArgs } from './validate.js';
import type { CniArgs } from './validate.js';
import { SPEC_VERSION, atLeast, isVersion, negotiateVersion } from './version.js';
import type { PluginVersions } from './version.js';

/** One attachment of a container to a network: what ADD, CHECK and DEL act on. */
export interface Attachment {
  readonly containerId: string;
  /** The container's netns path. DEL goes on when it is gone. */
  readonly netns: string;
  readonly ifName: string;
  /** CNI_ARGS pairs; `IgnoreUnknown=1` is put first whenever there are any. */
  readonly args?: CniArgs;
  /** Capability arguments; each plugin gets, as runtimeConfig, those it declares. */
  readonly capabilityArgs?: Readonly<Record<string, unknown>>;
}

export interface CniRuntimeOptions {
  /** Searched in order. Default /opt/cni/bin, /usr/libexec/cni, /usr/lib/cni. Also CNI_PATH. */
  readonly pluginDirs?: readonly string[];
  /** The result cache (libcni layout). Default /var/lib/cni. */
  readonly cacheDir?: string;
  /** How plugins run. Default: `createNodePluginExec()` (posix_spawn), in this process's network namespace. */
  readonly exec?: PluginExec;
  /** Per plugin process, after which it is killed. Default 60 000 ms. */
  readonly timeoutMs?: number;
  /** The environment plugins start from (the CNI_* variables are set over it). Default process.env. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly logger?: Logger;
}

export interface CallOptions {
  readonly signal?: AbortSignal;
}

export interface AddResult {
  /** The version the chain ran at. */
  readonly cniVersion: string;
  readonly result: CniResult;
  /** The result as JSON at `cniVersion`, as cached and as `allocnet cni add` prints it. */
  readonly json: Record<string, unknown>;
}

export interface NetworkVersions {
  /** The version the chain runs at, or undefined when no offered version suits every plugin. */
  readonly cniVersion: string | undefined;
  readonly offered: readonly string[];
  readonly plugins: readonly PluginVersions[];
}

export interface GcReport {
  /** Cached attachments of the network that were not in the valid list, and were deleted. */
  readonly deleted: readonly { readonly containerId: string; readonly ifName: string }[];
  /** Every failure; GC goes on past each one. */
  readonly errors: readonly CniError[];
  /** False when the network has `disableGC`. */
  readonly ran: boolean;
}

export interface CniRuntime {
  readonly pluginDirs: readonly string[];
  readonly cache: CniCache;
  /**
   * Runs ADD over the chain in order. When a plugin fails, runs DEL over the whole chain in
   * reverse (so nothing stays half-applied) and throws the ADD error. Caches the final result.
   */
  add(network: NetworkConfig, attachment: Attachment, options?: CallOptions): Promise<AddResult>;
  /** CHECK in order with the cached result; a no-op when the network has `disableCheck`. */
  check(
    network: NetworkConfig,
    attachment: Attachment,
    options?: CallOptions,
  ): Promise<{ readonly ran: boolean }>;
  /** DEL in reverse with the cached result; goes on when the netns is gone. Removes the cache entry. */
  del(network: NetworkConfig, attachment: Attachment, options?: CallOptions): Promise<void>;
  /** STATUS in order (networks at 1.1.0 or later; others report `ran: false`). */
  status(network: NetworkConfig, options?: CallOptions): Promise<{ readonly ran: boolean }>;
  /** DELs cached attachments of the network not in `valid`, then GC on each plugin (1.1.0 or later). */
  gc(
    network: NetworkConfig,
    valid: readonly { readonly containerId: string; readonly ifName: string }[],
    options?: CallOptions,
  ): Promise<GcReport>;
  /** Each plugin's VERSION answer and the version the chain runs at. */
  versions(network: NetworkConfig, options?: CallOptions): Promise<NetworkVersions>;
  /** ADDs that began and never finished (a crash, or a DEL that failed to undo a failed ADD). */
  pendingAdds(): Promise<CacheEntry[]>;
  /** Runs DEL for a pending ADD with the configuration and arguments it recorded. */
  undoPendingAdd(entry: CacheEntry, options?: CallOptions): Promise<void>;
}

const ErrorJson = t.intersection([
  t.type({ code: t.number, msg: t.string }),
  t.partial({ details: t.string }),
]);
const VersionJson = t.intersection([
  t.type({ cniVersion: t.string }),
  t.partial({ supportedVersions: t.array(t.string) }),
]);
const CapabilityArgs = t.record(t.string, t.unknown);

function readErrorJson(text: string): t.TypeOf<typeof ErrorJson> | undefined {
  if (text.trim() === '') return undefined;
  try {
    const decoded = decode(ErrorJson, JSON.parse(text));
    return decoded.ok ? decoded.value : undefined;
  } catch {
    // Not JSON: the caller falls back to the text itself.
    return undefined;
  }
}

function oneLine(text: string): string {
  const trimmed = text.trim().replace(/\s*\n\s*/g, ' ');
  return trimmed.length > 500 ? `${trimmed.slice(0, 497)}...` : trimmed;
}

interface Step {
  readonly plugin: PluginConfig;
  readonly path: string;
}

const CNI_VARIABLES = new Set([
  'CNI_COMMAND',
  'CNI_CONTAINERID',
  'CNI_NETNS',
  'CNI_IFNAME',
  'CNI_ARGS',
  'CNI_PATH',
]);

/** The attachment a cache entry (a result, or an ADD-in-progress marker) records. */
function attachmentOf(entry: CacheEntry): Attachment {
  return {
    containerId: entry.containerId,
    ifName: entry.ifName,
    netns: entry.netns ?? '',
    args: entry.cniArgs,
    capabilityArgs: entry.capabilityArgs,
  };
}

/** Creates a runtime. Nothing runs until a method is called. */
export function createCniRuntime(options: CniRuntimeOptions = {}): CniRuntime {
  const pluginDirs = options.pluginDirs ?? DEFAULT_PLUGIN_DIRS;
  const cache = createCniCache(options.cacheDir ?? '/var/lib/cni');
  const executor = options.exec ?? createNodePluginExec();
  const timeoutMs = options.timeoutMs ?? 60_000;
  const logger = options.logger ?? silentLogger;
  // The six CNI_* variables are always set on each call; an inherited one must not survive.
  const baseEnv = Object.fromEntries(
    Object.entries(options.env ?? process.env).filter(
      (entry): entry is [string, string] => entry[1] !== undefined && !CNI_VARIABLES.has(entry[0]),
    ),
  );
  const cniPath = pluginDirs.join(':');
  // VERSION answers per binary, valid while the file's mtime, size and inode stay the same.
  const versionCache = new Map<string, { stamp: string; versions: Promise<readonly string[]> }>();

  function env(
    verb: CniVerb,
    a: { containerId: string; netns: string; ifName: string; args: CniArgs },
  ): Record<string, string> {
    return {
      ...baseEnv,
      CNI_COMMAND: verb,
      CNI_CONTAINERID: a.containerId,
      CNI_NETNS: a.netns,
      CNI_IFNAME: a.ifName,
      CNI_ARGS: formatArgs(a.args),
      CNI_PATH: cniPath,
    };
  }

  function pluginFailure(
    step: Step,
    verb: CniVerb,
    containerId: string | undefined,
    result: PluginExecResult,
  ): CniError {
    const context = `plugin ${JSON.stringify(step.plugin.type)} failed (${verb})${containerId === undefined ? '' : ` for ${JSON.stringify(containerId)}`}`;
    const base = {
      plugin: step.plugin.type,
      verb,
      ...(containerId === undefined ? {} : { containerId }),
    };
    if (result.kind === 'failed') {
      const msg = result.message;
      return new CniError(`${context}: ${msg}`, {
        ...base,
        code: result.reason === 'killed' ? 'plugin-error' : result.reason,
        msg,
      });
    }
    const reported = readErrorJson(result.stdout) ?? readErrorJson(result.stderr);
    if (reported !== undefined) {
      const text =
        reported.details === undefined || reported.details === ''
          ? reported.msg
          : `${reported.msg}: ${reported.details}`;
      return new CniError(`${context}: ${text}`, {
        ...base,
        code: codeName(reported.code),
        specCode: reported.code,
        msg: reported.msg,
        ...(reported.details === undefined ? {} : { details: reported.details }),
      });
    }
    const text =
      result.stderr.trim() !== ''
        ? oneLine(result.stderr)
        : result.stdout.trim() !== ''
          ? oneLine(result.stdout)
          : 'no error message';
    const msg = `${text} (exit status ${result.exitCode})`;
    return new CniError(`${context}: ${msg}`, { ...base, code: 'plugin-error', msg });
  }

  function start(
    step: Step,
    environment: Record<string, string>,
    call: CallOptions | undefined,
  ): StartedPlugin {
    return executor.start({
      path: step.path,
      env: environment,
      timeoutMs,
      ...(call?.signal === undefined ? {} : { signal: call.signal }),
    });
  }

  /** Runs one started plugin; resolves its stdout on exit 0, throws `CniError` otherwise. */
  async function finish(
    started: StartedPlugin,
    step: Step,
    verb: CniVerb,
    stdin: string,
    containerId: string | undefined,
  ): Promise<string> {
    const began = performance.now();
    const result = await started.run(stdin);
    logger.debug('cni plugin', {
      plugin: step.plugin.type,
      verb,
      containerId,
      ms: Math.round(performance.now() - began),
      ...(result.kind === 'exited' ? { exitCode: result.exitCode } : { failed: result.reason }),
    });
    if (result.kind === 'exited' && result.exitCode === 0) {
      if (result.stderr.trim() !== '')
        logger.debug('cni plugin stderr', {
          plugin: step.plugin.type,
          verb,
          stderr: result.stderr,
        });
      return result.stdout;
    }
    throw pluginFailure(step, verb, containerId, result);
  }

  /** Runs one plugin on its own. */
  function run(
    step: Step,
    verb: CniVerb,
    stdin: string,
    environment: Record<string, string>,
    containerId: string | undefined,
    call: CallOptions | undefined,
  ): Promise<string> {
    return finish(start(step, environment, call), step, verb, stdin, containerId);
  }

  /**
   * Runs `steps` one after another. Every plugin's process is started early and waits for its
   * stdin, so nothing happens out of order: the first before `before` runs, the rest right after
   * the first gets its stdin, while it works. Process start-up (a fork of this process, then the
   * plugin's own runtime init) thus happens during the cheap first plugin (loopback, in most
   * chains) instead of during the expensive ones. `stdinAt(i)` is asked only when step i is about
   * to get its stdin, after step i - 1 finished. Stops at the first failure, cancelling the
   * processes that never got their stdin.
   */
  async function runChain(
    steps: readonly Step[],
    verb: CniVerb,
    environment: Record<string, string>,
    containerId: string | undefined,
    call: CallOptions | undefined,
    stdinAt: (index: number) => string,
    onOutput: (index: number, stdout: string) => void = () => undefined,
    before: () => Promise<void> = () => Promise.resolve(),
  ): Promise<void> {
    if (steps.length === 0) return;
    const started: (StartedPlugin | undefined)[] = [start(steps[0] as Step, environment, call)];
    let done = 0;
    try {
      await before();
      for (let i = 0; i < steps.length; i++) {
        const running = finish(
          started[i] as StartedPlugin,
          steps[i] as Step,
          verb,
          stdinAt(i),
          containerId,
        );
        started[i] = undefined;
        if (i === 0)
          for (let j = 1; j < steps.length; j++)
            started[j] = start(steps[j] as Step, environment, call);
        onOutput(i, await running);
        done = i + 1;
      }
    } catch (error) {
      for (const waiting of started.slice(done)) waiting?.cancel();
      throw error;
    }
  }

  function resolve(network: NetworkConfig): Step[] {
    return network.plugins.map((plugin) => ({ plugin, path: findPlugin(plugin.type, pluginDirs) }));
  }

  async function supportedVersions(
    step: Step,
    call: CallOptions | undefined,
  ): Promise<readonly string[]> {
    const info = statSync(step.path);
    const stamp = `${info.mtimeMs}:${info.size}:${info.ino}`;
    const hit = versionCache.get(step.path);
    if (hit?.stamp === stamp) return hit.versions;
    const versions = (async () => {
      const environment = env('VERSION', {
        containerId: '',
        netns: 'dummy',
        ifName: 'dummy',
        args: [],
      });
      let stdout: string;
      try {
        stdout = await run(
          step,
          'VERSION',
          JSON.stringify({ cniVersion: SPEC_VERSION }),
          environment,
          undefined,
          call,
        );
      } catch (error) {
        // Plugins older than VERSION answer "unknown CNI_COMMAND: VERSION": they speak 0.1.0 only.
        if (isCniError(error) && /unknown CNI_COMMAND: VERSION/.test(error.msg)) return ['0.1.0'];
        throw error;
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(stdout);
      } catch {
        parsed = undefined;
      }
      const decoded = decode(VersionJson, parsed);
      const answer = decoded.ok ? decoded.value : undefined;
      const list =
        answer?.supportedVersions ??
        (answer?.cniVersion === '0.2.0' ? ['0.1.0', '0.2.0'] : undefined);
      if (list === undefined) {
        const msg = `VERSION answer is not {cniVersion, supportedVersions}: ${oneLine(stdout) || 'nothing'}`;
        throw new CniError(`plugin ${JSON.stringify(step.plugin.type)} failed (VERSION): ${msg}`, {
          code: 'invalid-result',
          msg,
          plugin: step.plugin.type,
          verb: 'VERSION',
        });
      }
      return list.filter(isVersion);
    })();
    versionCache.set(step.path, { stamp, versions });
    // A failed answer is not kept: the next call asks again.
    versions.catch(() => {
      if (versionCache.get(step.path)?.versions === versions) versionCache.delete(step.path);
    });
    return versions;
  }

  async function negotiate(
    network: NetworkConfig,
    steps: readonly Step[],
    call: CallOptions | undefined,
  ): Promise<NetworkVersions> {
    // Every binary is asked at once; most answers come from the cache anyway.
    const plugins: PluginVersions[] = await Promise.all(
      steps.map(async (step) => ({
        type: step.plugin.type,
        path: step.path,
        supportedVersions: await supportedVersions(step, call),
      })),
    );
    const offered = offeredVersions(network);
    return { cniVersion: negotiateVersion(offered, plugins), offered, plugins };
  }

  async function version(
    network: NetworkConfig,
    steps: readonly Step[],
    call: CallOptions | undefined,
  ): Promise<string> {
    const negotiated = await negotiate(network, steps, call);
    if (negotiated.cniVersion !== undefined) return negotiated.cniVersion;
    const which = negotiated.plugins
      .map((p) => `${p.type} supports ${p.supportedVersions.join(', ')}`)
      .join('; ');
    const msg = `network ${JSON.stringify(network.name)} offers ${negotiated.offered.join(', ')}, and no one of them is supported by every plugin (${which})`;
    throw new CniError(msg, { code: 'no-common-version', specCode: 1, msg, network: network.name });
  }

  /** A plugin's stdin: its object minus `capabilities`, with name, version, runtimeConfig, prevResult. */
  function stdinFor(
    plugin: PluginConfig,
    network: NetworkConfig,
    cniVersion: string,
    extra: {
      capabilityArgs?: Readonly<Record<string, unknown>>;
      prevResult?: Record<string, unknown>;
      fields?: Record<string, unknown>;
    },
  ): string {
    const rest = Object.fromEntries(
      Object.entries(plugin.raw).filter(
        ([k]) => !['capabilities', 'runtimeConfig', 'prevResult', 'name', 'cniVersion'].includes(k),
      ),
    );
    const runtimeConfig: Record<string, unknown> = {};
    for (const capability of plugin.capabilities) {
      const value = extra.capabilityArgs?.[capability];
      if (value !== undefined) runtimeConfig[capability] = value;
    }
    return JSON.stringify({
      cniVersion,
      name: network.name,
      ...rest,
      ...(Object.keys(runtimeConfig).length > 0 ? { runtimeConfig } : {}),
      ...(extra.prevResult === undefined ? {} : { prevResult: extra.prevResult }),
      ...extra.fields,
    });
  }

  function checked(attachment: Attachment, verb: CniVerb) {
    const containerId = checkContainerId(attachment.containerId);
    const ifName = checkIfName(attachment.ifName);
    const args = checkArgs(attachment.args ?? []);
    const caps = decode(CapabilityArgs, attachment.capabilityArgs ?? {});
    if (!caps.ok)
      throw invalidArgument('capabilityArgs', 'should be an object of capability names to values');
    if ((verb === 'ADD' || verb === 'CHECK') && attachment.netns === '')
      throw invalidArgument('netns', 'is empty');
    if (attachment.netns.includes('\0')) throw invalidArgument('netns', 'contains a NUL character');
    return { containerId, ifName, args, netns: attachment.netns, capabilityArgs: caps.value };
  }

  function parsedResult(
    step: Step,
    verb: CniVerb,
    containerId: string,
    stdout: string,
    cniVersion: string,
  ): CniResult {
    try {
      return parseResult(stdout.trim() === '' ? {} : (JSON.parse(stdout) as unknown), cniVersion);
    } catch (error) {
      const why =
        error instanceof ResultError || error instanceof SyntaxError
          ? error.message
          : String(error);
      const msg = `result cannot be read: ${why}`;
      throw new CniError(
        `plugin ${JSON.stringify(step.plugin.type)} failed (${verb}) for ${JSON.stringify(containerId)}: ${msg}`,
        {
          code: 'invalid-result',
          msg,
          plugin: step.plugin.type,
          verb,
          containerId,
          cause: error,
        },
      );
    }
  }

  /**
   * DEL over `steps` in reverse; stops at the first failure (the spec's rule) and throws it.
   * `prepare` (the version, the prevResult) runs while the first plugin's process starts.
   */
  async function delChain(
    network: NetworkConfig,
    steps: readonly Step[],
    a: ReturnType<typeof checked>,
    call: CallOptions | undefined,
    prepare: () => Promise<{ cniVersion: string; prevResult: Record<string, unknown> | undefined }>,
  ): Promise<void> {
    const reversed = [...steps].reverse();
    let ready = { cniVersion: '', prevResult: undefined as Record<string, unknown> | undefined };
    await runChain(
      reversed,
      'DEL',
      env('DEL', a),
      a.containerId,
      call,
      (i) =>
        stdinFor((reversed[i] as Step).plugin, network, ready.cniVersion, {
          capabilityArgs: a.capabilityArgs,
          // prevResult on DEL came with spec 0.4.0.
          ...(ready.prevResult === undefined || !atLeast(ready.cniVersion, '0.4.0')
            ? {}
            : { prevResult: ready.prevResult }),
        }),
      undefined,
      async () => {
        ready = await prepare();
      },
    );
  }

  function entryOf(
    network: NetworkConfig,
    a: ReturnType<typeof checked>,
    result?: unknown,
  ): CacheEntry {
    return {
      networkName: network.name,
      containerId: a.containerId,
      ifName: a.ifName,
      netns: a.netns === '' ? undefined : a.netns,
      cniArgs: a.args,
      capabilityArgs: a.capabilityArgs,
      config: network.bytes,
      result,
    };
  }

  async function del(
    network: NetworkConfig,
    attachment: Attachment,
    call?: CallOptions,
  ): Promise<void> {
    const a = checked(attachment, 'DEL');
    const steps = resolve(network);
    await delChain(network, steps, a, call, async () => {
      const cniVersion = await version(network, steps, call);
      try {
        const cached = await cache.readResult(network.name, a.containerId, a.ifName);
        const prevResult =
          cached?.result === undefined
            ? undefined
            : encodeResult(parseResult(cached.result, cniVersion), cniVersion);
        return { cniVersion, prevResult };
      } catch (error) {
        // A cache entry that cannot be read must not block the DEL: go on without prevResult (as
        // libcni does) and remove the entry once the DEL succeeds.
        logger.warn('cni cache entry cannot be read; deleting without prevResult', {
          network: network.name,
          containerId: a.containerId,
          error: error instanceof Error ? error.message : String(error),
        });
        return { cniVersion, prevResult: undefined };
      }
    });
    await cache.removeResult(network.name, a.containerId, a.ifName);
    await cache.clearAdding(network.name, a.containerId, a.ifName);
  }

  return {
    pluginDirs,
    cache,

    async add(network, attachment, call) {
      const a = checked(attachment, 'ADD');
      const steps = resolve(network);
      const environment = env('ADD', a);
      let cniVersion = '';
      let prev: CniResult | undefined;
      // Set once the first plugin gets its stdin: from then on a failure has something to undo.
      const state = { applying: false };
      try {
        await runChain(
          steps,
          'ADD',
          environment,
          a.containerId,
          call,
          (i) => {
            state.applying = true;
            return stdinFor((steps[i] as Step).plugin, network, cniVersion, {
              capabilityArgs: a.capabilityArgs,
              ...(prev === undefined ? {} : { prevResult: encodeResult(prev, cniVersion) }),
            });
          },
          (i, stdout) => {
            prev = parsedResult(steps[i] as Step, 'ADD', a.containerId, stdout, cniVersion);
          },
          // While the first plugin's process starts: settle the version, then put the intent on
          // disk, before that plugin gets its stdin.
          async () => {
            cniVersion = await version(network, steps, call);
            await cache.markAdding(entryOf(network, a));
          },
        );
        const result = prev ?? parseResult({}, cniVersion);
        const json = encodeResult(result, cniVersion);
        await cache.writeResult(entryOf(network, a, json));
        await cache.clearAdding(network.name, a.containerId, a.ifName);
        return { cniVersion, result, json };
      } catch (error) {
        // Nothing ran (the intent could not be recorded): nothing to undo.
        if (!state.applying) throw error;
        // Undo whatever the chain did, with the last result any plugin gave, whatever the
        // caller's signal says: a cancelled ADD must not stay half-applied.
        const partial = prev === undefined ? undefined : encodeResult(prev, cniVersion);
        try {
          await delChain(network, steps, a, undefined, () =>
            Promise.resolve({ cniVersion, prevResult: partial }),
          );
          await cache.clearAdding(network.name, a.containerId, a.ifName);
        } catch (undoError) {
          if (!isCniError(error)) throw error;
          const why = isCniError(undoError) ? undoError.message : String(undoError);
          throw new CniError(
            `${error.message}; and the DEL that undoes it failed too (the ADD stays pending): ${why}`,
            {
              code: error.code,
              ...(error.specCode === undefined ? {} : { specCode: error.specCode }),
              msg: error.msg,
              ...(error.details === undefined ? {} : { details: error.details }),
              ...(error.plugin === undefined ? {} : { plugin: error.plugin }),
              verb: 'ADD',
              containerId: a.containerId,
              network: network.name,
              cause: undoError,
            },
          );
        }
        throw error;
      }
    },

    async check(network, attachment, call) {
      const a = checked(attachment, 'CHECK');
      if (network.disableCheck) return { ran: false };
      const steps = resolve(network);
      const cniVersion = await version(network, steps, call);
      if (!atLeast(cniVersion, '0.4.0')) {
        const msg = `network ${JSON.stringify(network.name)} runs at ${cniVersion}; CHECK needs 0.4.0 or later`;
        throw new CniError(msg, {
          code: 'check-not-supported',
          msg,
          network: network.name,
          verb: 'CHECK',
        });
      }
      const cached = await cache.readResult(network.name, a.containerId, a.ifName);
      if (cached?.result === undefined) {
        const msg = `no cached ADD result for ${JSON.stringify(a.containerId)} (${a.ifName}) in network ${JSON.stringify(network.name)}; CHECK needs a completed ADD`;
        throw new CniError(msg, {
          code: 'not-added',
          msg,
          network: network.name,
          verb: 'CHECK',
          containerId: a.containerId,
        });
      }
      let prevResult: Record<string, unknown>;
      try {
        prevResult = encodeResult(parseResult(cached.result, cniVersion), cniVersion);
      } catch (error) {
        const msg = `the cached ADD result for ${JSON.stringify(a.containerId)} cannot be read: ${(error as Error).message}`;
        throw new CniError(msg, {
          code: 'cache',
          specCode: 5,
          msg,
          network: network.name,
          verb: 'CHECK',
          cause: error,
        });
      }
      await runChain(steps, 'CHECK', env('CHECK', a), a.containerId, call, (i) =>
        stdinFor((steps[i] as Step).plugin, network, cniVersion, {
          capabilityArgs: a.capabilityArgs,
          prevResult,
        }),
      );
      return { ran: true };
    },

    del,

    async status(network, call) {
      const steps = resolve(network);
      const cniVersion = await version(network, steps, call);
      if (!atLeast(cniVersion, '1.1.0')) return { ran: false };
      const environment = env('STATUS', { containerId: '', netns: '', ifName: '', args: [] });
      await runChain(steps, 'STATUS', environment, undefined, call, (i) =>
        stdinFor((steps[i] as Step).plugin, network, cniVersion, {}),
      );
      return { ran: true };
    },

    async gc(network, valid, call) {
      if (network.disableGC) return { deleted: [], errors: [], ran: false };
      const keep = new Set(valid.map((v) => `${v.containerId}\0${v.ifName}`));
      const errors: CniError[] = [];
      const deleted: { containerId: string; ifName: string }[] = [];
      const asError = (error: unknown): CniError => {
        if (isCniError(error)) return error;
        const msg = error instanceof Error ? error.message : String(error);
        return new CniError(msg, {
          code: 'plugin-error',
          msg,
          network: network.name,
          verb: 'GC',
          cause: error,
        });
      };
      for (const entry of await cache.listResults()) {
        if (entry.networkName !== network.name || keep.has(`${entry.containerId}\0${entry.ifName}`))
          continue;
        try {
          await del(network, attachmentOf(entry), call);
          deleted.push({ containerId: entry.containerId, ifName: entry.ifName });
        } catch (error) {
          errors.push(asError(error));
        }
      }
      try {
        const steps = resolve(network);
        const cniVersion = await version(network, steps, call);
        if (atLeast(cniVersion, '1.1.0')) {
          const attachments = valid.map((v) => ({ containerID: v.containerId, ifname: v.ifName }));
          const environment = env('GC', { containerId: '', netns: '', ifName: '', args: [] });
          for (const step of steps) {
            // `cni.dev/attachments` is the name spec-v1.1.0 first gave the key; libcni sends both.
            const fields = {
              'cni.dev/valid-attachments': attachments,
              'cni.dev/attachments': attachments,
            };
            try {
              await run(
                step,
                'GC',
                stdinFor(step.plugin, network, cniVersion, { fields }),
                environment,
                undefined,
                call,
              );
            } catch (error) {
              errors.push(asError(error));
            }
          }
        }
      } catch (error) {
        errors.push(asError(error));
      }
      return { deleted, errors, ran: true };
    },

    async versions(network, call) {
      return negotiate(network, resolve(network), call);
    },

    pendingAdds: () => cache.listAdding(),

    async undoPendingAdd(entry, call) {
      const network = parseNetworkConfigText(
        entry.config,
        `pending ADD of ${entry.networkName}-${entry.containerId}-${entry.ifName}`,
      );
      await del(network, attachmentOf(entry), call);
    },
  };
}
