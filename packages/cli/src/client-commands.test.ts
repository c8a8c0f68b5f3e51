import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { tempDir } from '@allocnet/cni/testing';
import { loadAllocnetProto } from '@allocnet/proto';
import type { AllocNetworkServiceHandlers, AllocNetworkStatus__Output } from '@allocnet/proto';
import { parseArg, parsePort } from './alloc-command.js';
import { statusLines } from './alloc-status.js';
import { runCli } from './index.js';
import { formatTable } from './table.js';

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

let dir: Awaited<ReturnType<typeof tempDir>>;
beforeEach(async () => {
  dir = await tempDir();
});
afterEach(async () => {
  await dir.remove();
});

describe('flags of allocnet alloc setup', () => {
  it('reads --port label:value[:to] and --arg K=V', () => {
    expect(parsePort('http:8080:80')).toEqual({ label: 'http', value: 8080, to: 80 });
    expect(parsePort('db:5432')).toEqual({ label: 'db', value: 5432 });
    expect(() => parsePort('8080')).toThrow('--port "8080" is not label:value or label:value:to');
    expect(parseArg('A=b=c')).toEqual(['A', 'b=c']);
    expect(() => parseArg('=x')).toThrow('--arg "=x" is not K=V');
  });

  it('exits 2 on a bad flag before dialling the agent', async () => {
    const out = await cli(
      'alloc',
      'setup',
      'a1',
      '--port',
      'nope',
      '--address',
      join(dir.path, 's'),
    );
    expect(out).toEqual({
      code: 2,
      stdout: '',
      stderr: 'allocnet: --port "nope" is not label:value or label:value:to\n',
    });
    expect((await cli('alloc', 'list', '--address', 'not an address')).stderr).toBe(
      'allocnet: --address: agent address "not an address" contains whitespace; use a socket path (/… or ./…), unix:<path> or host:port\n',
    );
  });
});

describe('talking to agents that are not there', () => {
  it('fleet prints one row per node and exits 1 when a node did not answer', async () => {
    const a = join(dir.path, 'a.sock');
    const out = await cli('fleet', 'leaks', '--node', a);
    expect(out.code).toBe(1);
    expect(out.stdout).toBe(
      formatTable(
        [
          'NODE',
          'LEAKED',
          'RULES',
          'CHAINS',
          'RESERVATIONS',
          'ORPHAN RULES',
          'ORPHAN CHAINS',
          'STATUS',
        ],
        [
          [
            a,
            '0',
            '0',
            '0',
            '0',
            '0',
            '0',
            `agent ${a}: UNAVAILABLE: cannot connect (ENOENT); is the agent running? start it with \`allocnet agent\`, or pass --address`,
          ],
        ],
      ) + '1 node(s), 0 leaked allocation(s) found, 1 node(s) did not answer\n',
    );
    expect((await cli('fleet', 'leaks')).stderr).toBe('allocnet: give at least one --node ADDR\n');
  });

  it('version prints the CLI’s version even without an agent', async () => {
    const out = await cli('version', '--address', join(dir.path, 'x.sock'), '--json');
    expect(out.code).toBe(0);
    expect(JSON.parse(out.stdout)).toMatchObject({ cli: '0.1.0', agent: null });
  });
});

/** A status as the agent sends it; `over` replaces what a test is about. */
function status(over: Partial<AllocNetworkStatus__Output> = {}): AllocNetworkStatus__Output {
  return {
    allocId: 'a1',
    network: 'nomad',
    phase: 'PHASE_READY',
    interfaceName: 'eth0',
    address: '172.26.64.2',
    addressIpv6: '',
    dns: null,
    netnsPath: '/run/netns/alloc-a1',
    portMappings: [
      { hostPort: 8080, containerPort: 80, protocol: 'tcp', hostIp: '' },
      { hostPort: 8080, containerPort: 80, protocol: 'udp', hostIp: '' },
    ],
    attempts: 1,
    retryCount: 0,
    updatedAtUnixMs: '0',
    error: '',
    netnsCreatedByAgent: true,
    origin: null,
    ...over,
  };
}

/** An attachment podman asked for through the agent's CNI server. */
const podmanStatus = status({
  allocId: 'f3c1a7d2e4b5',
  address: '172.26.64.3',
  portMappings: [],
  netnsPath: '/run/netns/netns-4c7e',
  netnsCreatedByAgent: false,
  origin: { runtime: 'podman', containerId: 'f3c1a7d2e4b5', ifname: 'eth0' },
});

describe('statusLines', () => {
  it('prints a status for people, one port per tcp/udp pair', () => {
    expect(statusLines(status())).toEqual([
      'a1: ready in network nomad',
      '  origin     grpc',
      '  interface  eth0',
      '  address    172.26.64.2',
      '  ports      8080→80',
      '  netns      /run/netns/alloc-a1 (made by the agent)',
      '  attempts   1',
    ]);
  });

  it("prints a CNI attachment's runtime, container id, ifname and the runtime's namespace", () => {
    expect(statusLines(podmanStatus)).toEqual([
      'f3c1a7d2e4b5: ready in network nomad',
      '  origin     podman (container f3c1a7d2e4b5, ifname eth0)',
      '  interface  eth0',
      '  address    172.26.64.3',
      '  ports      -',
      "  netns      /run/netns/netns-4c7e (the runtime's)",
      '  attempts   1',
    ]);
  });

  it("leaves a task driver's namespace of a gRPC allocation unannotated", () => {
    expect(
      statusLines(status({ netnsPath: '/proc/42/ns/net', netnsCreatedByAgent: false })),
    ).toContain('  netns      /proc/42/ns/net');
  });
});

describe('allocnet alloc list and status against an agent', () => {
  let server: grpc.Server;
  let socket: string;

  beforeEach(async () => {
    const statuses = [status(), podmanStatus];
    const handlers: Partial<AllocNetworkServiceHandlers> = {
      ListAllocNetworks(_call, callback) {
        callback(null, { allocations: statuses });
      },
      GetAllocNetwork(call, callback) {
        callback(null, {
          status: statuses.find((s) => s.allocId === call.request.allocId) ?? null,
        });
      },
    };
    server = new grpc.Server();
    // Only the methods the commands call; grpc-js answers the others UNIMPLEMENTED.
    server.addService(
      loadAllocnetProto().allocnet.v1.AllocNetworkService.service,
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
  afterEach(() => {
    server.forceShutdown();
  });

  it('list has an ORIGIN column: grpc, or the CNI runtime', async () => {
    expect(await cli('alloc', 'list', '--address', socket)).toEqual({
      code: 0,
      stderr: '',
      stdout: [
        'ALLOC ID      PHASE  NETWORK  ADDRESS      PORTS    ORIGIN  NETNS',
        'a1            ready  nomad    172.26.64.2  8080→80  grpc    /run/netns/alloc-a1',
        'f3c1a7d2e4b5  ready  nomad    172.26.64.3  -        podman  /run/netns/netns-4c7e',
        '',
      ].join('\n'),
    });
  });

  it("status prints a CNI attachment's origin; --json gives the API's origin (null over gRPC)", async () => {
    const out = await cli('alloc', 'status', 'f3c1a7d2e4b5', '--address', socket);
    expect(out).toEqual({
      code: 0,
      stderr: '',
      stdout: `${statusLines(podmanStatus).join('\n')}\n`,
    });
    const cniJson = await cli('alloc', 'status', 'f3c1a7d2e4b5', '--address', socket, '--json');
    expect(JSON.parse(cniJson.stdout)).toMatchObject({
      origin: { runtime: 'podman', containerId: 'f3c1a7d2e4b5', ifname: 'eth0' },
    });
    const grpcJson = await cli('alloc', 'status', 'a1', '--address', socket, '--json');
    expect(JSON.parse(grpcJson.stdout)).toMatchObject({ allocId: 'a1', origin: null });
  });
});
