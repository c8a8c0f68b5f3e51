// The contract's methods over node:http2 (call.ts, h2-call.ts) against grpc-js's server, which the
// agent runs: the same answers as grpc-js's own client gives, each way a call can end, and the
// framing of messages however the bytes arrive.
import http2 from 'node:http2';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import {
  ALLOC_NETWORK,
  CallError,
  OPERATOR,
  STATUS,
  grpcTimeout,
  isServiceError,
  openChannel,
  statusName,
} from './call-index.js';
import type { Channel } from './call-index.js';
import { frameReader } from './h2-call.js';
import { createAllocNetworkClient, unary } from './index.js';
import type { ReapLeaksProgress } from './index.js';
import { createTestServer, notFoundGet } from './testing/server.js';
import type { TestServer } from './testing/server.js';

let host: TestServer;
let dir: string;
let channels: Channel[];

beforeEach(async () => {
  host = await createTestServer();
  dir = host.dir;
  channels = [];
});

afterEach(async () => {
  for (const channel of channels) channel.close();
  await host.close();
});

/** Serves the handlers on a fresh unix socket; resolves its grpc target. */
const serve = async (handlers: Parameters<TestServer['serve']>[0]) =>
  `unix://${await host.serve(handlers)}`;

function channelTo(target: string, metadata?: Record<string, string>): Channel {
  const channel = openChannel(target, metadata === undefined ? {} : { metadata });
  channels.push(channel);
  return channel;
}

const failureOf = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error('the call succeeded');
    },
    (error: unknown) => error,
  );

describe('unary calls', () => {
  it("answers exactly as grpc-js's client does: camelCase, int64 above 2^53 exact, enums, defaults", async () => {
    const target = await serve({
      scheduler: {
        ListAllocNetworks(_call, callback) {
          callback(null, {
            allocations: Array.from({ length: 300 }, (_, i) => ({
              allocId: `alloc-${i}`,
              phase: 'PHASE_READY',
              address: `10.0.${i >> 8}.${i & 255}`,
              portMappings: [{ hostPort: 20000 + i, containerPort: 80, protocol: 'tcp' }],
              updatedAtUnixMs: '9007199254740993',
            })),
          });
        },
      },
    });
    const client = createAllocNetworkClient(target, grpc.credentials.createInsecure());
    try {
      const expected = await unary(client, 'ListAllocNetworks', {});
      const got = await channelTo(target).unary(ALLOC_NETWORK, 'ListAllocNetworks', {});
      expect(got).toEqual(expected);
      expect(got.allocations[299]?.updatedAtUnixMs).toBe('9007199254740993');
    } finally {
      client.close();
    }
  });

  it('takes either spelling of a method, and sends the metadata it was opened with', async () => {
    const seen: string[] = [];
    const target = await serve({
      operator: {
        GetAgentInfo(call, callback) {
          seen.push(String(call.metadata.get('authorization')[0]));
          callback(null, { version: '9.9.9' });
        },
      },
    });
    const channel = channelTo(target, { authorization: 'Bearer t0ken' });
    expect((await channel.unary(OPERATOR, 'GetAgentInfo', {})).version).toBe('9.9.9');
    expect((await channel.unary(OPERATOR, 'getAgentInfo', {})).version).toBe('9.9.9');
    expect(seen).toEqual(['Bearer t0ken', 'Bearer t0ken']);
  });

  it("rejects with the server's status: code, details percent-decoded, trailers as metadata", async () => {
    const target = await serve({
      scheduler: {
        GetAllocNetwork: notFoundGet(': 100% ünknown'),
      },
    });
    const error = await failureOf(
      channelTo(target).unary(ALLOC_NETWORK, 'GetAllocNetwork', { allocId: 'a1' }),
    );
    expect(error).toBeInstanceOf(CallError);
    expect(isServiceError(error)).toBe(true);
    expect(error).toMatchObject({
      code: grpc.status.NOT_FOUND,
      details: 'allocation "a1" is not known: 100% ünknown',
      message: '5 NOT_FOUND: allocation "a1" is not known: 100% ünknown',
      metadata: { 'alloc-id': 'a1' },
    });
  });

  it('answers UNIMPLEMENTED for a method the server does not serve', async () => {
    const target = await serve({ operator: {} });
    const error = await failureOf(channelTo(target).unary(OPERATOR, 'GetAgentInfo', {}));
    expect(error).toMatchObject({ code: grpc.status.UNIMPLEMENTED });
  });

  it('fails DEADLINE_EXCEEDED when the deadline passes, and tells the server its deadline', async () => {
    const timeouts: string[] = [];
    const target = await serve({
      operator: {
        GetAgentInfo(call) {
          // never answers
          timeouts.push(String(call.metadata.getMap()['grpc-timeout'] ?? call.getDeadline()));
        },
      },
    });
    const error = await failureOf(
      channelTo(target).unary(OPERATOR, 'GetAgentInfo', {}, { deadlineMs: 200 }),
    );
    expect(error).toMatchObject({ code: grpc.status.DEADLINE_EXCEEDED });
    expect(timeouts).toHaveLength(1);
    expect(timeouts[0]).not.toBe('Infinity');
  });

  it('fails CANCELLED when its signal aborts, and does not call when it already has', async () => {
    let calls = 0;
    const target = await serve({
      operator: {
        GetAgentInfo() {
          calls++;
        },
      },
    });
    const channel = channelTo(target);
    const aborted = new AbortController();
    aborted.abort();
    expect(
      await failureOf(channel.unary(OPERATOR, 'GetAgentInfo', {}, { signal: aborted.signal })),
    ).toMatchObject({ code: grpc.status.CANCELLED });
    const later = new AbortController();
    const pending = failureOf(
      channel.unary(OPERATOR, 'GetAgentInfo', {}, { signal: later.signal }),
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    later.abort();
    expect(await pending).toMatchObject({ code: grpc.status.CANCELLED });
    expect(calls).toBe(1);
  });

  it('fails UNAVAILABLE, naming the connect error, when nothing listens', async () => {
    const error = await failureOf(
      channelTo(`unix://${path.join(dir, 'none.sock')}`).unary(OPERATOR, 'GetAgentInfo', {}),
    );
    expect(error).toMatchObject({ code: grpc.status.UNAVAILABLE });
    expect((error as CallError).details).toContain('ENOENT');
  });

  it('fails UNAVAILABLE for a call made after its connection failed', async () => {
    const channel = channelTo(`unix://${path.join(dir, 'none.sock')}`);
    await failureOf(channel.unary(OPERATOR, 'GetAgentInfo', {}));
    const error = await failureOf(channel.unary(OPERATOR, 'GetAgentInfo', {}));
    expect(error).toBeInstanceOf(CallError);
    expect(error).toMatchObject({ code: grpc.status.UNAVAILABLE });
    expect((error as CallError).details).toContain('ENOENT');
  });

  it('refuses a name that is not a method of the kind called', async () => {
    const channel = channelTo(await serve({}));
    for (const call of [
      () => channel.unary(OPERATOR, 'NoSuch' as 'GetAgentInfo', {}),
      () => channel.unary(OPERATOR, 'ReapLeaks' as 'GetAgentInfo', {}),
      () => channel.serverStream(OPERATOR, 'GetAgentInfo' as 'ReapLeaks', {}, () => undefined),
    ])
      await expect(call()).rejects.toMatchObject({ name: 'ProtoError', code: 'unknown-method' });
  });
});

describe('server-streaming calls', () => {
  it('gives each message in order, then resolves; a status after messages rejects', async () => {
    const target = await serve({
      operator: {
        ReapLeaks(call) {
          const steps: ReapLeaksProgress[] = [1, 2, 3].map((done) => ({
            step: { done, total: 3 },
          }));
          for (const step of steps) call.write(step);
          if (call.request.dryRun) {
            call.emit('error', { code: grpc.status.ABORTED, details: 'stopped after 3' });
            return;
          }
          call.write({ summary: { reaped: [{ allocId: 'a1' }, { allocId: 'a2' }] } });
          call.end();
        },
      },
    });
    const channel = channelTo(target);
    const seen: string[] = [];
    await channel.serverStream(OPERATOR, 'ReapLeaks', {}, (m) => {
      seen.push(
        m.step?.done === undefined
          ? `summary ${m.summary?.reaped.map((l) => l.allocId).join(',')}`
          : `step ${m.step.done}`,
      );
    });
    expect(seen).toEqual(['step 1', 'step 2', 'step 3', 'summary a1,a2']);
    const again: number[] = [];
    const error = await failureOf(
      channel.serverStream(OPERATOR, 'ReapLeaks', { dryRun: true }, (m) => {
        again.push(m.step?.done ?? 0);
      }),
    );
    expect(again).toEqual([1, 2, 3]);
    expect(error).toMatchObject({ code: grpc.status.ABORTED, details: 'stopped after 3' });
  });
});

describe('what is not a gRPC answer', () => {
  it('maps an HTTP status to a gRPC one (404 is UNIMPLEMENTED, 503 UNAVAILABLE)', async () => {
    const plain = http2.createServer();
    plain.on('stream', (stream, headers) => {
      stream.respond({
        ':status': headers[':path']?.endsWith('GetAgentInfo') === true ? 404 : 503,
      });
      stream.end('not grpc');
    });
    const socket = path.join(dir, 'plain.sock');
    await new Promise<void>((resolve) => plain.listen(socket, resolve));
    try {
      const channel = channelTo(`unix://${socket}`);
      expect(await failureOf(channel.unary(OPERATOR, 'GetAgentInfo', {}))).toMatchObject({
        code: grpc.status.UNIMPLEMENTED,
        details: 'HTTP status 404',
      });
      expect(await failureOf(channel.unary(OPERATOR, 'ListLeaks', {}))).toMatchObject({
        code: grpc.status.UNAVAILABLE,
      });
    } finally {
      for (const channel of channels.splice(0)) channel.close();
      await new Promise((resolve) => plain.close(resolve));
    }
  });
});

describe('framing', () => {
  const framed = (message: Uint8Array) => {
    const frame = Buffer.alloc(5 + message.length);
    frame.writeUInt32BE(message.length, 1);
    frame.set(message, 5);
    return frame;
  };

  it('reads back any messages, empty ones too, however the bytes are cut', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 8 }),
        fc.array(fc.nat(), { maxLength: 20 }),
        (messages, cuts) => {
          const bytes = Buffer.concat(messages.map(framed));
          const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
          const reader = frameReader();
          const out: Buffer[] = [];
          let from = 0;
          for (const to of [...at, bytes.length]) {
            reader.add(bytes.subarray(from, to));
            from = to;
            for (let m = reader.next(); m !== undefined; m = reader.next()) out.push(m as Buffer);
          }
          expect(out.map((m) => [...m])).toEqual(messages.map((m) => [...m]));
          expect(reader.buffered()).toBe(0);
        },
      ),
    );
  });

  it('says when a message is flagged compressed, and holds a message begun', () => {
    const reader = frameReader();
    reader.add(Buffer.from([1, 0, 0, 0, 1, 7]));
    expect(reader.next()).toBe('compressed');
    const begun = frameReader();
    begun.add(Buffer.from([0, 0, 0, 0, 3, 1]));
    expect(begun.next()).toBeUndefined();
    expect(begun.buffered()).toBe(6);
  });

  it('writes grpc-timeout in at most 8 digits', () => {
    expect(grpcTimeout(120_000)).toBe('120000m');
    expect(grpcTimeout(0.2)).toBe('1m');
    expect(grpcTimeout(99_999_999)).toBe('99999999m');
    expect(grpcTimeout(100_000_000)).toBe('100000S');
  });
});

describe('status codes', () => {
  it("are grpc-js's, by name and number", () => {
    const theirs = Object.entries(grpc.status).filter(([, v]) => typeof v === 'number');
    expect(Object.entries(STATUS)).toEqual(theirs);
    expect(statusName(14)).toBe('UNAVAILABLE');
    expect(statusName(99)).toBe('99');
  });
});
