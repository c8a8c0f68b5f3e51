import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { tempDir } from '@allocnet/cni/testing';
import {
  createAllocNetworkClient,
  createOperatorClient,
  isServiceError,
  loadAllocnetProto,
  unary,
} from '@allocnet/proto';
import type { AllocNetworkServiceHandlers, OperatorServiceHandlers } from '@allocnet/proto';
import { authInterceptor, authorize, decide, identify, tokensEqual } from './auth.js';
import type { PeerAuthContext } from './auth.js';
import { silentAgentLogger } from './logging.js';
import type { AgentLogger } from './logging.js';

const TOKEN = 'a-very-secret-operator-token';

function cert(subject: Record<string, string | string[]>): PeerAuthContext {
  return { transportSecurityType: 'ssl', sslPeerCertificate: { subject: subject } };
}

const SETUP = '/allocnet.v1.AllocNetworkService/SetupAllocNetwork';
const REAP = '/allocnet.v1.OperatorService/ReapLeaks';
const HEALTH = '/grpc.health.v1.Health/Check';
const REFLECTION = '/grpc.reflection.v1.ServerReflection/ServerReflectionInfo';

describe('identify', () => {
  it.each([
    [
      'an operator certificate',
      cert({ CN: 'ops-1', OU: 'operator' }),
      undefined,
      { role: 'operator', via: 'certificate', name: 'ops-1' },
    ],
    [
      'a scheduler certificate',
      cert({ CN: 'sched', OU: 'scheduler' }),
      undefined,
      { role: 'scheduler', via: 'certificate', name: 'sched' },
    ],
    [
      'a certificate with both OUs (operator wins)',
      cert({ CN: 'both', OU: ['scheduler', 'operator'] }),
      undefined,
      { role: 'operator', via: 'certificate', name: 'both' },
    ],
    [
      'the operator token',
      {},
      `Bearer ${TOKEN}`,
      { role: 'operator', via: 'token', name: 'token' },
    ],
    [
      'the token with a scheduler certificate',
      cert({ CN: 'sched', OU: 'scheduler' }),
      `bearer ${TOKEN}`,
      { role: 'operator', via: 'token', name: 'token' },
    ],
    ['nothing', {}, undefined, undefined],
  ])('gives %s its identity', (_, authContext, authorization, identity) => {
    expect(identify({ authContext, authorization }, TOKEN)).toEqual({ ok: true, identity });
  });

  it.each([
    [
      'a certificate without a role',
      cert({ CN: 'web', OU: 'frontend' }),
      undefined,
      'client certificate "web" has no allocnet role (subject OU "operator" or "scheduler")',
    ],
    [
      'a wrong token, even with an operator certificate',
      cert({ CN: 'ops', OU: 'operator' }),
      'Bearer nope',
      'the bearer token is not valid',
    ],
    [
      'a header that is not a bearer token',
      {},
      `Basic ${TOKEN}`,
      'the authorization header is not "Bearer <token>"',
    ],
    [
      'a token when none is configured',
      {},
      `Bearer ${TOKEN}`,
      'this agent accepts no bearer tokens (tcp.operatorTokenFile is not set)',
    ],
  ])('refuses %s', (name, authContext, authorization, details) => {
    const token = name === 'a token when none is configured' ? undefined : TOKEN;
    expect(identify({ authContext, authorization }, token)).toEqual({ ok: false, details });
  });

  it('compares tokens whole', () => {
    expect(tokensEqual(TOKEN, TOKEN)).toBe(true);
    expect(tokensEqual(`${TOKEN}x`, TOKEN)).toBe(false);
    expect(tokensEqual(TOKEN.slice(0, -1), TOKEN)).toBe(false);
    expect(tokensEqual('', TOKEN)).toBe(false);
  });
});

describe('authorize', () => {
  const operator = { role: 'operator', via: 'certificate', name: 'ops' } as const;
  const scheduler = { role: 'scheduler', via: 'certificate', name: 'sched' } as const;

  it.each([
    [SETUP, operator],
    [SETUP, scheduler],
    [REAP, operator],
    [HEALTH, undefined],
    [HEALTH, scheduler],
    [REFLECTION, scheduler],
  ])('lets %s through for %j', (path, identity) => {
    expect(authorize(path, identity)).toEqual({ allowed: true, identity });
  });

  it('refuses the scheduler the operator service', () => {
    expect(authorize(REAP, scheduler)).toEqual({
      allowed: false,
      code: grpc.status.PERMISSION_DENIED,
      details:
        'allocnet.v1.OperatorService needs the operator role; "sched" has the scheduler role',
    });
  });

  it.each([SETUP, REAP, REFLECTION])('refuses %s without an identity', (path) => {
    const service = path.split('/')[1] ?? '';
    expect(authorize(path, undefined)).toEqual({
      allowed: false,
      code: grpc.status.UNAUTHENTICATED,
      details: `${service} over TCP needs a client certificate with an allocnet role (OU "scheduler" or "operator") or an operator bearer token`,
    });
  });

  it('decides UNAUTHENTICATED for bad credentials, whatever the method', () => {
    expect(decide(SETUP, { authContext: {}, authorization: 'Bearer wrong' }, TOKEN)).toEqual({
      allowed: false,
      code: grpc.status.UNAUTHENTICATED,
      details: 'the bearer token is not valid',
    });
    expect(
      decide(
        REFLECTION,
        { authContext: cert({ CN: 'web', OU: 'frontend' }), authorization: undefined },
        TOKEN,
      ),
    ).toMatchObject({ allowed: false, code: grpc.status.UNAUTHENTICATED });
  });

  it('answers health to any client the transport let in', () => {
    expect(
      decide(
        HEALTH,
        { authContext: cert({ CN: 'web', OU: 'frontend' }), authorization: 'Bearer wrong' },
        TOKEN,
      ),
    ).toEqual({ allowed: true, identity: undefined });
  });
});

describe('authInterceptor, on a server over a unix socket', () => {
  let tmp: Awaited<ReturnType<typeof tempDir>>;
  let server: grpc.Server;
  let target: string;
  const warnings: Record<string, unknown>[] = [];
  const seenHeaders: (string | undefined)[] = [];

  beforeEach(async () => {
    tmp = await tempDir('allocnet-agent-auth-');
    warnings.length = 0;
    seenHeaders.length = 0;
    const logger: AgentLogger = {
      ...silentAgentLogger,
      warn: (_message, meta) => warnings.push(meta ?? {}),
    };
    server = new grpc.Server({
      interceptors: [authInterceptor({ operatorToken: () => TOKEN, logger })],
    });
    const proto = loadAllocnetProto().allocnet.v1;
    server.addService(proto.AllocNetworkService.service, {
      ListAllocNetworks: (call, callback) => {
        seenHeaders.push(call.metadata.get('authorization')[0]?.toString());
        callback(null, { allocations: [] });
      },
    } as Partial<AllocNetworkServiceHandlers> as AllocNetworkServiceHandlers);
    server.addService(proto.OperatorService.service, {
      ReloadConfig: (_call, callback) => {
        callback(null, { networks: [], invalidFiles: [] });
      },
    } as Partial<OperatorServiceHandlers> as OperatorServiceHandlers);
    const socket = join(tmp.path, 's.sock');
    await new Promise<void>((resolve, reject) => {
      server.bindAsync(`unix:${socket}`, grpc.ServerCredentials.createInsecure(), (error) => {
        if (error === null) resolve();
        else reject(error);
      });
    });
    target = `unix://${socket}`;
  });

  afterEach(async () => {
    server.forceShutdown();
    await tmp.remove();
  });

  function metadata(authorization?: string): grpc.Metadata {
    const m = new grpc.Metadata();
    if (authorization !== undefined) m.set('authorization', authorization);
    return m;
  }

  async function status(call: Promise<unknown>): Promise<[grpc.status, string] | 'ok'> {
    try {
      await call;
      return 'ok';
    } catch (error) {
      if (isServiceError(error)) return [error.code, error.details];
      throw error;
    }
  }

  it('refuses a call without credentials before the handler runs, and logs it', async () => {
    const client = createAllocNetworkClient(target, grpc.credentials.createInsecure());
    expect(await status(unary(client, 'ListAllocNetworks', {}))).toEqual([
      grpc.status.UNAUTHENTICATED,
      'allocnet.v1.AllocNetworkService over TCP needs a client certificate with an allocnet role (OU "scheduler" or "operator") or an operator bearer token',
    ]);
    client.close();
    expect(seenHeaders).toEqual([]);
    expect(warnings).toEqual([
      expect.objectContaining({
        op: '/allocnet.v1.AllocNetworkService/ListAllocNetworks',
        code: 'UNAUTHENTICATED',
      }),
    ]);
  });

  it('lets the operator token through to both services, without passing the token on', async () => {
    const alloc = createAllocNetworkClient(target, grpc.credentials.createInsecure());
    const operator = createOperatorClient(target, grpc.credentials.createInsecure());
    const auth = { metadata: metadata(`Bearer ${TOKEN}`) };
    expect(await status(unary(alloc, 'ListAllocNetworks', {}, auth))).toBe('ok');
    expect(await status(unary(operator, 'ReloadConfig', {}, auth))).toBe('ok');
    expect(
      await status(unary(operator, 'ReloadConfig', {}, { metadata: metadata('Bearer bad') })),
    ).toEqual([grpc.status.UNAUTHENTICATED, 'the bearer token is not valid']);
    alloc.close();
    operator.close();
    expect(seenHeaders).toEqual([undefined]);
  });
});
