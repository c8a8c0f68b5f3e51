// AttachNetwork and DetachNetwork on a hand-written fake runner, called as grpc-js calls them (no
// server): what reaches the runner, the answer, the status of the runner's refusals, the log line.
import * as grpc from '@grpc/grpc-js';
import { RunnerError } from '@allocnet/alloc-runner';
import type { AllocRecord, AttachOptions, AttachmentSpec } from '@allocnet/alloc-runner';
import type { AllocAttachment, TeardownReport } from '@allocnet/cni-configurator';
import type { NetworkAttachment__Output } from '@allocnet/proto';
import { createAllocHandlers } from './alloc-handlers.js';
import type { AllocHandlersDeps } from './alloc-handlers.js';
import { createCallHandler } from './call.js';
import type { AgentLogger } from './logging.js';
import { STORAGE_CATALOG, networkAttachmentOf, setupRequestOf } from './testing/requests.js';

interface Line {
  readonly level: string;
  readonly message: string;
  readonly meta: Record<string, unknown>;
}

const NETNS = '/run/netns/alloc-a1';
const SPEC = { allocId: 'a1', namespace: 'default', jobId: 'web', groupName: 'api' };

const catalog = STORAGE_CATALOG;

function attachmentOf(network: string, ifName: string): AllocAttachment {
  return {
    allocId: 'a1',
    network: { name: network, config: '{}' },
    netns: NETNS,
    ifName,
    args: [],
    portMappings: [],
    addresses: [],
  };
}

/** A ready allocation on `nomad`, with secondaries on `storage` (net1, net2, …) for `extra`. */
function ready(extra = 0): AllocRecord {
  return {
    schema: 1,
    allocId: 'a1',
    spec: SPEC,
    phase: 'ready',
    netnsPath: NETNS,
    netnsCreated: true,
    attachment: attachmentOf('nomad', 'eth0'),
    updatedAtMs: 1,
    extra: Array.from({ length: extra }, (_, i) => ({
      spec: { ...SPEC, network: 'storage', ifName: `net${i + 1}` },
      phase: 'ready' as const,
      attached: true,
      attachment: attachmentOf('storage', `net${i + 1}`),
    })),
  };
}

const REPORT: TeardownReport = {
  allocId: 'a1',
  delRan: true,
  delError: 'plugin "macvlan" failed (DEL): link not found',
  removed: { rules: [], chains: [], reservations: [], cacheFiles: ['/c/a1-net1'] },
};

function setUp(options: { record?: AllocRecord; fail?: Error; maxAttachments?: number } = {}) {
  const lines: Line[] = [];
  const log = (level: string) => (message: string, meta?: Record<string, unknown>) => {
    lines.push({ level, message, meta: meta ?? {} });
  };
  const logger: AgentLogger = {
    error: log('error'),
    warn: log('warn'),
    info: log('info'),
    debug: log('debug'),
  };
  const attaches: { allocId: string; attachment: AttachmentSpec; options?: AttachOptions }[] = [];
  const detaches: { allocId: string; ifName: string }[] = [];
  const unused = () => Promise.reject(new Error('not used here'));
  const outcome = <T>(value: T) =>
    options.fail === undefined ? Promise.resolve(value) : Promise.reject(options.fail);
  const deps: AllocHandlersDeps = {
    runner: {
      get: () => options.record,
      list: () => [],
      isRestoring: () => false,
      setup: unused,
      teardown: unused,
      check: unused,
      attach: (allocId, attachment, opts) => {
        attaches.push({ allocId, attachment, ...(opts === undefined ? {} : { options: opts }) });
        return outcome({ record: ready(1), alreadyAttached: false });
      },
      detach: (allocId, ifName) => {
        detaches.push({ allocId, ifName });
        return outcome({ record: ready(0), report: REPORT });
      },
    },
    configurator: { catalog: () => catalog, reload: () => Promise.resolve(catalog) },
    metrics: { setup: () => undefined, teardown: () => undefined },
    ignoreHostIps: false,
    limits: { maxPorts: 128, maxCniArgs: 64, maxAttachments: options.maxAttachments ?? 8 },
  };
  const handlers = createAllocHandlers(
    deps,
    createCallHandler({
      metrics: { failure: () => undefined },
      logger,
      stopping: () => false,
      now: () => 0,
    }),
  );
  /** A unary handler as grpc-js calls it: the answer, or the status it failed with. */
  const call = <Req>(handler: grpc.handleUnaryCall<Req, unknown>, request: Req) =>
    new Promise<{ value?: unknown; error?: Partial<grpc.StatusObject> }>((resolve) => {
      const surface = {
        request,
        getDeadline: () => Infinity,
        on: () => surface,
        removeListener: () => surface,
      };
      handler(surface as never, (error, value) => {
        resolve(error === null ? { value } : { error });
      });
    });
  const attachment = networkAttachmentOf;
  return {
    lines,
    attaches,
    detaches,
    attach: (allocId: string, extra: Partial<NetworkAttachment__Output>) =>
      call(handlers.AttachNetwork, { allocId, attachment: attachment(extra) }),
    detach: (allocId: string, interfaceName: string) =>
      call(handlers.DetachNetwork, { allocId, interfaceName }),
    setup: (attachments: Partial<NetworkAttachment__Output>[]) =>
      call(
        handlers.SetupAllocNetwork,
        setupRequestOf({ attachments: attachments.map(attachment) }),
      ),
  };
}

describe('AttachNetwork', () => {
  it("gives the runner the decoded attachment and answers with the allocation's status", async () => {
    const t = setUp({ record: ready(0) });
    const { value } = await t.attach('a1', { network: 'storage', interfaceName: 'net1' });
    expect(t.attaches.map((a) => [a.allocId, a.attachment])).toEqual([
      ['a1', { network: 'storage', ifName: 'net1' }],
    ]);
    expect(t.attaches[0]?.options?.signal).toBeInstanceOf(AbortSignal);
    expect(value).toMatchObject({
      alreadyAttached: false,
      status: {
        allocId: 'a1',
        attachments: [
          { network: 'nomad', interfaceName: 'eth0', attached: false },
          { network: 'storage', interfaceName: 'net1', attached: true },
        ],
      },
    });
    expect(t.lines.at(-1)?.meta).toMatchObject({
      op: 'attach',
      allocId: 'a1',
      network: 'storage',
      interfaceName: 'net1',
      alreadyAttached: false,
      outcome: 'ok',
    });
  });

  it("gives the runner the agent's limits.maxAttachments, which it checks in the allocation's turn", async () => {
    const t = setUp({ record: ready(1), maxAttachments: 2 });
    await t.attach('a1', { network: 'storage', interfaceName: 'net2' });
    expect(t.attaches.map((a) => a.options?.maxAttachments)).toEqual([2]);
  });

  it.each<[string, RunnerError, grpc.status]>([
    [
      'an allocation it does not know',
      new RunnerError('allocation "a1" is not known', { code: 'not-found', allocId: 'a1' }),
      grpc.status.NOT_FOUND,
    ],
    [
      'another attachment on that interface',
      new RunnerError('allocation "a1" has another attachment on "net1"', {
        code: 'conflict',
        allocId: 'a1',
      }),
      grpc.status.FAILED_PRECONDITION,
    ],
    [
      'an attachment the runner finds bad',
      new RunnerError('invalid attachment: attachment.network "nomad" is the primary\'s', {
        code: 'invalid-argument',
        allocId: 'a1',
      }),
      grpc.status.INVALID_ARGUMENT,
    ],
  ])("answers the runner's refusal of %s by its kind", async (_what, error, code) => {
    const t = setUp({ fail: error });
    expect((await t.attach('a1', { network: 'storage' })).error).toMatchObject({
      code,
      details: error.message,
    });
  });
});

describe("SetupAllocNetwork's log line", () => {
  it("names the primary's network of a request with attachments, and how many it has", async () => {
    const t = setUp();
    await t.setup([{ network: 'storage' }, { network: 'nomad' }]);
    expect(t.lines.at(-1)?.meta).toMatchObject({
      op: 'setup',
      allocId: 'a1',
      network: 'storage',
      attachments: 2,
    });
    await t.setup([{}]);
    expect(t.lines.at(-1)?.meta).toMatchObject({ network: 'nomad' });
    expect(t.lines.at(-1)?.meta).not.toHaveProperty('attachments');
  });
});

describe('DetachNetwork', () => {
  it("detaches by interface and answers with DEL's outcome and what the audit removed", async () => {
    const t = setUp({ record: ready(1) });
    const { value } = await t.detach('a1', 'net1');
    expect(t.detaches).toEqual([{ allocId: 'a1', ifName: 'net1' }]);
    expect(value).toMatchObject({
      status: { attachments: [{ interfaceName: 'eth0' }] },
      delRan: true,
      delError: 'plugin "macvlan" failed (DEL): link not found',
      removed: { rules: [], cacheFiles: ['/c/a1-net1'] },
    });
    expect(t.lines.at(-1)?.meta).toMatchObject({
      op: 'detach',
      allocId: 'a1',
      network: 'storage',
      interfaceName: 'net1',
      delError: 'plugin "macvlan" failed (DEL): link not found',
      auditRemoved: { rules: 0, chains: 0, reservations: 0, cacheFiles: 1 },
      outcome: 'ok',
    });
  });

  it.each<[string, RunnerError, grpc.status]>([
    [
      'the primary',
      new RunnerError('allocation "a1": "eth0" is its primary attachment; tear it down instead', {
        code: 'conflict',
        allocId: 'a1',
      }),
      grpc.status.FAILED_PRECONDITION,
    ],
    [
      'an interface it does not have',
      new RunnerError('allocation "a1" has no attachment on "net7"', {
        code: 'not-found',
        allocId: 'a1',
      }),
      grpc.status.NOT_FOUND,
    ],
  ])("answers the runner's refusal to detach %s by its kind", async (_what, error, code) => {
    const t = setUp({ record: ready(1), fail: error });
    expect((await t.detach('a1', 'eth0')).error).toMatchObject({ code, details: error.message });
  });

  it('refuses an empty interface before the runner is asked', async () => {
    const t = setUp({ record: ready(1) });
    expect((await t.detach('a1', '')).error).toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: "interface_name is empty; name the attachment's interface",
    });
    expect(t.detaches).toEqual([]);
  });
});
