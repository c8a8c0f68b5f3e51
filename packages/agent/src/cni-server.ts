// The CNI server: HTTP/1.1 + JSON on its own unix socket (0600, its directory 0700, bound by
// socket.ts like the gRPC one), where allocnet-cni forwards a runtime's calls
// (docs/cni-plugin.md). `POST /v1/cni` → 200 with the result (empty for DEL, CHECK, STATUS, GC)
// or the spec's error object; `GET /healthz` (the process answers), `GET /readyz` (200 once
// restore and the DEL-queue replay are done, 503 before and once the agent stops). A request
// before ready is 503 with code 11 (50 for STATUS): allocnet-cni waits, retries or queues.
//
// Shutdown: `close(timeoutMs)` turns /readyz 503, stops accepting, waits for the calls in flight
// at most `timeoutMs`, then aborts them (their setups roll back) and cuts the connections.
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { messageOf } from '@allocnet/base';
import { SPEC_VERSION } from '@allocnet/cni';
import { CNI_CODES, faultAnswer, faultOf } from './cni-handler.js';
import type { CniAnswer, CniHandler } from './cni-handler.js';
import { CniFault, decodeCniRequest } from './cni-request.js';
import type { CniCall } from './cni-request.js';
import { CNI_MAX_BODY_BYTES } from './defaults.js';
import type { AgentLogger } from './logging.js';
import type { OpenedParts } from './parts.js';
import { bindUnixSocket } from './socket.js';
import type { BoundSocket } from './socket.js';

export interface CniServerOptions {
  readonly socketPath: string;
  readonly handler: CniHandler;
  readonly logger: AgentLogger;
  readonly opened: OpenedParts;
  /** Counts each answered call (verb, and the CNI code or 0). */
  readonly onCall?: (command: string, code: number, seconds: number) => void;
  readonly maxBodyBytes?: number;
}

export interface CniServer {
  readonly socket: BoundSocket;
  /** Ready: serves calls; not ready: 503 (restore or the queue replay under way, or stopping). */
  setReady(ready: boolean): void;
  readonly inFlight: () => number;
  close(timeoutMs: number): Promise<void>;
}

class BodyTooLarge extends Error {}

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
      if (size > limit) reject(new BodyTooLarge());
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

export async function startCniServer(options: CniServerOptions): Promise<CniServer> {
  const { handler, logger, opened } = options;
  const limit = options.maxBodyBytes ?? CNI_MAX_BODY_BYTES;
  let ready = false;
  const calls = new Set<AbortController>();

  async function post(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const began = performance.now();
    let body: unknown;
    let call: CniCall | undefined;
    const finish = (answer: CniAnswer, command: string) => {
      send(res, answer);
      const code = typeof answer.body?.code === 'number' ? answer.body.code : 0;
      options.onCall?.(command, code, (performance.now() - began) / 1000);
    };
    try {
      const bytes = await readBody(req, limit);
      try {
        body = JSON.parse(bytes.toString('utf8'));
      } catch (error) {
        throw new CniFault(
          CNI_CODES.invalidConfig,
          `the request body is not JSON: ${messageOf(error)}`,
          {
            path: ['body'],
          },
        );
      }
      call = decodeCniRequest(body);
    } catch (error) {
      const fault =
        error instanceof BodyTooLarge
          ? new CniFault(CNI_CODES.invalidConfig, `the request body is over ${limit} bytes`, {
              path: ['body'],
            })
          : error instanceof CniFault
            ? error
            : new CniFault(CNI_CODES.internal, messageOf(error), {});
      const answer = faultAnswer(fault, versionIn(body));
      logger.warn('CNI request refused', { error: fault.message, code: fault.cniCode });
      finish(error instanceof BodyTooLarge ? { ...answer, status: 413 } : answer, 'invalid');
      return;
    }
    if (!ready) {
      const status = call.command === 'STATUS';
      finish(
        {
          status: 503,
          body: {
            cniVersion: call.cniVersion,
            code: status ? CNI_CODES.notReady : CNI_CODES.tryAgainLater,
            msg: 'the allocnet agent is not ready yet (restoring, or replaying queued DELs); try again later',
          },
        },
        call.command,
      );
      return;
    }
    const controller = new AbortController();
    calls.add(controller);
    // The runtime gave up (allocnet-cni killed): the setup is cancelled and rolls back.
    res.once('close', () => {
      if (!res.writableFinished) controller.abort(new Error('the CNI client went away'));
    });
    try {
      const answer = await handler.handle(call, controller.signal);
      finish(answer, call.command);
      logger.debug('CNI call', {
        command: call.command,
        containerId: call.containerId,
        ifName: call.ifName,
        // To 0.01 ms: the CNI-plugin benchmark subtracts it from the plugin's exec.
        ms: Math.round((performance.now() - began) * 100) / 100,
      });
    } catch (error) {
      const fault = faultOf(error, call);
      logger.warn('CNI call failed', {
        command: call.command,
        containerId: call.containerId,
        ifName: call.ifName,
        code: fault.cniCode,
        error: fault.message,
      });
      finish(faultAnswer(fault, call.cniVersion), call.command);
    } finally {
      calls.delete(controller);
    }
  }

  const server = createServer({ requestTimeout: 0 }, (req, res) => {
    const url = req.url ?? '';
    if (req.method === 'GET' && url === '/healthz') {
      send(res, { status: 200, body: { status: 'ok' } });
    } else if (req.method === 'GET' && url === '/readyz') {
      send(res, { status: ready ? 200 : 503, body: { ready } });
    } else if (url === '/v1/cni') {
      if (req.method !== 'POST') {
        send(res, {
          status: 405,
          body: { cniVersion: SPEC_VERSION, code: CNI_CODES.internal, msg: 'POST /v1/cni only' },
        });
        return;
      }
      void post(req, res);
    } else {
      send(res, {
        status: 404,
        body: {
          cniVersion: SPEC_VERSION,
          code: CNI_CODES.internal,
          msg: `no ${req.method ?? ''} ${url}; the CNI server has POST /v1/cni, GET /healthz, GET /readyz`,
        },
      });
    }
  });
  opened.push('cni listener', async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) =>
      server.close(() => {
        resolve();
      }),
    );
  });
  const socket = await bindUnixSocket(
    options.socketPath,
    (address) =>
      new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(address, () => {
          server.off('error', reject);
          resolve();
        });
      }),
    logger,
  );
  opened.push('cni socket file', () => socket.release());
  logger.info('CNI server listening (not ready until restore and the DEL queue are done)', {
    socket: options.socketPath,
  });

  return {
    socket,
    setReady(value) {
      ready = value;
    },
    inFlight: () => calls.size,
    async close(timeoutMs) {
      ready = false;
      const closed = new Promise<void>((resolve) =>
        server.close(() => {
          resolve();
        }),
      );
      server.closeIdleConnections();
      const timer = setTimeout(() => {
        if (calls.size > 0)
          logger.warn('CNI calls did not finish in time; cancelling them', {
            inFlight: calls.size,
          });
        for (const c of calls) c.abort(new Error('the agent is stopping'));
        server.closeAllConnections();
      }, timeoutMs);
      await closed;
      clearTimeout(timer);
      await socket.release();
    },
  };
}
