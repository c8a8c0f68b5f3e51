// How the runtime invokes plugins (libcni's pkg/invoke): where each binary is, what it gets (the
// CNI_* variables over the caller's environment, and its stdin), and running one plugin or a
// whole chain through the `PluginExec` seam, each run logged at debug with its duration. A plugin
// that does not exit 0 becomes a `CniError` (plugin-output.ts).
import type { NetworkConfig, PluginConfig } from './config.js';
import type { CniVerb } from './errors.js';
import type { PluginExec, StartedPlugin } from './exec.js';
import type { Logger } from './logger.js';
import { findPlugin } from './lookup.js';
import { pluginFailure } from './plugin-output.js';
import type { CniResult } from './result.js';
import { formatArgs } from './validate.js';
import type { CniArgs } from './validate.js';

export interface CallOptions {
  readonly signal?: AbortSignal;
  /**
   * Told, in a chain, each time a plugin has exited 0, with its type: a caller may start what
   * depends only on that plugin's work (the teardown audit asks after portmap's DEL whether its
   * chain is gone while firewall and bridge still run).
   */
  readonly onPluginDone?: (type: string) => void;
  /**
   * Told, on ADD, each plugin's result as it exited, with its type, before the next plugin gets
   * its stdin: a caller may start work that needs the addresses (the configurator writes the
   * masquerade rules itself while the firewall and portmap run). Throwing from it is a bug.
   */
  readonly onPluginResult?: (type: string, result: CniResult) => void;
}

/** One plugin of a chain and the binary that runs it. */
export interface Step {
  readonly plugin: PluginConfig;
  readonly path: string;
}

/** What the CNI_* variables say of an attachment (all empty for STATUS and GC). */
export interface EnvTarget {
  readonly containerId: string;
  readonly netns: string;
  readonly ifName: string;
  readonly args: CniArgs;
}

const CNI_VARIABLES = new Set([
  'CNI_COMMAND',
  'CNI_CONTAINERID',
  'CNI_NETNS',
  'CNI_IFNAME',
  'CNI_ARGS',
  'CNI_PATH',
]);

export interface InvokerOptions {
  readonly pluginDirs: readonly string[];
  readonly exec: PluginExec;
  /** Per plugin process, from when it gets its stdin. */
  readonly timeoutMs: number;
  /** The environment plugins start from. */
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly logger: Logger;
  /**
   * Plugin types that run side by side when they follow each other in a chain (`concurrentGroups`).
   * Each must hand on its prevResult unchanged and touch state none of the others does.
   */
  readonly concurrentTypes: ReadonlySet<string>;
}

/**
 * The chain cut into the groups `runChain` runs: each a run of consecutive steps, all of types in
 * `types` (then they run side by side: each gets the same prevResult and hands it on unchanged),
 * or a single step. Indices into `steps`, in order.
 */
export function concurrentGroups(steps: readonly Step[], types: ReadonlySet<string>): number[][] {
  const groups: number[][] = [];
  steps.forEach((step, i) => {
    const last = groups.at(-1);
    const previous = steps[i - 1];
    if (
      last !== undefined &&
      previous !== undefined &&
      types.has(previous.plugin.type) &&
      types.has(step.plugin.type)
    )
      last.push(i);
    else groups.push([i]);
  });
  return groups;
}

export interface Invoker {
  /** The binary of every plugin of the network, in chain order; `plugin-not-found` otherwise. */
  resolve(network: NetworkConfig): Step[];
  /** A plugin's whole environment for `verb` on `target`. */
  env(verb: CniVerb, target: EnvTarget): Record<string, string>;
  /** Runs one plugin on its own; resolves its stdout on exit 0, throws `CniError` otherwise. */
  run(
    step: Step,
    verb: CniVerb,
    stdin: string,
    environment: Record<string, string>,
    containerId: string | undefined,
    call: CallOptions | undefined,
  ): Promise<string>;
  /**
   * Runs `steps` one after another, except that consecutive plugins of the `concurrentTypes`
   * run side by side (`concurrentGroups`). Every plugin's process is started early and waits for
   * its stdin, so nothing happens out of order: the first before `before` runs, the rest right
   * after the first gets its stdin, while it works. Process start-up (a fork of this process,
   * then the plugin's own runtime init) thus happens during the cheap first plugin (loopback, in
   * most chains) instead of during the expensive ones. `stdinAt(i)` is asked only when step i is
   * about to get its stdin, after the group before it finished; `onOutput` is told in chain order.
   * Stops at the first failure (in chain order, once its whole group has exited), cancelling the
   * processes that never got their stdin.
   */
  runChain(
    steps: readonly Step[],
    verb: CniVerb,
    environment: Record<string, string>,
    containerId: string | undefined,
    call: CallOptions | undefined,
    stdinAt: (index: number) => string,
    onOutput?: (index: number, stdout: string) => void,
    before?: () => Promise<void>,
  ): Promise<void>;
}

/** A plugin's whole environment for a verb: the caller's, minus inherited CNI_* variables. */
function environmentOf(
  callerEnv: InvokerOptions['env'],
  pluginDirs: readonly string[],
): Invoker['env'] {
  // The six CNI_* variables are always set on each call; an inherited one must not survive.
  const baseEnv = Object.fromEntries(
    Object.entries(callerEnv).filter(
      (entry): entry is [string, string] => entry[1] !== undefined && !CNI_VARIABLES.has(entry[0]),
    ),
  );
  const cniPath = pluginDirs.join(':');
  return (verb, a) => ({
    ...baseEnv,
    CNI_COMMAND: verb,
    CNI_CONTAINERID: a.containerId,
    CNI_NETNS: a.netns,
    CNI_IFNAME: a.ifName,
    CNI_ARGS: formatArgs(a.args),
    CNI_PATH: cniPath,
  });
}

/** Starting one plugin process, and running a started one to its end. */
interface PluginRunner {
  start(
    step: Step,
    environment: Record<string, string>,
    call: CallOptions | undefined,
  ): StartedPlugin;
  /** Runs one started plugin; resolves its stdout on exit 0, throws `CniError` otherwise. */
  finish(
    started: StartedPlugin,
    step: Step,
    verb: CniVerb,
    stdin: string,
    containerId: string | undefined,
  ): Promise<string>;
}

function pluginRunner({ exec, timeoutMs, logger }: InvokerOptions): PluginRunner {
  return {
    start(step, environment, call) {
      return exec.start({
        path: step.path,
        env: environment,
        timeoutMs,
        ...(call?.signal === undefined ? {} : { signal: call.signal }),
      });
    },
    async finish(started, step, verb, stdin, containerId) {
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
      throw pluginFailure(step.plugin.type, verb, containerId, result);
    },
  };
}

/** `Invoker.runChain` over `runner`, with the types that run side by side. */
async function runChain(
  runner: PluginRunner,
  concurrentTypes: ReadonlySet<string>,
  ...[steps, verb, environment, containerId, call, stdinAt, onOutput, before]: Parameters<
    Invoker['runChain']
  >
): Promise<void> {
  if (steps.length === 0) return;
  const started: (StartedPlugin | undefined)[] = [
    runner.start(steps[0] as Step, environment, call),
  ];
  let done = 0;
  try {
    await (before ?? (() => Promise.resolve()))();
    for (const group of concurrentGroups(steps, concurrentTypes)) {
      const running = group.map((i) => {
        const out = runner.finish(
          started[i] as StartedPlugin,
          steps[i] as Step,
          verb,
          stdinAt(i),
          containerId,
        );
        started[i] = undefined;
        if (i === 0)
          for (let j = 1; j < steps.length; j++)
            started[j] = runner.start(steps[j] as Step, environment, call);
        return out;
      });
      // Every plugin of the group exits before the first failure is thrown: none is left
      // running behind the caller's back.
      const settled = await Promise.allSettled(running);
      for (const [k, outcome] of settled.entries()) {
        const i = group[k] as number;
        if (outcome.status === 'rejected') throw outcome.reason;
        onOutput?.(i, outcome.value);
        done = i + 1;
        call?.onPluginDone?.((steps[i] as Step).plugin.type);
      }
    }
  } catch (error) {
    for (const waiting of started.slice(done)) waiting?.cancel();
    throw error;
  }
}

/** The invoker: plugin lookup, the environment, and one runner for single plugins and chains. */
export function createInvoker(options: InvokerOptions): Invoker {
  const { pluginDirs, concurrentTypes } = options;
  const runner = pluginRunner(options);
  return {
    resolve(network) {
      return network.plugins.map((plugin) => ({
        plugin,
        path: findPlugin(plugin.type, pluginDirs),
      }));
    },
    env: environmentOf(options.env, pluginDirs),
    run(step, verb, stdin, environment, containerId, call) {
      return runner.finish(runner.start(step, environment, call), step, verb, stdin, containerId);
    },
    runChain: (...args) => runChain(runner, concurrentTypes, ...args),
  };
}

/** A plugin's stdin: its object minus `capabilities`, with name, version, runtimeConfig, prevResult. */
export function stdinFor(
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
