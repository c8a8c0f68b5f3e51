// The gRPC servers, apart from the handlers they serve (service.ts): the two services, health
// and reflection on the unix socket always, and on TCP when configured (TLS with client
// certificates, identities checked by auth.ts's interceptor before a request is read).
//
// Shutdown: `drain(timeoutMs)` turns nothing away by itself; the caller first sets health to
// NOT_SERVING, then drain closes the listeners (new calls are refused) and waits for the calls
// in flight at most `timeoutMs`, then cancels them (their setups roll back). `cancelNow()` cuts
// a drain under way short, for a second SIGTERM.
import * as grpc from '@grpc/grpc-js';
import { ReflectionService } from '@grpc/reflection';
import { HealthImplementation } from 'grpc-health-check';
import {
  ALLOC_NETWORK_SERVICE,
  OPERATOR_SERVICE,
  loadAllocnetPackageDefinition,
  loadAllocnetProto,
} from '@allocnet/proto';
import { authInterceptor } from './auth.js';
import { tolerantService } from './call.js';
import { parseHostPort } from './config-codec.js';
import { AgentError, messageOf } from './errors.js';
import type { AgentLogger } from './logging.js';
import type { OpenedParts } from './parts.js';
import type { TlsFiles } from './secrets.js';
import type { ServiceHandlers } from './service.js';
import { bindUnixSocket } from './socket.js';
import type { BoundSocket } from './socket.js';

export interface GrpcServersOptions {
  readonly handlers: ServiceHandlers;
  readonly logger: AgentLogger;
  /** The unix socket's path (socket.ts binds it safely). */
  readonly socketPath: string;
  readonly tcp?: {
    readonly address: string;
    /** Without TLS (loopback only, config.ts checks) the listener is plain. */
    readonly tls: TlsFiles | undefined;
    /** The operator token in force, read for each call. */
    readonly operatorToken: () => string | undefined;
  };
  /** Each listener and the socket file are registered here once open. */
  readonly opened: OpenedParts;
}

export interface GrpcServers {
  readonly socket: BoundSocket;
  /** `ip:port` the TCP listener bound (the port picked when 0 was asked for), if any. */
  readonly tcpAddress: string | undefined;
  /** Health of every service: SERVING, or NOT_SERVING once the agent stops. */
  setServing(serving: boolean): void;
  drain(timeoutMs: number): Promise<void>;
  cancelNow(): void;
}

function bindAsync(
  server: grpc.Server,
  address: string,
  credentials: grpc.ServerCredentials,
): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(address, credentials, (error, port) => {
      if (error === null) resolve(port);
      else reject(error);
    });
  });
}

/** Starts the servers; throws `AgentError` (`listen-failed`, `socket-in-use`) when one cannot listen. */
export async function startGrpcServers(options: GrpcServersOptions): Promise<GrpcServers> {
  const { handlers, logger, opened } = options;
  const services = ['', ALLOC_NETWORK_SERVICE, OPERATOR_SERVICE];
  const health = new HealthImplementation(
    Object.fromEntries(services.map((service) => [service, 'SERVING' as const])),
  );
  const reflection = new ReflectionService(loadAllocnetPackageDefinition());
  const proto = loadAllocnetProto().allocnet.v1;
  const servers: grpc.Server[] = [];
  const makeServer = (serverOptions?: grpc.ServerOptions) => {
    const server = new grpc.Server(serverOptions);
    server.addService(tolerantService(proto.AllocNetworkService.service), handlers.alloc);
    server.addService(tolerantService(proto.OperatorService.service), handlers.operator);
    health.addToServer(server);
    reflection.addToServer(server);
    servers.push(server);
    return server;
  };
  const forceOnClose = (server: grpc.Server) => () => {
    server.forceShutdown();
    return Promise.resolve();
  };

  const unixServer = makeServer();
  opened.push('unix listener', forceOnClose(unixServer));
  const socket = await bindUnixSocket(
    options.socketPath,
    async (address) => {
      await bindAsync(unixServer, `unix:${address}`, grpc.ServerCredentials.createInsecure());
    },
    logger,
  );
  opened.push('socket file', () => socket.release());

  let tcpAddress: string | undefined;
  if (options.tcp !== undefined) {
    const { address, tls, operatorToken } = options.tcp;
    const tcpServer = makeServer({ interceptors: [authInterceptor({ operatorToken, logger })] });
    opened.push('tcp listener', forceOnClose(tcpServer));
    const credentials =
      tls === undefined
        ? grpc.ServerCredentials.createInsecure()
        : grpc.ServerCredentials.createSsl(
            tls.clientCa,
            [{ cert_chain: tls.cert, private_key: tls.key }],
            true,
          );
    const { host } = parseHostPort(address) ?? { host: '' };
    let port: number;
    try {
      port = await bindAsync(tcpServer, address, credentials);
    } catch (error) {
      throw new AgentError(`cannot listen on ${address} (tcp.address): ${messageOf(error)}`, {
        code: 'listen-failed',
        field: 'tcp.address',
        cause: error,
      });
    }
    tcpAddress = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  }

  // Forces the drains under way (each registers here when it begins).
  let forceNow: (() => void) | undefined;
  const drainOne = (server: grpc.Server, timeoutMs: number) =>
    new Promise<void>((resolve) => {
      const force = () => {
        clearTimeout(timer);
        server.forceShutdown();
        resolve();
      };
      const timer = setTimeout(() => {
        logger.warn('in-flight calls did not finish in time; cancelling them', {
          inFlight: handlers.inFlight(),
          shutdownTimeoutMs: timeoutMs,
        });
        force();
      }, timeoutMs);
      const previous = forceNow;
      forceNow = () => {
        previous?.();
        force();
      };
      server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });

  return {
    socket,
    tcpAddress,
    setServing(serving) {
      for (const service of services)
        health.setStatus(service, serving ? 'SERVING' : 'NOT_SERVING');
    },
    async drain(timeoutMs) {
      await Promise.all(servers.map((server) => drainOne(server, timeoutMs)));
    },
    cancelNow() {
      forceNow?.();
    },
  };
}
