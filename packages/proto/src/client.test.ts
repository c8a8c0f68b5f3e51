import * as grpc from '@grpc/grpc-js';
import {
  ProtoError,
  agentTarget,
  createAllocNetworkClient,
  createOperatorClient,
  isServiceError,
  unary,
} from './index.js';
import type {
  AllocNetworkServiceClient,
  GetAgentInfoResponse__Output,
  GetAllocNetworkResponse__Output,
  OperatorServiceClient,
  ReapLeaksProgress__Output,
  SetupAllocNetworkRequest,
  SetupAllocNetworkRequest__Output,
  SetupAllocNetworkResponse__Output,
  UnaryMethod,
  UnaryRequest,
  UnaryResponse,
} from './index.js';
import { createTestServer, notFoundGet } from './testing/server.js';
import type { TestServer } from './testing/server.js';

let host: TestServer;
let clients: grpc.Client[];

beforeEach(async () => {
  host = await createTestServer();
  clients = [];
});

afterEach(async () => {
  for (const client of clients) client.close();
  await host.close();
});

const serve: TestServer['serve'] = (handlers) => host.serve(handlers);

function schedulerClient(socket: string): AllocNetworkServiceClient {
  const client = createAllocNetworkClient(agentTarget(socket), grpc.credentials.createInsecure());
  clients.push(client);
  return client;
}

function operatorClient(socket: string): OperatorServiceClient {
  const client = createOperatorClient(agentTarget(socket), grpc.credentials.createInsecure());
  clients.push(client);
  return client;
}

/** A handler's signal that it has the call, for tests that act on a call in flight. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('unary over a unix socket', () => {
  it('sends a request and decodes the response: camelCase, longs and enums as strings, defaults', async () => {
    const received: SetupAllocNetworkRequest__Output[] = [];
    const socket = await serve({
      scheduler: {
        SetupAllocNetwork(call, callback) {
          received.push(call.request);
          callback(null, {
            status: {
              allocId: call.request.allocId,
              network: 'nomad',
              phase: 'PHASE_READY',
              address: '172.26.64.5',
              portMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp' }],
              attempts: 2,
              retryCount: 1,
              // above 2^53: only a string keeps it exact
              updatedAtUnixMs: '9007199254740993',
            },
          });
        },
      },
    });

    const response = await unary(schedulerClient(socket), 'SetupAllocNetwork', {
      allocId: '6b235529-8111-4bbe-520b-d639b1d2a94e',
      jobId: 'web',
      ports: [{ label: 'http', value: 8080, to: 80 }],
      networks: [{ dynamicPorts: [{ label: 'admin', value: 9000 }] }],
      cniArgs: { Rack: 'r1' },
    });

    expect(received).toEqual([
      {
        allocId: '6b235529-8111-4bbe-520b-d639b1d2a94e',
        region: '',
        namespace: '',
        jobId: 'web',
        groupName: '',
        network: '',
        ports: [{ label: 'http', value: 8080, to: 80, hostIp: '' }],
        networks: [{ reservedPorts: [], dynamicPorts: [{ label: 'admin', value: 9000, to: 0 }] }],
        cniArgs: { Rack: 'r1' },
        netnsPath: '',
        attachments: [],
      },
    ]);
    expect(response).toEqual({
      status: {
        allocId: '6b235529-8111-4bbe-520b-d639b1d2a94e',
        network: 'nomad',
        phase: 'PHASE_READY',
        interfaceName: '',
        address: '172.26.64.5',
        addressIpv6: '',
        dns: null,
        netnsPath: '',
        portMappings: [{ hostPort: 8080, containerPort: 80, protocol: 'tcp', hostIp: '' }],
        attempts: 2,
        retryCount: 1,
        updatedAtUnixMs: '9007199254740993',
        error: '',
        netnsCreatedByAgent: false,
        origin: null,
        attachments: [],
      },
      alreadySetUp: false,
    });
  });

  it('fills every default of an empty response', async () => {
    const socket = await serve({
      scheduler: {
        GetAllocNetwork(_call, callback) {
          callback(null, {});
        },
      },
    });
    const response: GetAllocNetworkResponse__Output = await unary(
      schedulerClient(socket),
      'getAllocNetwork',
      { allocId: 'a1' },
    );
    expect(response).toEqual({ status: null });
  });

  it("rejects with the server's ServiceError: code, details and metadata kept", async () => {
    const socket = await serve({
      scheduler: {
        GetAllocNetwork: notFoundGet(),
      },
    });
    const error: unknown = await unary(schedulerClient(socket), 'GetAllocNetwork', {
      allocId: 'a1',
    }).catch((e: unknown) => e);
    expect(isServiceError(error)).toBe(true);
    if (!isServiceError(error)) return;
    expect(error.code).toBe(grpc.status.NOT_FOUND);
    expect(error.details).toBe('allocation "a1" is not known');
    expect(error.metadata.get('alloc-id')).toEqual(['a1']);
  });

  it('sends the metadata it is given', async () => {
    const socket = await serve({
      operator: {
        GetAgentInfo(call, callback) {
          callback(null, { version: String(call.metadata.get('x-request-id')[0]) });
        },
      },
    });
    const metadata = new grpc.Metadata();
    metadata.set('x-request-id', 'r-42');
    const response = await unary(operatorClient(socket), 'GetAgentInfo', {}, { metadata });
    expect(response.version).toBe('r-42');
    expect(response.counts).toBeNull();
    expect(response.startedAtUnixMs).toBe('0');
  });

  it('fails with DEADLINE_EXCEEDED when the deadline passes', async () => {
    const socket = await serve({
      operator: {
        ListLeaks() {
          // never answers; the client's deadline ends the call
        },
      },
    });
    const error: unknown = await unary(
      operatorClient(socket),
      'ListLeaks',
      {},
      { deadlineMs: 50 },
    ).catch((e: unknown) => e);
    expect(isServiceError(error) && error.code).toBe(grpc.status.DEADLINE_EXCEEDED);
  });

  it('cancels the call when the signal aborts, rejecting with CANCELLED', async () => {
    const started = deferred();
    const socket = await serve({
      operator: {
        ListLeaks() {
          started.resolve(); // and never answers
        },
      },
    });
    const abort = new AbortController();
    const call = unary(operatorClient(socket), 'ListLeaks', {}, { signal: abort.signal });
    await started.promise;
    abort.abort();
    const error: unknown = await call.catch((e: unknown) => e);
    expect(isServiceError(error) && error.code).toBe(grpc.status.CANCELLED);
  });

  it('does not call when the signal has already aborted', async () => {
    let calls = 0;
    const socket = await serve({
      operator: {
        ListLeaks(_call, callback) {
          calls += 1;
          callback(null, {});
        },
      },
    });
    const error: unknown = await unary(
      operatorClient(socket),
      'ListLeaks',
      {},
      { signal: AbortSignal.abort() },
    ).catch((e: unknown) => e);
    expect(isServiceError(error) && error.code).toBe(grpc.status.CANCELLED);
    expect(calls).toBe(0);
  });

  it('tells a ServiceError from other errors', () => {
    const error = Object.assign(new Error('5 NOT_FOUND: gone'), {
      code: grpc.status.NOT_FOUND,
      details: 'gone',
      metadata: new grpc.Metadata(),
    });
    expect(isServiceError(error)).toBe(true);
    expect(isServiceError(new Error('gone'))).toBe(false);
    expect(isServiceError(new ProtoError('invalid-target', 'bad'))).toBe(false);
    expect(isServiceError({ code: 5, details: 'gone', metadata: {} })).toBe(false);
  });

  it('refuses a name that is not a method of the client', async () => {
    const client = createOperatorClient('localhost:1', grpc.credentials.createInsecure());
    clients.push(client);
    // @ts-expect-error: the types only take unary method names
    const error: unknown = await unary(client, 'Nope', {}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProtoError);
    expect((error as ProtoError).message).toBe('"Nope" is not a method of the client');
  });

  it('types requests and responses by method', () => {
    // mutual assignability: enough to tell the types apart from `unknown` or each other
    type Equal<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
    const types: [
      Equal<
        UnaryMethod<OperatorServiceClient>,
        | 'ForceCleanup'
        | 'forceCleanup'
        | 'ListLeaks'
        | 'listLeaks'
        | 'ReloadConfig'
        | 'reloadConfig'
        | 'GetAgentInfo'
        | 'getAgentInfo'
      >,
      Equal<UnaryRequest<AllocNetworkServiceClient, 'SetupAllocNetwork'>, SetupAllocNetworkRequest>,
      Equal<
        UnaryResponse<AllocNetworkServiceClient, 'SetupAllocNetwork'>,
        SetupAllocNetworkResponse__Output
      >,
      Equal<UnaryResponse<OperatorServiceClient, 'getAgentInfo'>, GetAgentInfoResponse__Output>,
    ] = [true, true, true, true];
    expect(types).toEqual([true, true, true, true]); // checked by tsc; this only uses the value

    const scheduler = createAllocNetworkClient('localhost:1', grpc.credentials.createInsecure());
    const operator = createOperatorClient('localhost:1', grpc.credentials.createInsecure());
    clients.push(scheduler, operator);
    const neverRun = (): void => {
      // @ts-expect-error: a teardown request has no `ports`
      void unary(scheduler, 'TeardownAllocNetwork', { allocId: 'a', ports: [] });
      // @ts-expect-error: ReapLeaks streams; `unary` does not take it
      void unary(operator, 'ReapLeaks', {});
    };
    expect(typeof neverRun).toBe('function');
  });
});

describe('the ReapLeaks stream', () => {
  it('streams steps and then one summary, each with its oneof case named', async () => {
    const socket = await serve({
      operator: {
        ReapLeaks(call) {
          const { batchSize, dryRun } = call.request;
          call.write({ step: { done: 1, total: 2, allocId: `a1 batch=${batchSize}` } });
          call.write({ step: { done: 2, total: 2, allocId: 'a2' } });
          call.write({
            summary: {
              reaped: [
                {
                  allocId: 'a1',
                  networks: ['nomad'],
                  state: {
                    rules: [
                      {
                        family: 'ipv4',
                        table: 'nat',
                        chain: 'POSTROUTING',
                        line: '-A POSTROUTING -s 172.26.64.5/32 -j CNI-0123',
                      },
                    ],
                  },
                },
              ],
              failed: [{ allocId: 'a2', error: `dry run ${String(dryRun)}` }],
            },
          });
          call.end();
        },
      },
    });

    const messages: ReapLeaksProgress__Output[] = [];
    for await (const message of operatorClient(socket).ReapLeaks({ batchSize: 10, dryRun: true })) {
      messages.push(message as ReapLeaksProgress__Output);
    }

    const empty = { rules: [], chains: [], reservations: [], cacheFiles: [] };
    expect(messages).toEqual([
      { event: 'step', step: { done: 1, total: 2, allocId: 'a1 batch=10' } },
      { event: 'step', step: { done: 2, total: 2, allocId: 'a2' } },
      {
        event: 'summary',
        summary: {
          reaped: [
            {
              allocId: 'a1',
              networks: ['nomad'],
              state: {
                ...empty,
                rules: [
                  {
                    family: 'ipv4',
                    table: 'nat',
                    chain: 'POSTROUTING',
                    line: '-A POSTROUTING -s 172.26.64.5/32 -j CNI-0123',
                  },
                ],
              },
            },
          ],
          orphans: null,
          failed: [{ allocId: 'a2', error: 'dry run true', netnsName: '' }],
          namespaces: [],
        },
      },
    ]);
  });
});

describe('agentTarget', () => {
  it.each([
    ['/run/allocnet/agent.sock', 'unix:///run/allocnet/agent.sock'],
    ['./agent.sock', 'unix:./agent.sock'],
    ['../run/agent.sock', 'unix:../run/agent.sock'],
    ['unix:///run/allocnet/agent.sock', 'unix:///run/allocnet/agent.sock'],
    ['unix:/run/allocnet/agent.sock', 'unix:/run/allocnet/agent.sock'],
    ['unix:agent.sock', 'unix:agent.sock'],
    ['localhost:7070', 'localhost:7070'],
    ['node-1.dc1.example:7070', 'node-1.dc1.example:7070'],
    ['10.0.0.7:7070', '10.0.0.7:7070'],
    ['[::1]:7070', '[::1]:7070'],
  ])('turns %s into %s', (address, target) => {
    expect(agentTarget(address)).toBe(target);
  });

  it.each([
    ['', 'agent address "" is empty'],
    ['localhost', 'agent address "localhost" is not a socket path or host:port'],
    ['agent.sock', 'agent address "agent.sock" is not a socket path or host:port'],
    ['::1:7070', 'agent address "::1:7070" is not a socket path or host:port'],
    ['localhost:0', 'agent address "localhost:0" has port 0, not 1-65535'],
    ['localhost:70000', 'agent address "localhost:70000" has port 70000, not 1-65535'],
    ['unix:', 'agent address "unix:" has no socket path after "unix:"'],
    ['unix:/', 'agent address "unix:/" has no socket path after "unix:"'],
    ['unix:///', 'agent address "unix:///" has no socket path after "unix:"'],
    ['unix://agent.sock', 'agent address "unix://agent.sock" has no socket path after "unix:"'],
    ['/run/my agent.sock', 'agent address "/run/my agent.sock" contains whitespace'],
  ])('refuses %j', (address, why) => {
    let error: unknown;
    try {
      agentTarget(address);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ProtoError);
    expect((error as ProtoError).code).toBe('invalid-target');
    expect((error as ProtoError).message).toBe(
      `${why}; use a socket path (/… or ./…), unix:<path> or host:port`,
    );
  });
});
