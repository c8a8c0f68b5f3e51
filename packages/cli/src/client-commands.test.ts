import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { tempDir } from '@allocnet/cni/testing';
import { loadAllocnetProto } from '@allocnet/proto';
import type {
  AllocNetworkServiceHandlers,
  AllocNetworkStatus__Output,
  AttachNetworkRequest__Output,
  AttachmentStatus__Output,
  DetachNetworkRequest__Output,
} from '@allocnet/proto';
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
  it('reads --port label:value[:to][@hostip] and --arg K=V', () => {
    expect(parsePort('http:8080:80')).toEqual({ label: 'http', value: 8080, to: 80 });
    expect(parsePort('db:5432')).toEqual({ label: 'db', value: 5432 });
    expect(parsePort('dns:53@10.0.0.1')).toEqual({ label: 'dns', value: 53, hostIp: '10.0.0.1' });
    expect(parsePort('v6:8443:443@fd00::1')).toEqual({
      label: 'v6',
      value: 8443,
      to: 443,
      hostIp: 'fd00::1',
    });
    expect(() => parsePort('8080')).toThrow('--port "8080" is not label:value[:to][@hostip]');
    expect(() => parsePort('a:1@')).toThrow('--port "a:1@" is not label:value[:to][@hostip]');
    expect(parseArg('A=b=c')).toEqual(['A', 'b=c']);
    expect(() => parseArg('=x')).toThrow('--arg "=x" is not K=V');
    expect(() => parseArg('x', '--cni-arg')).toThrow('--cni-arg "x" is not K=V');
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
      stderr: 'allocnet: --port "nope" is not label:value[:to][@hostip]\n',
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
    attachments: [],
    ...over,
  };
}

const eth0: AttachmentStatus__Output = {
  network: 'nomad',
  interfaceName: 'eth0',
  phase: 'PHASE_READY',
  addresses: ['172.26.64.2/20'],
  mac: '0a:58:ac:1a:40:02',
  gateways: ['172.26.64.1'],
  dns: null,
  portMappings: status().portMappings,
  attached: false,
};
const net1: AttachmentStatus__Output = {
  network: 'storage',
  interfaceName: 'net1',
  phase: 'PHASE_READY',
  addresses: ['10.9.0.7/24', 'fd00:9::7/64'],
  mac: '0a:58:0a:09:00:07',
  gateways: [],
  dns: null,
  portMappings: [],
  attached: true,
};
/** An allocation with the default bridge and a storage network attached while it ran. */
const twoNetworks = status({ attachments: [eth0, net1] });

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

  it('prints one row per network, the primary first, with addresses, MAC and who added it', () => {
    expect(statusLines(twoNetworks).slice(7)).toEqual([
      '  networks',
      '    IFNAME  NETWORK  PHASE  ADDRESSES                 MAC                PORTS    BY',
      '    eth0    nomad    ready  172.26.64.2/20            0a:58:ac:1a:40:02  8080→80  setup',
      '    net1    storage  ready  10.9.0.7/24,fd00:9::7/64  0a:58:0a:09:00:07  -        attach',
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
    const statuses = [twoNetworks, podmanStatus];
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

  it('list has a NETS column (networks of the allocation) and an ORIGIN column', async () => {
    expect(await cli('alloc', 'list', '--address', socket)).toEqual({
      code: 0,
      stderr: '',
      stdout: [
        'ALLOC ID      PHASE  NETWORK  NETS  ADDRESS      PORTS    ORIGIN  NETNS',
        'a1            ready  nomad    2     172.26.64.2  8080→80  grpc    /run/netns/alloc-a1',
        'f3c1a7d2e4b5  ready  nomad    1     172.26.64.3  -        podman  /run/netns/netns-4c7e',
        '',
      ].join('\n'),
    });
  });

  it('list --json prints every field of every network (the table reads only its columns)', async () => {
    const out = await cli('alloc', 'list', '--address', socket, '--json');
    expect(JSON.parse(out.stdout)).toEqual([twoNetworks, podmanStatus]);
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

describe('allocnet alloc attach and detach against an agent', () => {
  let server: grpc.Server;
  let socket: string;
  let attaches: AttachNetworkRequest__Output[];
  let detaches: DetachNetworkRequest__Output[];

  beforeEach(async () => {
    attaches = [];
    detaches = [];
    const handlers: Partial<AllocNetworkServiceHandlers> = {
      AttachNetwork(call, callback) {
        attaches.push(call.request);
        callback(null, { status: twoNetworks, alreadyAttached: attaches.length > 1 });
      },
      DetachNetwork(call, callback) {
        detaches.push(call.request);
        if (call.request.interfaceName === 'eth0') {
          callback({
            code: grpc.status.FAILED_PRECONDITION,
            details: 'detach from allocation "a1" refused: "eth0" is its primary attachment',
          });
          return;
        }
        callback(null, {
          status: status({ attachments: [eth0] }),
          delRan: true,
          delError: '',
          removed: {
            rules: [],
            chains: [],
            reservations: [{ network: 'storage', address: '10.9.0.7', path: '/r', allocId: 'a1' }],
            cacheFiles: [],
          },
        });
      },
    };
    server = new grpc.Server();
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

  it('attach sends every flag as the NetworkAttachment and prints the status', async () => {
    const out = await cli(
      'alloc',
      'attach',
      'a1',
      '--network',
      'storage',
      '--ifname',
      'net1',
      '--port',
      'nfs:2049@10.9.0.1',
      '--ip',
      '10.9.0.7/24',
      '--ip',
      'fd00:9::7',
      '--mac',
      '0a:58:0a:09:00:07',
      '--cni-arg',
      'Rack=r1',
      '--default-route',
      '--address',
      socket,
    );
    expect(out).toEqual({
      code: 0,
      stderr: '',
      stdout: `${statusLines(twoNetworks).join('\n')}\n`,
    });
    expect(attaches).toEqual([
      {
        allocId: 'a1',
        attachment: {
          network: 'storage',
          interfaceName: 'net1',
          ports: [{ label: 'nfs', value: 2049, to: 0, hostIp: '10.9.0.1' }],
          cniArgs: { Rack: 'r1' },
          ips: ['10.9.0.7/24', 'fd00:9::7'],
          mac: '0a:58:0a:09:00:07',
          defaultRoute: true,
        },
      },
    ]);
    // The same again: the agent says nothing ran.
    const again = await cli('alloc', 'attach', 'a1', '--network', 'storage', '--address', socket);
    expect(again.stdout.endsWith('  (already attached with this spec: nothing ran)\n')).toBe(true);
    expect(attaches[1]?.attachment).toMatchObject({
      network: 'storage',
      interfaceName: '',
      ips: [],
    });
  });

  it('attach needs --network', async () => {
    const out = await cli('alloc', 'attach', 'a1', '--address', socket);
    expect(out.code).toBe(2);
    expect(out.stderr).toContain("required option '--network <name>' not specified");
    expect(attaches).toEqual([]);
  });

  it('detach names the interface and prints what the audit removed; the primary is refused', async () => {
    expect(await cli('alloc', 'detach', 'a1', 'net1', '--address', socket)).toEqual({
      code: 0,
      stderr: '',
      stdout: [
        'a1: net1 detached',
        '  the audit removed what DEL left: 0 rules, 0 chains, 1 reservation, 0 cache files',
        '    ipam  storage 10.9.0.7',
        '',
      ].join('\n'),
    });
    expect(detaches).toEqual([{ allocId: 'a1', interfaceName: 'net1' }]);
    const primary = await cli('alloc', 'detach', 'a1', 'eth0', '--address', socket);
    expect([primary.code, primary.stdout]).toEqual([1, '']);
    expect(primary.stderr).toContain(
      'FAILED_PRECONDITION: detach from allocation "a1" refused: "eth0" is its primary attachment',
    );
  });
});
