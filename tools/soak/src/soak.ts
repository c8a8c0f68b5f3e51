// One soak, start to end: a throwaway node namespace (@allocnet/testns) and a temp dir, the real
// agent in it (`startNodeAgent`: its own data dir, socket, CNI cache, IPAM dir and namespace
// prefix), one warm-up cycle so the plugins' shared chains exist, the baseline (iptables and
// ip6tables of the node), the churn, the leak check, the agent stopped with SIGTERM. Whatever
// happens, the `finally` stops the agent, removes every namespace with the lab's prefix (the
// node and any the agent left) and the temp dir.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { messageOf } from '@allocnet/base';
import { DEFAULT_NETWORK_NAME } from '@allocnet/cni-configurator';
import { createIpNetnsManager } from '@allocnet/netns';
import type { IpNetnsManager } from '@allocnet/netns';
import {
  agentTarget,
  createAllocNetworkClient,
  createOperatorClient,
  unary,
} from '@allocnet/proto';
import {
  createNetnsLab,
  requireNetworkTestHost,
  residentMiB,
  startNodeAgent,
} from '@allocnet/testns';
import type { NetnsLab, NodeAgent } from '@allocnet/testns';
import { PORT_BASE } from './args.js';
import type { SoakOptions } from './args.js';
import { churn } from './churn.js';
import type { AllocOps, ChurnProgress } from './churn.js';
import { SoakError } from './errors.js';
import { createNodeReader } from './node-state.js';
import { summarize } from './summary.js';
import type { SoakSummary } from './summary.js';
import { leakFindings } from './verdict.js';

/** Where Debian's containernetworking-plugins are. */
export const PLUGIN_DIR = '/usr/lib/cni';
/** How long one setup or teardown call may take (three ADD attempts and the sweep fit). */
const OPERATION_DEADLINE_MS = 120_000;
/** How long the agent gets to drain on SIGTERM before it is killed. */
const STOP_AFTER_MS = 30_000;

export interface RunSoakOptions extends Omit<SoakOptions, 'json'> {
  /** The agent's entry: `@allocnet/agent`'s `dist/main.js`. */
  readonly agentEntry: string;
  /** SIGINT/SIGTERM: stops the churn, cleans up, then `runSoak` rejects with `interrupted`. */
  readonly signal: AbortSignal;
  /** Progress lines (stderr). */
  readonly log: (line: string) => void;
}

/** Each client its own connection (grpc-js would share one between clients of one target). */
const OWN_CONNECTION = { 'grpc.use_local_subchannel_pool': 1 };

/** The allocation of a cycle: one host port, a job and group as a scheduler would send. */
function allocOps(alloc: ReturnType<typeof createAllocNetworkClient>): AllocOps {
  return {
    async setup(allocId, hostPort, signal) {
      await unary(
        alloc,
        'SetupAllocNetwork',
        {
          allocId,
          namespace: 'default',
          jobId: 'soak',
          groupName: 'web',
          ports: [{ label: 'http', value: hostPort, to: 8080 }],
        },
        { deadlineMs: OPERATION_DEADLINE_MS, signal },
      );
    },
    async teardown(allocId, signal) {
      await unary(
        alloc,
        'TeardownAllocNetwork',
        { allocId },
        { deadlineMs: OPERATION_DEADLINE_MS, signal },
      );
    },
  };
}

function progressLine(p: ChurnProgress): string {
  const rate = p.elapsedMs > 0 ? (p.done * 1000) / p.elapsedMs : 0;
  return `soak: ${p.done}/${p.count} cycles, ${p.failures} failed, ${rate.toFixed(1)} cycles/s, agent RSS ${p.rssMiB.toFixed(1)} MiB`;
}

/** The agent's RSS; a vanished process is the agent having died, said with its last words. */
async function agentRss(agent: NodeAgent): Promise<number> {
  try {
    return await residentMiB(agent.pid);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    throw new Error(`the agent (pid ${agent.pid}) is gone; its stderr ends:\n${agent.stderr()}`, {
      cause: error,
    });
  }
}

function interrupted(): SoakError {
  return new SoakError(
    'soak interrupted (SIGINT or SIGTERM); the node and the agent were removed',
    {
      code: 'interrupted',
    },
  );
}

/** What a soak holds until its cleanup: the lab's prefix, the temp dir, the agent, its clients. */
interface Held {
  readonly netnsPrefix: string;
  readonly dir: string;
  readonly clients: grpc.Client[];
  agent: NodeAgent | undefined;
}

/** The soak itself, on what `runSoak` made; everything it starts goes into `held`. */
async function soakOn(
  options: RunSoakOptions,
  lab: NetnsLab,
  netns: IpNetnsManager,
  held: Held,
): Promise<SoakSummary> {
  const { signal, log } = options;
  const { netnsPrefix } = held;
  const node = await lab.node('soak');
  const agent = await startNodeAgent({
    node,
    entry: options.agentEntry,
    dir: held.dir,
    netnsPrefix,
    flags: {
      'plugin-dir': PLUGIN_DIR,
      'metrics-address': 'off',
      'log-format': 'json',
      'log-level': 'warn',
    },
  });
  held.agent = agent;
  const target = agentTarget(agent.paths.socket);
  const insecure = grpc.credentials.createInsecure();
  const alloc = createAllocNetworkClient(target, insecure, OWN_CONNECTION);
  const operator = createOperatorClient(target, insecure, OWN_CONNECTION);
  held.clients.push(alloc, operator);
  const ops = allocOps(alloc);
  const rssStartMiB = await agentRss(agent);
  log(
    `soak: agent pid ${agent.pid} ready in node namespace ${node.name} (allocation namespaces ${netnsPrefix}*, files in ${held.dir}), RSS ${rssStartMiB.toFixed(1)} MiB`,
  );

  // One cycle first: the plugins create their shared chains (CNI-FORWARD, CNI-HOSTPORT-*) on
  // the first setup and keep them, so the baseline is taken after it.
  await ops.setup('soak-warmup', PORT_BASE, signal);
  await ops.teardown('soak-warmup', signal);
  const reader = createNodeReader({
    node,
    netns,
    alloc,
    operator,
    places: {
      netnsPrefix,
      ipamDir: join(agent.paths.ipam, DEFAULT_NETWORK_NAME),
      cacheDir: join(agent.paths.data, 'cni'),
    },
  });
  const baseline = await reader.rules();
  log(
    `soak: baseline taken (${baseline.ipv4.length} ipv4 and ${baseline.ipv6.length} ipv6 lines); ${options.count} cycles, ${options.width} wide, warm-up ${options.warmup}`,
  );

  const result = await churn({
    ...options,
    ops,
    rss: () => agentRss(agent),
    onProgress: (p) => {
      log(progressLine(p));
    },
  });
  if (signal.aborted) throw interrupted();
  const rssEndMiB = await agentRss(agent);
  if (result.warmRssMiB !== undefined)
    log(
      `soak: agent RSS after the warm-up (${options.warmup} cycles): ${result.warmRssMiB.toFixed(1)} MiB`,
    );

  log('soak: leak check');
  const leaks = leakFindings(baseline, await reader.state(), reader.places);
  for (const c of held.clients) c.close();
  const exit = await agent.stop(STOP_AFTER_MS);
  return summarize({
    count: options.count,
    width: options.width,
    warmup: options.warmup,
    churn: result,
    rssStartMiB,
    rssEndMiB,
    leaks,
    agentExitProblem:
      exit.code === 0
        ? undefined
        : `the agent did not exit cleanly on SIGTERM (${exit.code ?? exit.signal ?? '?'}); its stderr ends:\n${agent.stderr()}`,
  });
}

/** Stops the agent, removes every namespace with the lab's prefix and the temp dir; the problems. */
async function cleanUp(lab: NetnsLab, netns: IpNetnsManager, held: Held): Promise<string[]> {
  const problems: string[] = [];
  for (const c of held.clients) c.close();
  if (held.agent !== undefined) {
    const exit = await held.agent.stop(STOP_AFTER_MS);
    if (exit.code === null && exit.signal === 'SIGKILL')
      problems.push(`the agent did not stop within ${STOP_AFTER_MS} ms of SIGTERM and was killed`);
  }
  try {
    for (const name of await netns.list()) if (name.startsWith(held.netnsPrefix)) lab.adopt(name);
  } catch (error) {
    problems.push(messageOf(error));
  }
  try {
    await lab.dispose();
  } catch (error) {
    // The lab says how many namespaces it could not remove; each one's reason is what helps.
    const each =
      error instanceof AggregateError ? error.errors.map((e) => `  ${messageOf(e)}`) : [];
    problems.push([messageOf(error), ...each].join('\n'));
  }
  try {
    await rm(held.dir, { recursive: true, force: true });
  } catch (error) {
    problems.push(messageOf(error));
  }
  return problems;
}

/**
 * Runs the soak and resolves with its summary, a failing verdict included; rejects when it could
 * not run (no root, the agent did not start, the warm-up cycle failed), when interrupted
 * (`SoakError` `interrupted`) or when the cleanup failed. Cleans up in every case.
 */
export async function runSoak(options: RunSoakOptions): Promise<SoakSummary> {
  await requireNetworkTestHost(['ip', 'iptables-save', 'ip6tables-save', 'nsenter']);
  const netns = createIpNetnsManager();
  const lab = createNetnsLab();
  const held: Held = {
    // Under the lab's prefix: a namespace the agent leaves is adopted and removed with the
    // node, and the test command's isolation check finds it by name.
    netnsPrefix: `${lab.prefix}-s${process.pid.toString(36)}-`,
    dir: await mkdtemp(join(tmpdir(), 'allocnet-soak-')),
    clients: [],
    agent: undefined,
  };
  let outcome: { readonly summary: SoakSummary } | { readonly error: unknown };
  try {
    outcome = { summary: await soakOn(options, lab, netns, held) };
  } catch (error) {
    // A call cancelled by Ctrl-C fails with CANCELLED; what the person did is the reason.
    outcome = { error: options.signal.aborted ? interrupted() : error };
  }
  const problems = await cleanUp(lab, netns, held);
  const cleanup =
    problems.length === 0
      ? undefined
      : `cleaning up failed; remove by hand what is left (ip netns list | grep ${lab.prefix}; ${held.dir}):\n  ${problems.join('\n  ')}`;
  if ('error' in outcome) {
    if (cleanup !== undefined) options.log(`soak: ${cleanup}`);
    throw outcome.error;
  }
  if (cleanup !== undefined) throw new Error(`soak: ${cleanup}`);
  return outcome.summary;
}
