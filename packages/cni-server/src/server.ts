// The CNI server: HTTP/1.1 + JSON on its own unix socket (bound by the composition's binder, the
// one the gRPC door uses: 0600, its directory 0700), where allocnet-cni forwards a runtime's calls
// (docs/cni-plugin.md). `POST /v1/cni` → 200 with the result (empty for DEL, CHECK, STATUS, GC)
// or the spec's error object; `GET /healthz` (the process answers), `GET /readyz` (200 once
// restore and the DEL-queue replay are done, 503 before and once the agent stops). A request
// before ready is 503 with code 11 (50 for STATUS): allocnet-cni waits, retries or queues.
//
// Concurrency: calls run side by side (the runner orders them per allocation); `calls` holds the
// abort controller of each call in flight. Shutdown: `close(timeoutMs)` turns /readyz 503, stops
// accepting, waits for the calls in flight at most `timeoutMs`, then aborts them (their setups
// roll back) and cuts the connections.
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { messageOf } from '@allocnet/base';
import { SPEC_VERSION } from '@allocnet/cni';
import { KIND_ANSWER, answerCode, faultAnswer, faultOf } from './answer.js';
import type { CniAnswer } from './answer.js';
import { CniFault, isCniFault } from './errors.js';
import type { CniHandler } from './handler.js';
import { decodeCniRequest } from './request.js';
import type { CniCall } from './request.js';
import type { BoundSocket, CniLogger, OpenedParts, SocketBinder } from './seams.js';

/** The largest request the CNI server reads by default: a conflist with a prevResult is a few KiB. */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

export interface CniServerOptions {
  readonly socketPath: string;
  /** Binds the unix socket (the agent's safe binder, shared with the gRPC door). */
  readonly bind: SocketBinder;
  readonly handler: CniHandler;
  readonly logger: CniLogger;
  readonly opened: OpenedParts;
  /** Counts each answered call (verb, and the CNI code or 0). */
  readonly onCall?: (command: string, code: number, seconds: number) => void;
  /** Default `DEFAULT_MAX_BODY_BYTES`. */
  readonly maxBodyBytes?: number;
}

export interface CniServer {
  readonly socket: BoundSocket;
  /** Ready: serves calls; not ready: 503 (restore or the queue replay under way, or stopping). */
  setReady(ready: boolean): void;
  readonly inFlight: () => number;
  close(timeoutMs: number): Promise<void>;
}

/** What the routes share: whether calls are served, and the calls in flight. */
interface DoorState {
  ready: boolean;
  readonly calls: Set<AbortController>;
}

/**
 * The request's body, at most `limit` bytes. A longer one is read to its end without being kept
 * (up to 16 times the limit, then the connection is cut), so that the client, still writing,
 * gets the 413 rather than a broken pipe.
 */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) chunks.push(chunk);
      else if (size > 16 * limit) req.destroy();
    });
    req.once('end', () => {
      if (size > limit)
        reject(
          new CniFault(`the request body is over ${limit} bytes`, {
            code: 'body-too-large',
            path: ['body'],
          }),
        );
      else resolve(Buffer.concat(chunks));
    });
    req.once('error', reject);
    req.once('close', () => {
      if (!req.complete)
        reject(new Error('the client closed the connection before its request ended'));
    });
  });
}

function send(res: ServerResponse, answer: CniAnswer): void {
  const text = answer.body === undefined ? '' : `${JSON.stringify(answer.body)}\n`;
  res.writeHead(answer.status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    connection: 'close',
  });
  res.end(text);
}

/** The cniVersion a request names, if it is readable at all: errors are answered in it. */
function versionIn(body: unknown): string | undefined {
  const config = (body as { config?: { cniVersion?: unknown } } | undefined)?.config;
  return typeof config?.cniVersion === 'string' && config.cniVersion.length <= 16
    ? config.cniVersion
    : undefined;
}

/** The request decoded, or the fault refusing it and the version to answer in. */
async function readCall(
  req: IncomingMessage,
  limit: number,
): Promise<{ readonly call: CniCall } | { readonly fault: CniFault; readonly version?: string }> {
  let body: unknown;
  try {
    const bytes = await readBody(req, limit);
    try {
      body = JSON.parse(bytes.toString('utf8'));
    } catch (error) {
      return {
        fault: new CniFault(`the request body is not JSON: ${messageOf(error)}`, {
          code: 'invalid-request',
          path: ['body'],
          cause: error,
        }),
      };
    }
    return { call: decodeCniRequest(body) };
  } catch (error) {
    const fault = isCniFault(error)
      ? error
      : new CniFault(messageOf(error), { code: 'failed', cause: error });
    const version = versionIn(body);
    return version === undefined ? { fault } : { fault, version };
  }
}

/** Serves `POST /v1/cni`: decodes, refuses before ready, runs the call and answers it. */
async function post(
  options: CniServerOptions,
  state: DoorState,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const { handler, logger } = options;
  const began = performance.now();
  const finish = (answer: CniAnswer, command: string) => {
    send(res, answer);
    const code = typeof answer.body?.code === 'number' ? answer.body.code : 0;
    options.onCall?.(command, code, (performance.now() - began) / 1000);
  };
  const read = await readCall(req, options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES);
  if ('fault' in read) {
    logger.warn('CNI request refused', {
      error: read.fault.message,
      code: answerCode(read.fault).code,
    });
    finish(faultAnswer(read.fault, read.version), 'invalid');
    return;
  }
  const { call } = read;
  if (!state.ready) {
    const fault = new CniFault(
      'the allocnet agent is not ready yet (restoring, or replaying queued DELs); try again later',
      { code: 'not-ready' },
    );
    finish(faultAnswer(fault, call.cniVersion, call.command), call.command);
    return;
  }
  const controller = new AbortController();
  state.calls.add(controller);
  // The runtime gave up (allocnet-cni killed): the setup is cancelled and rolls back.
  res.once('close', () => {
    if (!res.writableFinished) controller.abort(new Error('the CNI client went away'));
  });
  const where = { command: call.command, containerId: call.containerId, ifName: call.ifName };
  try {
    const answer = await handler.handle(call, controller.signal);
    finish(answer, call.command);
    // Fine-grained: the CNI-plugin benchmark subtracts it from the plugin's exec
    // (docs/cni-plugin.md, "Cost").
    logger.debug('CNI call', { ...where, ms: Math.round((performance.now() - began) * 100) / 100 });
  } catch (error) {
    const fault = faultOf(error, call);
    logger.warn('CNI call failed', {
      ...where,
      code: answerCode(fault).code,
      error: fault.message,
    });
    finish(faultAnswer(fault, call.cniVersion), call.command);
  } finally {
    state.calls.delete(controller);
  }
}

/** The routes: `POST /v1/cni`, `GET /healthz`, `GET /readyz`; the rest 405 or 404. */
function route(
  options: CniServerOptions,
  state: DoorState,
  req: IncomingMessage,
  res: ServerResponse,
): void {
  const url = req.url ?? '';
  const refuse = (status: number, msg: string) => {
    send(res, { status, body: { cniVersion: SPEC_VERSION, code: KIND_ANSWER.internal.code, msg } });
  };
  if (req.method === 'GET' && url === '/healthz') {
    send(res, { status: 200, body: { status: 'ok' } });
  } else if (req.method === 'GET' && url === '/readyz') {
    send(res, { status: state.ready ? 200 : 503, body: { ready: state.ready } });
  } else if (url === '/v1/cni') {
    if (req.method === 'POST') void post(options, state, req, res);
    else refuse(405, 'POST /v1/cni only');
  } else {
    refuse(
      404,
      `no ${req.method ?? ''} ${url}; the CNI server has POST /v1/cni, GET /healthz, GET /readyz`,
    );
  }
}

function closed(server: Server): Promise<void> {
  return new Promise<void>((resolve) =>
    server.close(() => {
      resolve();
    }),
  );
}

/** Stops accepting, waits for the calls in flight up to `timeoutMs`, then aborts them. */
async function drain(
  server: Server,
  state: DoorState,
  logger: CniLogger,
  timeoutMs: number,
): Promise<void> {
  state.ready = false;
  const done = closed(server);
  server.closeIdleConnections();
  const timer = setTimeout(() => {
    if (state.calls.size > 0)
      logger.warn('CNI calls did not finish in time; cancelling them', {
        inFlight: state.calls.size,
      });
    for (const c of state.calls) c.abort(new Error('the agent is stopping'));
    server.closeAllConnections();
  }, timeoutMs);
  await done;
  clearTimeout(timer);
}

export async function startCniServer(options: CniServerOptions): Promise<CniServer> {
  const { logger, opened } = options;
  const state: DoorState = { ready: false, calls: new Set() };
  const server = createServer({ requestTimeout: 0 }, (req, res) => {
    route(options, state, req, res);
  });
  opened.push('cni listener', async () => {
    server.closeAllConnections();
    await closed(server);
  });
  const socket = await options.bind(
    options.socketPath,
    (address) =>
      new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(address, () => {
          server.off('error', reject);
          resolve();
        });
      }),
  );
  opened.push('cni socket file', () => socket.release());
  logger.info('CNI server listening (not ready until restore and the DEL queue are done)', {
    socket: options.socketPath,
  });
  return {
    socket,
    setReady(value) {
      state.ready = value;
    },
    inFlight: () => state.calls.size,
    async close(timeoutMs) {
      await drain(server, state, logger, timeoutMs);
      await socket.release();
    },
  };
}
