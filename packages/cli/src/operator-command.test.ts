// `allocnet leaks [--reap]` against a fake agent (a real grpc server on a unix socket answering
// ListLeaks and ReapLeaks from fixed messages): the stray namespaces in the table, the JSON and
// the reap's report, and the exit status.
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { tempDir } from '@allocnet/cni/testing';
import { loadAllocnetProto } from '@allocnet/proto';
import type {
  ListLeaksResponse,
  OperatorServiceHandlers,
  ReapLeaksProgress,
  StrayNamespace,
} from '@allocnet/proto';
import { runCli } from './index.js';

async function cli(...argv: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
    env: {},
  });
  return { code, stdout, stderr };
}

const ID = '0c1d2e3f-0000-4000-8000-0000000000aa';
const OTHER = '0c1d2e3f-0000-4000-8000-0000000000bb';
const WHY = `named like this agent's allocations (prefix "alloc-") but no allocation has it`;
const EMPTY = { rules: [], chains: [], reservations: [], cacheFiles: [] };

function stray(id: string): StrayNamespace {
  return { name: `alloc-${id}`, path: `/run/netns/alloc-${id}`, allocId: id, reason: WHY };
}

let dir: Awaited<ReturnType<typeof tempDir>>;
let server: grpc.Server;
let socket: string;
let listed: ListLeaksResponse;
let summary: NonNullable<ReapLeaksProgress['summary']>;

beforeEach(async () => {
  dir = await tempDir();
  listed = { leaks: [], orphans: EMPTY, namespaces: [stray(ID), stray(OTHER)] };
  summary = { reaped: [], orphans: EMPTY, failed: [], namespaces: [stray(ID), stray(OTHER)] };
  const handlers: Partial<OperatorServiceHandlers> = {
    ListLeaks(_call, callback) {
      callback(null, listed);
    },
    ReapLeaks(call) {
      call.write({ summary });
      call.end();
    },
  };
  server = new grpc.Server();
  // Only the methods the command calls; grpc-js answers the others UNIMPLEMENTED.
  server.addService(
    loadAllocnetProto().allocnet.v1.OperatorService.service,
    handlers as grpc.UntypedServiceImplementation,
  );
  socket = join(dir.path, 'agent.sock');
  await new Promise<void>((resolve, reject) => {
    server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (error) => {
      if (error) reject(error);
      else resolve();
    });
  });
});
afterEach(async () => {
  server.forceShutdown();
  await dir.remove();
});

describe('allocnet leaks through the agent', () => {
  it('lists the stray namespaces in a table after the leaks, and exits 0', async () => {
    expect(await cli('leaks', '--address', socket)).toEqual({
      code: 0,
      stderr: '',
      stdout: [
        '0 leaked allocation(s); orphans: 0 rule(s), 0 chain(s), 0 reservation(s), 0 cache file(s)',
        `NAMESPACE                                   PATH                                                   WHY`,
        `alloc-${ID}  /run/netns/alloc-${ID}  ${WHY}`,
        `alloc-${OTHER}  /run/netns/alloc-${OTHER}  ${WHY}`,
        '2 stray namespace(s)',
        '',
      ].join('\n'),
    });
  });

  it('prints nothing about namespaces when there are none', async () => {
    listed = { leaks: [], orphans: EMPTY, namespaces: [] };
    expect((await cli('leaks', '--address', socket)).stdout).toBe(
      '0 leaked allocation(s); orphans: 0 rule(s), 0 chain(s), 0 reservation(s), 0 cache file(s)\n',
    );
  });

  it('gives them in --json with name, path, id and why', async () => {
    const out = await cli('leaks', '--address', socket, '--json');
    expect(out.code).toBe(0);
    expect(JSON.parse(out.stdout)).toEqual({
      leaks: [],
      orphans: EMPTY,
      namespaces: [stray(ID), stray(OTHER)],
    });
  });

  it('--reap says which namespaces it removed, and exits 0', async () => {
    expect(await cli('leaks', '--reap', '--address', socket)).toEqual({
      code: 0,
      stderr: '',
      stdout: [
        'reaped 0 leaked allocation(s); 0 failed; orphans: 0 rule(s), 0 chain(s), 0 reservation(s), 0 cache file(s)',
        'removed 2 stray namespace(s)',
        `  netns alloc-${ID} (/run/netns/alloc-${ID})`,
        `  netns alloc-${OTHER} (/run/netns/alloc-${OTHER})`,
        '',
      ].join('\n'),
    });
  });

  it('--reap names a namespace it could not remove, and exits 1', async () => {
    summary = {
      reaped: [],
      orphans: EMPTY,
      failed: [
        { allocId: OTHER, netnsName: `alloc-${OTHER}`, error: 'ip netns delete failed: busy' },
        { allocId: 'leaked-1', netnsName: '', error: 'iptables-restore failed' },
      ],
      namespaces: [stray(ID)],
    };
    expect(await cli('leaks', '--reap', '--address', socket)).toEqual({
      code: 1,
      stderr: '',
      stdout: [
        'reaped 0 leaked allocation(s); 2 failed; orphans: 0 rule(s), 0 chain(s), 0 reservation(s), 0 cache file(s)',
        'removed 1 stray namespace(s)',
        `  netns alloc-${ID} (/run/netns/alloc-${ID})`,
        `failed: netns alloc-${OTHER}: ip netns delete failed: busy`,
        'failed: leaked-1: iptables-restore failed',
        '',
      ].join('\n'),
    });
  });
});
