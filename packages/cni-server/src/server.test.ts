import { request } from 'node:http';
import { mkdir, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { tempDir } from '@allocnet/cni/testing';
import { RunnerError } from '@allocnet/alloc-runner';
import type { CniAnswer } from './answer.js';
import type { CniHandler } from './handler.js';
import type { CniCall } from './request.js';
import type { OpenedParts, SocketBinder } from './seams.js';
import { startCniServer } from './server.js';
import type { CniServer } from './server.js';
import { createRecordingLogger } from './testing/index.js';

let tmp: Awaited<ReturnType<typeof tempDir>>;
let server: CniServer | undefined;
const calls: CniCall[] = [];
let answer: (call: CniCall, signal: AbortSignal) => Promise<CniAnswer>;
const counted: [string, number][] = [];
const opened: string[] = [];
const bound: string[] = [];

/** The composition's binder, reduced to what the server relies on: listen at the path. */
const bind: SocketBinder = async (path, listen) => {
  await mkdir(dirname(path), { recursive: true });
  await listen(path);
  bound.push(path);
  return { path, release: () => rm(path, { force: true }) };
};

const parts: OpenedParts = {
  push(what) {
    opened.push(what);
  },
};

const handler: CniHandler = {
  handle(call, signal) {
    calls.push(call);
    return answer(call, signal);
  },
};

function socketPath() {
  return join(tmp.path, 'run', 'cni.sock');
}

async function start(maxBodyBytes?: number): Promise<CniServer> {
  server = await startCniServer({
    socketPath: socketPath(),
    bind,
    handler,
    logger: createRecordingLogger(),
    opened: parts,
    onCall: (command, code) => counted.push([command, code]),
    ...(maxBodyBytes === undefined ? {} : { maxBodyBytes }),
  });
  return server;
}

function http(
  method: string,
  path: string,
  body?: string,
): Promise<{ status: number; json: Record<string, unknown> | undefined }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: socketPath(), method, path }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => {
        resolve({
          status: res.statusCode ?? 0,
          json: text === '' ? undefined : (JSON.parse(text) as Record<string, unknown>),
        });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

function add(extra: Record<string, unknown> = {}) {
  return JSON.stringify({
    env: {
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: 'c1',
      CNI_NETNS: '/run/netns/x',
      CNI_IFNAME: 'eth0',
      ...extra,
    },
    config: { cniVersion: '0.4.0', name: 'allocnet', type: 'allocnet-cni' },
  });
}

beforeEach(async () => {
  tmp = await tempDir('allocnet-cni-server-');
  calls.length = 0;
  counted.length = 0;
  opened.length = 0;
  bound.length = 0;
  answer = () => Promise.resolve({ status: 200, body: { cniVersion: '0.4.0', ips: [] } });
});

afterEach(async () => {
  await server?.close(0);
  server = undefined;
  await tmp.remove();
});

describe('the CNI server', () => {
  it('listens on the socket its binder bound, healthy at once and ready when told', async () => {
    const s = await start();
    expect(bound).toEqual([socketPath()]);
    expect(opened).toEqual(['cni listener', 'cni socket file']);
    expect((await http('GET', '/healthz')).status).toBe(200);
    expect(await http('GET', '/readyz')).toEqual({ status: 503, json: { ready: false } });
    s.setReady(true);
    expect(await http('GET', '/readyz')).toEqual({ status: 200, json: { ready: true } });
  });

  it('answers 503 with code 11 (50 for STATUS) before it is ready, without calling the handler', async () => {
    await start();
    const refused = await http('POST', '/v1/cni', add());
    expect(refused).toEqual({
      status: 503,
      json: {
        cniVersion: '0.4.0',
        code: 11,
        msg: 'the allocnet agent is not ready yet (restoring, or replaying queued DELs); try again later',
      },
    });
    const status = await http('POST', '/v1/cni', add({ CNI_COMMAND: 'STATUS' }));
    expect(status.status).toBe(503);
    expect(status.json).toMatchObject({ code: 50 });
    expect(calls).toHaveLength(0);
  });

  it('passes a decoded call to the handler and sends its answer; counts it', async () => {
    (await start()).setReady(true);
    const res = await http('POST', '/v1/cni', add());
    expect(res).toEqual({ status: 200, json: { cniVersion: '0.4.0', ips: [] } });
    expect(calls[0]).toMatchObject({ command: 'ADD', containerId: 'c1', netns: '/run/netns/x' });
    expect(counted).toEqual([['ADD', 0]]);
  });

  it('refuses a body over the limit (413), or not JSON (400), with code 4, calling nothing', async () => {
    (await start(256)).setReady(true);
    const big = await http('POST', '/v1/cni', add({ CNI_ARGS: 'K='.padEnd(400, 'x') }));
    expect(big.status).toBe(413);
    expect(big.json).toMatchObject({ code: 4, msg: 'the request body is over 256 bytes' });
    const junk = await http('POST', '/v1/cni', '{"env":');
    expect(junk.status).toBe(400);
    expect(junk.json).toMatchObject({ code: 4 });
    expect(String(junk.json?.msg)).toContain('the request body is not JSON');
    expect(calls).toHaveLength(0);
    expect(counted).toEqual([
      ['invalid', 4],
      ['invalid', 4],
    ]);
  });

  it("names the request's field when the runner finds bad input", async () => {
    (await start()).setReady(true);
    answer = () =>
      Promise.reject(
        new RunnerError('invalid allocation spec: spec.network "x" is not known', {
          code: 'invalid-argument',
          path: ['spec', 'network'],
          problem: ['"x" is not known'],
        }),
      );
    const res = await http('POST', '/v1/cni', add());
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ code: 4, msg: 'config.delegate "x" is not known' });
  });

  it('answers an unavailable failure with code 11, anything unknown with 999', async () => {
    (await start()).setReady(true);
    answer = () =>
      Promise.reject(new RunnerError('setup failed: plugin missing', { code: 'setup-failed' }));
    const failed = await http('POST', '/v1/cni', add());
    expect(failed.status).toBe(500);
    expect(failed.json).toMatchObject({ code: 999, msg: 'setup failed: plugin missing' });
    answer = () => Promise.reject(new RunnerError('shutting down', { code: 'shutting-down' }));
    const later = await http('POST', '/v1/cni', add());
    expect(later.json).toMatchObject({ code: 11 });
  });

  it('has no other routes', async () => {
    await start();
    expect(await http('GET', '/v1/cni')).toEqual({
      status: 405,
      json: { cniVersion: '1.1.0', code: 999, msg: 'POST /v1/cni only' },
    });
    expect(await http('GET', '/metrics')).toEqual({
      status: 404,
      json: {
        cniVersion: '1.1.0',
        code: 999,
        msg: 'no GET /metrics; the CNI server has POST /v1/cni, GET /healthz, GET /readyz',
      },
    });
  });

  it('on close, stops being ready and aborts a call still running after the timeout', async () => {
    const s = await start();
    s.setReady(true);
    let aborted = false;
    answer = (_call, signal) =>
      new Promise((resolve) => {
        signal.addEventListener('abort', () => {
          aborted = true;
          resolve({ status: 200, body: undefined });
        });
      });
    const pending = http('POST', '/v1/cni', add()).catch(() => undefined);
    while (calls.length === 0) await sleep(5);
    await s.close(50);
    server = undefined;
    await pending;
    expect(aborted).toBe(true);
    await expect(stat(socketPath())).rejects.toMatchObject({ code: 'ENOENT' });
  });
});
