// Prometheus' scrape endpoint: GET /metrics on a loopback address, plain HTTP (node:http).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { parseHostPort } from './config-codec.js';
import { AgentError, messageOf } from './errors.js';
import type { AgentLogger } from './logging.js';

export interface MetricsServer {
  /** `ip:port` as bound (the port chosen when 0 was asked for). */
  readonly address: string;
  close(): Promise<void>;
}

/** Serves `registry` at `http://<address>/metrics`; anything else is 404, any method but GET/HEAD 405. */
export async function startMetricsServer(
  address: string,
  registry: Registry,
  logger: AgentLogger,
): Promise<MetricsServer> {
  const parsed = parseHostPort(address);
  if (parsed === undefined)
    throw new AgentError(`metrics.address ${JSON.stringify(address)} is not ip:port`, {
      code: 'invalid-config',
      field: 'metrics.address',
    });
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics') {
      res
        .writeHead(404, { 'content-type': 'text/plain' })
        .end('not found: metrics are at /metrics\n');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    registry.metrics().then(
      (text) => {
        res
          .writeHead(200, { 'content-type': registry.contentType })
          .end(req.method === 'HEAD' ? undefined : text);
      },
      (error: unknown) => {
        logger.error('metrics could not be collected', { error: messageOf(error) });
        res.writeHead(500, { 'content-type': 'text/plain' }).end(`${messageOf(error)}\n`);
      },
    );
  });
  // Keep-alive connections from a scraper must not hold the agent's exit.
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve, reject) => {
    const onError = (error: Error) => {
      reject(
        new AgentError(`cannot serve metrics on ${address}: ${error.message}`, {
          code: 'listen-failed',
          field: 'metrics.address',
          cause: error,
        }),
      );
    };
    server.once('error', onError);
    server.listen(parsed.port, parsed.host, () => {
      server.removeListener('error', onError);
      resolve();
    });
  });
  const bound = server.address() as AddressInfo;
  const host = bound.family === 'IPv6' ? `[${bound.address}]` : bound.address;
  return {
    address: `${host}:${bound.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}
