// A grpc-js server of the contract on a fresh unix socket, for this package's tests of its two
// clients (client.test.ts: grpc-js's; call.test.ts: node:http2's).
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { AllocNetworkServiceHandlers } from '../gen/allocnet/v1/AllocNetworkService.js';
import type { OperatorServiceHandlers } from '../gen/allocnet/v1/OperatorService.js';
import { loadAllocnetProto } from '../load.js';

export interface TestServer {
  /** A directory of the test's own, removed by `close`. */
  readonly dir: string;
  /**
   * Serves the given handlers (a test implements only the methods it calls; grpc-js answers the
   * others UNIMPLEMENTED) on a fresh unix socket; resolves the socket's path.
   */
  serve(handlers: {
    scheduler?: Partial<AllocNetworkServiceHandlers>;
    operator?: Partial<OperatorServiceHandlers>;
  }): Promise<string>;
  close(): Promise<void>;
}

export async function createTestServer(): Promise<TestServer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'allocnet-proto-test-'));
  const server = new grpc.Server();
  return {
    dir,
    async serve(handlers) {
      const { AllocNetworkService, OperatorService } = loadAllocnetProto().allocnet.v1;
      if (handlers.scheduler)
        server.addService(
          AllocNetworkService.service,
          handlers.scheduler as grpc.UntypedServiceImplementation,
        );
      if (handlers.operator)
        server.addService(
          OperatorService.service,
          handlers.operator as grpc.UntypedServiceImplementation,
        );
      const socket = path.join(dir, 'agent.sock');
      await new Promise<void>((resolve, reject) => {
        server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (error) => {
          if (error) reject(error);
          else resolve();
        });
      });
      return socket;
    },
    async close() {
      server.forceShutdown();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A GetAllocNetwork that fails NOT_FOUND naming the id asked for, with `details` after it
 * (`allocation "a1" is not known<details>`) and the id as the trailer `alloc-id`: what both
 * clients' tests read a server's status from.
 */
export function notFoundGet(details = ''): AllocNetworkServiceHandlers['GetAllocNetwork'] {
  return (call, callback) => {
    const metadata = new grpc.Metadata();
    metadata.set('alloc-id', call.request.allocId);
    callback({
      code: grpc.status.NOT_FOUND,
      details: `allocation "${call.request.allocId}" is not known${details}`,
      metadata,
    });
  };
}
