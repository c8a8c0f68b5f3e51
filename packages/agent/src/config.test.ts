import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tempDir } from '@allocnet/cni/testing';
import { isLoopback, parseHostPort } from './config-codec.js';
import { checkAgentConfig, loadAgentConfig } from './config.js';
import type { AgentConfig } from './config.js';
import { isAgentError } from './errors.js';

let tmp: Awaited<ReturnType<typeof tempDir>>;

beforeEach(async () => {
  tmp = await tempDir('allocnet-agent-config-');
});

afterEach(async () => {
  await tmp.remove();
});

async function file(name: string, text: string): Promise<string> {
  const path = join(tmp.path, name);
  await writeFile(path, text);
  return path;
}

/** The error message `loadAgentConfig` throws for these inputs. */
async function refusal(options: Parameters<typeof loadAgentConfig>[0]): Promise<string> {
  try {
    await loadAgentConfig(options);
  } catch (error) {
    if (isAgentError(error) && error.code === 'invalid-config') return error.message;
    throw error;
  }
  throw new Error('the configuration was accepted');
}

const DEFAULT_CONFIG: AgentConfig = {
  dataDir: '/var/lib/allocnet',
  socket: '/run/allocnet/agent.sock',
  cni: {
    pluginDirs: ['/opt/cni/bin', '/usr/libexec/cni', '/usr/lib/cni'],
    confDir: '/etc/cni/net.d',
    cacheDir: '/var/lib/allocnet/cni',
    timeoutMs: 60000,
    // allocnet-cni's own defaults (packages/cni-plugin/plugin.go): the two must agree.
    socket: '/run/allocnet/cni.sock',
    queueDir: '/var/lib/allocnet/cni-queue',
  },
  defaultNetwork: { ipamDataDir: '/var/run/cni' },
  netnsPrefix: 'alloc-',
  ignoreHostIps: false,
  ipv6OnIpv4Interfaces: false,
  region: 'global',
  concurrency: 8,
  reconcile: { mode: 'report', intervalMs: 300000 },
  log: { level: 'info', format: 'json' },
  metrics: { address: '127.0.0.1:9464' },
  shutdownTimeoutMs: 30000,
  limits: { maxPorts: 128, maxCniArgs: 64, maxAttachments: 8 },
};

describe('loadAgentConfig', () => {
  it('gives the defaults when nothing is set; the CNI cache lives under the data dir', async () => {
    expect(await loadAgentConfig({ env: {} })).toEqual(DEFAULT_CONFIG);
    expect((await loadAgentConfig({ env: { ALLOCNET_DATA_DIR: '/srv/a' } })).cni.cacheDir).toBe(
      '/srv/a/cni',
    );
  });

  it('picks the text log format for a terminal, JSON lines otherwise', async () => {
    expect((await loadAgentConfig({ env: {}, stderrIsTTY: true })).log.format).toBe('text');
    expect((await loadAgentConfig({ env: {}, stderrIsTTY: false })).log.format).toBe('json');
  });

  it('reads every key from a YAML file', async () => {
    const path = await file(
      'agent.yaml',
      `
dataDir: /srv/allocnet/
socket: /run/a/agent.sock
tcp:
  address: 10.0.0.5:4647
  tls: { cert: /etc/a/cert.pem, key: /etc/a/key.pem, clientCa: /etc/a/ca.pem }
  operatorTokenFile: /etc/a/token
cni:
  pluginDirs: [/opt/cni/bin]
  confDir: /etc/a/net.d
  cacheDir: /var/cache/a
  timeoutMs: 5000
  socket: /run/a/cni/plugin.sock
  queueDir: /srv/queue
defaultNetwork:
  name: alloc
  bridge: allocbr0
  subnet: 10.88.0.0/16
  ipv6Subnet: fd00:88::/64
  hairpinMode: true
  mtu: 1400
  ipamDataDir: /var/run/a-ipam
  adminChain: ALLOC-ADMIN
netnsPrefix: a-
ignoreHostIps: true
ipv6OnIpv4Interfaces: true
region: eu
concurrency: 16
reconcile: { mode: reap, intervalMs: 60000 }
log: { level: debug, format: text }
metrics: { address: "[::1]:9500" }
shutdownTimeoutMs: 10000
readyFile: /run/a/ready.json
limits: { maxPorts: 16, maxCniArgs: 0, maxAttachments: 2 }
`,
    );
    expect(await loadAgentConfig({ file: path, env: {} })).toEqual({
      dataDir: '/srv/allocnet',
      socket: '/run/a/agent.sock',
      tcp: {
        address: '10.0.0.5:4647',
        tls: { cert: '/etc/a/cert.pem', key: '/etc/a/key.pem', clientCa: '/etc/a/ca.pem' },
        operatorTokenFile: '/etc/a/token',
      },
      cni: {
        pluginDirs: ['/opt/cni/bin'],
        confDir: '/etc/a/net.d',
        cacheDir: '/var/cache/a',
        timeoutMs: 5000,
        socket: '/run/a/cni/plugin.sock',
        queueDir: '/srv/queue',
      },
      defaultNetwork: {
        name: 'alloc',
        bridge: 'allocbr0',
        subnet: '10.88.0.0/16',
        ipv6Subnet: 'fd00:88::/64',
        hairpinMode: true,
        mtu: 1400,
        ipamDataDir: '/var/run/a-ipam',
        adminChain: 'ALLOC-ADMIN',
      },
      netnsPrefix: 'a-',
      ignoreHostIps: true,
      ipv6OnIpv4Interfaces: true,
      region: 'eu',
      concurrency: 16,
      reconcile: { mode: 'reap', intervalMs: 60000 },
      log: { level: 'debug', format: 'text' },
      metrics: { address: '[::1]:9500' },
      shutdownTimeoutMs: 10000,
      readyFile: '/run/a/ready.json',
      limits: { maxPorts: 16, maxCniArgs: 0, maxAttachments: 2 },
    });
  });

  it('reads JSON when the file ends in .json; an empty YAML file sets nothing', async () => {
    const json = await file(
      'agent.json',
      JSON.stringify({ concurrency: 3, log: { level: 'warn' } }),
    );
    const config = await loadAgentConfig({ file: json, env: {} });
    expect([config.concurrency, config.log.level]).toEqual([3, 'warn']);
    expect(await loadAgentConfig({ file: await file('empty.yaml', ''), env: {} })).toEqual(
      DEFAULT_CONFIG,
    );
  });

  it('reads every environment variable, each as its key', async () => {
    const config = await loadAgentConfig({
      env: {
        ALLOCNET_DATA_DIR: '/d',
        ALLOCNET_SOCKET: '/s/agent.sock',
        ALLOCNET_TCP_ADDRESS: '127.0.0.1:0',
        ALLOCNET_OPERATOR_TOKEN_FILE: '/t',
        ALLOCNET_PLUGIN_DIRS: '/p1:/p2',
        ALLOCNET_CONF_DIR: '/c',
        ALLOCNET_CACHE_DIR: '/cache',
        ALLOCNET_CNI_TIMEOUT_MS: '1000',
        ALLOCNET_CNI_SOCKET: '/cs/cni.sock',
        ALLOCNET_CNI_QUEUE_DIR: '/q',
        ALLOCNET_IPAM_DATA_DIR: '/ipam',
        ALLOCNET_NETNS_PREFIX: 'n-',
        ALLOCNET_IGNORE_HOST_IPS: 'true',
        ALLOCNET_IPV6_ON_IPV4_INTERFACES: 'true',
        ALLOCNET_REGION: 'r1',
        ALLOCNET_CONCURRENCY: '2',
        ALLOCNET_RECONCILE_MODE: 'reap',
        ALLOCNET_RECONCILE_INTERVAL_MS: '0',
        ALLOCNET_LOG_LEVEL: 'error',
        ALLOCNET_LOG_FORMAT: 'text',
        ALLOCNET_METRICS_ADDRESS: 'off',
        ALLOCNET_SHUTDOWN_TIMEOUT_MS: '5',
        ALLOCNET_READY_FILE: '/r.json',
        ALLOCNET_MAX_PORTS: '1024',
        ALLOCNET_MAX_CNI_ARGS: '8',
        ALLOCNET_MAX_ATTACHMENTS: '64',
        // Other ALLOCNET_* variables belong to other tools and are left alone.
        ALLOCNET_ADDRESS: 'whatever',
        ALLOCNET_TESTNS_PREFIX: 'ant-1',
      },
    });
    expect(config).toEqual({
      dataDir: '/d',
      socket: '/s/agent.sock',
      tcp: { address: '127.0.0.1:0', operatorTokenFile: '/t' },
      cni: {
        pluginDirs: ['/p1', '/p2'],
        confDir: '/c',
        cacheDir: '/cache',
        timeoutMs: 1000,
        socket: '/cs/cni.sock',
        queueDir: '/q',
      },
      defaultNetwork: { ipamDataDir: '/ipam' },
      netnsPrefix: 'n-',
      ignoreHostIps: true,
      ipv6OnIpv4Interfaces: true,
      region: 'r1',
      concurrency: 2,
      reconcile: { mode: 'reap', intervalMs: 0 },
      log: { level: 'error', format: 'text' },
      metrics: { address: 'off' },
      shutdownTimeoutMs: 5,
      readyFile: '/r.json',
      limits: { maxPorts: 1024, maxCniArgs: 8, maxAttachments: 64 },
    });
  });

  it('puts flags over the environment over the file, key by key', async () => {
    const path = await file(
      'agent.yaml',
      'dataDir: /from-file\nsocket: /file/agent.sock\ncni: { confDir: /file/net.d, timeoutMs: 7 }\n',
    );
    const config = await loadAgentConfig({
      file: path,
      env: { ALLOCNET_SOCKET: '/env/agent.sock', ALLOCNET_CONF_DIR: '/env/net.d' },
      flags: { 'conf-dir': '/flag/net.d', 'plugin-dir': ['/f1', '/f2'], 'cni-queue-dir': '/fq' },
    });
    expect(config.dataDir).toBe('/from-file');
    expect(config.socket).toBe('/env/agent.sock');
    // A limit from the file, the other from a flag over the environment.
    expect(
      (
        await loadAgentConfig({
          file: await file('limits.yaml', 'limits: { maxPorts: 4, maxCniArgs: 2 }\n'),
          env: { ALLOCNET_MAX_CNI_ARGS: '3' },
          flags: { 'max-cni-args': '1' },
        })
      ).limits,
    ).toEqual({ maxPorts: 4, maxCniArgs: 1, maxAttachments: 8 });
    expect(config.cni).toEqual({
      pluginDirs: ['/f1', '/f2'],
      confDir: '/flag/net.d',
      cacheDir: '/from-file/cni',
      timeoutMs: 7,
      // Beside the gRPC socket unless set.
      socket: '/env/cni.sock',
      queueDir: '/fq',
    });
  });

  it('treats an empty environment variable as unset', async () => {
    expect((await loadAgentConfig({ env: { ALLOCNET_SOCKET: '' } })).socket).toBe(
      '/run/allocnet/agent.sock',
    );
  });

  it.each([
    [
      'an unknown key, naming it and the file',
      { file: 'dataDirr: /x\n' },
      'config: dataDirr is not a known key (known: dataDir, socket, tcp, cni, defaultNetwork, netnsPrefix, ignoreHostIps, ipv6OnIpv4Interfaces, region, concurrency, reconcile, log, metrics, shutdownTimeoutMs, readyFile, limits) (<file>)',
    ],
    [
      'an unknown nested key',
      { file: 'cni: { pluginDir: [/x] }\n' },
      'config: cni.pluginDir is not a known key (known: pluginDirs, confDir, cacheDir, timeoutMs, socket, queueDir) (<file>)',
    ],
    [
      'a CNI socket that is the gRPC socket',
      { flags: { socket: '/run/a/cni.sock' } },
      'config: cni.socket "/run/a/cni.sock" is also the gRPC socket (socket); give the CNI server a path of its own (flag --socket)',
    ],
    [
      'a relative path from a flag',
      { flags: { 'data-dir': 'data' } },
      'config: dataDir "data" is not an absolute path (flag --data-dir)',
    ],
    [
      'a path with ".."',
      { env: { ALLOCNET_SOCKET: '/run/../tmp/a.sock' } },
      'config: socket "/run/../tmp/a.sock" is not a clean absolute path (no "." or ".." segment, no NUL, under 4096 characters) (env ALLOCNET_SOCKET)',
    ],
    [
      'a plugin dir in a list, by index',
      { env: { ALLOCNET_PLUGIN_DIRS: '/ok:relative' } },
      'config: cni.pluginDirs[1] "relative" is not an absolute path (env ALLOCNET_PLUGIN_DIRS)',
    ],
    [
      'a number that is not one',
      { env: { ALLOCNET_CNI_TIMEOUT_MS: 'soon' } },
      'config: cni.timeoutMs should be a whole number of milliseconds from 1 to 2147483647, got "soon" (env ALLOCNET_CNI_TIMEOUT_MS)',
    ],
    [
      'a number out of range',
      { file: 'concurrency: 0\n' },
      'config: concurrency should be a whole number from 1 to 1024, got 0 (<file>)',
    ],
    [
      'a boolean that is not one',
      { env: { ALLOCNET_IGNORE_HOST_IPS: 'maybe' } },
      'config: ignoreHostIps should be true or false, got "maybe" (env ALLOCNET_IGNORE_HOST_IPS)',
    ],
    [
      'an unknown reconcile mode',
      { file: 'reconcile: { mode: delete }\n' },
      'config: reconcile.mode should be one of "reap", "report", got "delete" (<file>)',
    ],
    [
      'an unknown log level',
      { flags: { 'log-level': 'verbose' } },
      'config: log.level should be one of "error", "warn", "info", "debug", got "verbose" (flag --log-level)',
    ],
    [
      'a metrics address off loopback',
      { flags: { 'metrics-address': '0.0.0.0:9464' } },
      'config: metrics.address "0.0.0.0:9464" is not a loopback address; metrics are served on loopback only (127.0.0.0/8 or ::1), or "off" (flag --metrics-address)',
    ],
    [
      'a metrics address that is a host name',
      { file: 'metrics: { address: "localhost:9464" }\n' },
      'config: metrics.address "localhost:9464" is not ip:port with an IP address, or "off" (e.g. 127.0.0.1:9464) (<file>)',
    ],
    [
      'a TCP address with a host name',
      { env: { ALLOCNET_TCP_ADDRESS: 'node1:4647' } },
      'config: tcp.address "node1:4647" is not ip:port with an IP address (e.g. 10.0.0.5:4647, [::1]:4647; port 0 picks one) (env ALLOCNET_TCP_ADDRESS)',
    ],
    [
      'TCP off loopback without TLS',
      { env: { ALLOCNET_TCP_ADDRESS: '0.0.0.0:4647' } },
      'config: tcp.tls is missing: a TCP listener on 0.0.0.0:4647, which is not a loopback address, needs TLS with client certificates (env ALLOCNET_TCP_ADDRESS)',
    ],
    [
      'TLS without a client CA',
      { file: 'tcp: { address: "10.0.0.1:1", tls: { cert: /c, key: /k } }\n' },
      'config: tcp.tls.clientCa is missing: TLS needs cert, key and clientCa (client certificates are required) (<file>)',
    ],
    [
      'TCP keys without an address',
      { env: { ALLOCNET_OPERATOR_TOKEN_FILE: '/t' } },
      'config: tcp.address is missing, but other tcp keys are set (env ALLOCNET_OPERATOR_TOKEN_FILE)',
    ],
    [
      'a netns prefix that could not name a namespace',
      { flags: { 'netns-prefix': 'a/b' } },
      'config: netnsPrefix "a/b" should be 1 to 64 characters of [A-Za-z0-9_.-], starting with a letter or digit (flag --netns-prefix)',
    ],
    [
      'a region that cannot go into CNI_ARGS',
      { env: { ALLOCNET_REGION: 'a;b' } },
      'config: region "a;b" should be 1 to 256 characters without ";", "=" or NUL (it goes into CNI_ARGS) (env ALLOCNET_REGION)',
    ],
    [
      'a default network subnet, checked by the configurator',
      { file: 'defaultNetwork: { subnet: 10.0.0.1/24 }\n' },
      'config: defaultNetwork.subnet "10.0.0.1/24" has host bits set; the subnet is 10.0.0.0/24 (<file>)',
    ],
    [
      'a default network MTU',
      { file: 'defaultNetwork: { mtu: 100 }\n' },
      'config: defaultNetwork.mtu should be a whole number from 576 to 65535, got 100 (<file>)',
    ],
    [
      'a socket path too long for a sockaddr',
      { flags: { socket: `/${'s'.repeat(120)}` } },
      `config: socket ${JSON.stringify(`/${'s'.repeat(120)}`).slice(0, 77)}... is 121 bytes long; a unix socket path has at most 107 (flag --socket)`,
    ],
    [
      'more ports than the decoder takes',
      { flags: { 'max-ports': '1025' } },
      'config: limits.maxPorts should be a whole number from 0 to 1024, got 1025 (flag --max-ports)',
    ],
    [
      'a CNI args cap that is not a number',
      { env: { ALLOCNET_MAX_CNI_ARGS: 'many' } },
      'config: limits.maxCniArgs should be a whole number from 0 to 64, got "many" (env ALLOCNET_MAX_CNI_ARGS)',
    ],
    [
      'no attachment at all',
      { flags: { 'max-attachments': '0' } },
      'config: limits.maxAttachments should be a whole number from 1 to 64, got 0 (flag --max-attachments)',
    ],
    [
      'an unknown limit',
      { file: 'limits: { maxArgs: 3 }\n' },
      'config: limits.maxArgs is not a known key (known: maxPorts, maxCniArgs, maxAttachments) (<file>)',
    ],
    [
      'a top level that is not a map',
      { file: '- a\n- b\n' },
      'config: (top level) should be a map of keys, got ["a","b"] (<file>)',
    ],
  ])('refuses %s', async (_, input, expected) => {
    const path = 'file' in input ? await file('agent.yaml', input.file) : undefined;
    const message = await refusal({
      env: 'env' in input ? input.env : {},
      ...('flags' in input ? { flags: input.flags } : {}),
      ...(path === undefined ? {} : { file: path }),
    });
    expect(message).toBe(expected.replace('<file>', `file ${path ?? ''}`));
  });

  it('refuses a file it cannot read or parse, naming it', async () => {
    const missing = join(tmp.path, 'missing.yaml');
    expect(await refusal({ file: missing, env: {} })).toBe(
      `config: file "${missing}" cannot be read: ENOENT: no such file or directory, open '${missing}'`,
    );
    const bad = await file('bad.json', '{"dataDir": ');
    expect(await refusal({ file: bad, env: {} })).toMatch(
      new RegExp(`^config: file "${bad}" is not valid JSON: `),
    );
    const unreadable = await file('dup.yaml', 'socket: /a\nsocket: /b\n');
    expect(await refusal({ file: unreadable, env: {} })).toMatch(
      new RegExp(`^config: file "${unreadable}" is not valid YAML: Map keys must be unique`),
    );
  });

  it('refuses a flag the agent does not have', async () => {
    expect(await refusal({ env: {}, flags: { 'no-such': 'x' } })).toBe(
      'config: --no-such is not a flag of the agent',
    );
  });

  it('accepts TCP on loopback without TLS, and off loopback with TLS', async () => {
    expect((await loadAgentConfig({ env: { ALLOCNET_TCP_ADDRESS: '[::1]:0' } })).tcp).toEqual({
      address: '[::1]:0',
    });
    const path = await file(
      'tls.yaml',
      'tcp: { address: "10.1.2.3:0", tls: { cert: /c, key: /k, clientCa: /ca } }\n',
    );
    expect((await loadAgentConfig({ file: path, env: {} })).tcp).toEqual({
      address: '10.1.2.3:0',
      tls: { cert: '/c', key: '/k', clientCa: '/ca' },
    });
  });
});

describe('the example configuration shipped beside the systemd unit', () => {
  it('is valid and holds the defaults', async () => {
    const example = new URL('../systemd/agent.example.yaml', import.meta.url).pathname;
    expect(await loadAgentConfig({ file: example, env: {} })).toEqual({
      ...DEFAULT_CONFIG,
      defaultNetwork: {
        name: 'nomad',
        bridge: 'nomad',
        subnet: '172.26.64.0/20',
        hairpinMode: false,
        ipamDataDir: '/var/run/cni',
        adminChain: 'NOMAD-ADMIN',
      },
    });
  });
});

describe('checkAgentConfig', () => {
  it('takes a whole configuration as it is and fills nothing in', () => {
    expect(checkAgentConfig(DEFAULT_CONFIG)).toEqual(DEFAULT_CONFIG);
  });

  it('refuses what a file would be refused for, naming the source it is given', () => {
    expect(() => checkAgentConfig({ ...DEFAULT_CONFIG, concurrency: 0 }, 'startAgent')).toThrow(
      'config: concurrency should be a whole number from 1 to 1024, got 0 (startAgent)',
    );
  });
});

describe('addresses', () => {
  it.each([
    ['127.0.0.1:9464', { host: '127.0.0.1', port: 9464 }],
    ['[::1]:0', { host: '::1', port: 0 }],
    ['10.0.0.1:65535', { host: '10.0.0.1', port: 65535 }],
    ['10.0.0.1:65536', undefined],
    ['::1:80', undefined],
    ['[10.0.0.1]:80', undefined],
    ['host:80', undefined],
    ['10.0.0.1', undefined],
  ])('parseHostPort(%s)', (text, expected) => {
    expect(parseHostPort(text)).toEqual(expected);
  });

  it.each([
    ['127.0.0.1', true],
    ['127.255.0.9', true],
    ['::1', true],
    ['0:0:0:0:0:0:0:1', true],
    ['0.0.0.0', false],
    ['::', false],
    ['10.0.0.1', false],
    // IPv4-mapped loopback reaches only loopback too.
    ['::ffff:127.0.0.1', true],
    ['::ffff:10.0.0.1', false],
  ])('isLoopback(%s) is %s', (host, expected) => {
    expect(isLoopback(host)).toBe(expected);
  });
});
