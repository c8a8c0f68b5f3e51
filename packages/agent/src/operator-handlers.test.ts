// The operator's handlers on hand-written fakes of their narrow seams, called as grpc-js calls
// them (no server): what reaches the runner, the answer, and the log lines.
import type { ForceCleanupOptions, OperationOptions } from '@allocnet/alloc-runner';
import type { FoundRule } from '@allocnet/cni-configurator';
import type { CallHandler } from './call.js';
import { createCallHandler } from './call.js';
import type { AgentLogger } from './logging.js';
import { createOperatorHandlers } from './operator-handlers.js';
import type { OperatorHandlersDeps } from './operator-handlers.js';

interface Line {
  readonly level: string;
  readonly message: string;
  readonly meta: Record<string, unknown>;
}

const RULE: FoundRule = {
  family: 'ipv4',
  table: 'nat',
  chain: 'POSTROUTING',
  line: '-A POSTROUTING -j X',
};

function setUp(known: boolean) {
  const lines: Line[] = [];
  const record = (level: string) => (message: string, meta?: Record<string, unknown>) => {
    lines.push({ level, message, meta: meta ?? {} });
  };
  const logger: AgentLogger = {
    error: record('error'),
    warn: record('warn'),
    info: record('info'),
    debug: record('debug'),
  };
  const cleanups: { allocId: string; options: ForceCleanupOptions & OperationOptions }[] = [];
  const unused = () => Promise.reject(new Error('not used here'));
  const deps: OperatorHandlersDeps = {
    runner: {
      forceCleanup: (allocId, options) => {
        cleanups.push({ allocId, options });
        return Promise.resolve({
          known,
          report: {
            allocId,
            dryRun: options.dryRun,
            removed: { rules: [RULE], chains: [], reservations: [], cacheFiles: [] },
          },
        });
      },
      findLeaks: unused,
      reapLeaks: unused,
      stats: () => {
        throw new Error('not used here');
      },
    },
    configurator: { catalog: () => ({ networks: [], invalid: [] }) },
    runtime: { pluginDirs: [], versions: unused },
    info: {
      version: '9.9.9',
      reconcileMode: 'report',
      dataDir: '/d',
      socketPath: '/s',
      startedAtMs: 0,
    },
    logger,
    reload: unused,
  };
  const calls: CallHandler = createCallHandler({
    metrics: { failure: () => undefined },
    logger,
    stopping: () => false,
    now: () => 0,
  });
  const handlers = createOperatorHandlers(deps, calls);
  /** ForceCleanup as grpc-js calls it, resolving with the answer. */
  const forceCleanup = (request: { allocId: string; dryRun?: boolean; network?: string }) =>
    new Promise<unknown>((resolve, reject) => {
      const call = {
        request: { dryRun: false, network: '', ...request },
        getDeadline: () => Infinity,
        on: () => call,
        removeListener: () => call,
      };
      handlers.ForceCleanup(call as never, (error, value) => {
        if (error === null) resolve(value);
        else reject(new Error(String(error.details)));
      });
    });
  return { lines, cleanups, forceCleanup };
}

/** The options as given, the call's signal left out (each call has its own). */
function withoutSignal(options: ForceCleanupOptions & OperationOptions): ForceCleanupOptions {
  return {
    dryRun: options.dryRun,
    ...(options.network === undefined ? {} : { network: options.network }),
  };
}

const WARNING = 'forced cleanup of an allocation the agent knows; its network stops working';

describe('ForceCleanup', () => {
  it("runs the runner's forceCleanup and warns when it cut an allocation the runner knew", async () => {
    const { lines, cleanups, forceCleanup } = setUp(true);
    const answer = await forceCleanup({ allocId: 'a-1', network: 'nomad' });
    expect(cleanups.map((c) => [c.allocId, withoutSignal(c.options)])).toEqual([
      ['a-1', { dryRun: false, network: 'nomad' }],
    ]);
    expect(cleanups[0]?.options.signal).toBeInstanceOf(AbortSignal);
    expect(answer).toMatchObject({ dryRun: false, removed: { rules: [RULE] } });
    expect(lines.filter((l) => l.level === 'warn')).toEqual([
      { level: 'warn', message: WARNING, meta: { allocId: 'a-1' } },
    ]);
    expect(lines.at(-1)?.meta).toMatchObject({
      op: 'force-cleanup',
      allocId: 'a-1',
      network: 'nomad',
      dryRun: false,
      removed: { rules: 1, chains: 0, reservations: 0, cacheFiles: 0 },
      outcome: 'ok',
    });
  });

  it('does not warn for a dry run, nor for an allocation the runner did not know', async () => {
    const dry = setUp(true);
    await dry.forceCleanup({ allocId: 'a-1', dryRun: true });
    expect(dry.cleanups.map((c) => withoutSignal(c.options))).toEqual([{ dryRun: true }]);
    expect(dry.lines.filter((l) => l.level === 'warn')).toEqual([]);

    const unknown = setUp(false);
    await unknown.forceCleanup({ allocId: 'a-2' });
    expect(unknown.cleanups.map((c) => c.allocId)).toEqual(['a-2']);
    expect(unknown.lines.filter((l) => l.level === 'warn')).toEqual([]);
  });
});
