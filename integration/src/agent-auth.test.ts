// The agent's TCP listener: TLS with required client certificates, roles from the certificate's
// OU or an operator token, and the refusal of plaintext TCP off loopback. The agent runs in a
// node namespace and listens on its veth address; the client is a small script run inside a
// client namespace on the other end of the veth (fixtures/agent-tcp-client.mjs), so the TCP
// traffic crosses a real link and nothing listens in the root namespace. Certificates are made
// with openssl for each run. Needs root, iproute2, iptables and openssl.
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { requireNetworkTestHost } from '@allocnet/testns';
import type { TestNetns } from '@allocnet/testns';
import { createAgentHost } from './fixtures/agent-host.js';
import type { AgentHost, AgentProcess } from './fixtures/agent-host.js';

const CLIENT = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'agent-tcp-client.mjs');
const TOKEN = 'e2b1c7d9a4f04b6e8c3d5a7f9b1e2c4d';
/** The subnet of the client's link (`lab.client`); the node, where the agent listens, is its .1. */
const CLIENT_SUBNET = '10.77.0.0/24';
const NODE_IP = '10.77.0.1';

interface Call {
  readonly service: 'alloc' | 'operator' | 'health';
  readonly method?: string;
  readonly request?: unknown;
}
type Result = { ok: true; status?: string } | { code: string; details: string };

/** Runs the TCP client in `netns` and returns the outcome of each call. */
async function callFrom(
  netns: TestNetns,
  input: {
    target: string;
    tls?: { ca: string; cert?: string; key?: string };
    token?: string;
    h2?: boolean;
    calls: Call[];
  },
): Promise<Result[]> {
  const r = await netns.exec([process.execPath, CLIENT, JSON.stringify(input)]);
  return JSON.parse(r.stdout) as Result[];
}

async function openssl(args: readonly string[]): Promise<void> {
  await execa('openssl', args, { stdin: 'ignore' });
}

/** A CA, the agent's certificate for NODE_IP, and client certificates with the given OUs. */
async function makeCertificates(dir: string) {
  await mkdir(dir, { recursive: true });
  const p = (name: string) => join(dir, name);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const ca = async (name: string) => {
    await openssl([
      'req',
      '-x509',
      ...ec,
      '-keyout',
      p(`${name}.key`),
      '-out',
      p(`${name}.pem`),
      '-days',
      '1',
      '-subj',
      `/CN=${name}`,
    ]);
  };
  const issue = async (name: string, subject: string, caName: string, ext?: string) => {
    await openssl([
      'req',
      ...ec,
      '-keyout',
      p(`${name}.key`),
      '-out',
      p(`${name}.csr`),
      '-subj',
      subject,
    ]);
    const args = [
      'x509',
      '-req',
      '-in',
      p(`${name}.csr`),
      '-CA',
      p(`${caName}.pem`),
      '-CAkey',
      p(`${caName}.key`),
      '-CAcreateserial',
      '-out',
      p(`${name}.pem`),
      '-days',
      '1',
    ];
    if (ext !== undefined) {
      await writeFile(p(`${name}.ext`), ext);
      args.push('-extfile', p(`${name}.ext`));
    }
    await openssl(args);
  };
  await ca('ca');
  await ca('rogue-ca');
  await issue('agent', '/CN=allocnet-agent', 'ca', `subjectAltName=IP:${NODE_IP},IP:127.0.0.1\n`);
  await issue('operator', '/O=allocnet/OU=operator/CN=ops-1', 'ca');
  await issue('scheduler', '/O=allocnet/OU=scheduler/CN=scheduler-1', 'ca');
  await issue('norole', '/O=allocnet/OU=frontend/CN=web-1', 'ca');
  await issue('rogue', '/O=allocnet/OU=operator/CN=mallory', 'rogue-ca');
  const client = (name: string) => ({
    ca: p('ca.pem'),
    cert: p(`${name}.pem`),
    key: p(`${name}.key`),
  });
  return {
    server: { cert: p('agent.pem'), key: p('agent.key'), clientCa: p('ca.pem') },
    operator: client('operator'),
    scheduler: client('scheduler'),
    norole: client('norole'),
    rogue: client('rogue'),
    anonymous: { ca: p('ca.pem') },
  };
}

async function tokenFile(dir: string): Promise<string> {
  const file = join(dir, 'operator-token');
  await writeFile(file, `${TOKEN}\n`, { mode: 0o600 });
  await chmod(file, 0o600);
  return file;
}

beforeAll(async () => {
  await requireNetworkTestHost(['ip', 'iptables', 'nsenter', 'openssl']);
});

describe('TCP with TLS and client certificates', () => {
  let host: AgentHost;
  let agent: AgentProcess;
  let client: TestNetns;
  let certs: Awaited<ReturnType<typeof makeCertificates>>;
  let target: string;

  beforeAll(async () => {
    host = await createAgentHost();
    try {
      certs = await makeCertificates(join(host.dir, 'tls'));
      ({ netns: client } = await host.lab.client(host.node, { subnet: CLIENT_SUBNET }));
      agent = await host.start({
        args: ['--tcp-address', `${NODE_IP}:0`],
        env: {
          ALLOCNET_TLS_CERT: certs.server.cert,
          ALLOCNET_TLS_KEY: certs.server.key,
          ALLOCNET_TLS_CLIENT_CA: certs.server.clientCa,
          ALLOCNET_OPERATOR_TOKEN_FILE: await tokenFile(host.dir),
        },
      });
      target = agent.ready.tcp ?? '';
    } catch (error) {
      await host.dispose();
      throw error;
    }
  });

  afterAll(async () => {
    await host.dispose();
  });

  it('listens on the address it was given, the port it picked in the ready file', () => {
    expect(target).toMatch(new RegExp(`^${NODE_IP.replaceAll('.', '\\.')}:[1-9][0-9]*$`));
    expect(agent.lines().find((l) => l.message === 'agent ready')).toMatchObject({
      tcp: target,
      tls: true,
    });
  });

  it('lets the scheduler use AllocNetworkService and refuses it OperatorService', async () => {
    expect(
      await callFrom(client, {
        target,
        tls: certs.scheduler,
        calls: [
          { service: 'alloc', method: 'ListAllocNetworks' },
          { service: 'operator', method: 'GetAgentInfo' },
          { service: 'operator', method: 'ReloadConfig' },
        ],
      }),
    ).toEqual([
      { ok: true },
      {
        code: 'PERMISSION_DENIED',
        details:
          'allocnet.v1.OperatorService needs the operator role; "scheduler-1" has the scheduler role',
      },
      {
        code: 'PERMISSION_DENIED',
        details:
          'allocnet.v1.OperatorService needs the operator role; "scheduler-1" has the scheduler role',
      },
    ]);
  });

  it('lets the operator use both services', async () => {
    expect(
      await callFrom(client, {
        target,
        tls: certs.operator,
        calls: [
          { service: 'alloc', method: 'ListAllocNetworks' },
          { service: 'operator', method: 'GetAgentInfo' },
        ],
      }),
    ).toEqual([{ ok: true }, { ok: true }]);
  });

  it('answers UNAUTHENTICATED to a client whose certificate has no role, unless it has the operator token', async () => {
    expect(
      await callFrom(client, {
        target,
        tls: certs.norole,
        calls: [{ service: 'alloc', method: 'ListAllocNetworks' }, { service: 'health' }],
      }),
    ).toEqual([
      {
        code: 'UNAUTHENTICATED',
        details:
          'client certificate "web-1" has no allocnet role (subject OU "operator" or "scheduler")',
      },
      // Health is a probe: any client TLS accepted gets its answer.
      { ok: true, status: 'SERVING' },
    ]);
    expect(
      await callFrom(client, {
        target,
        tls: certs.norole,
        token: TOKEN,
        calls: [
          { service: 'operator', method: 'GetAgentInfo' },
          { service: 'alloc', method: 'ListAllocNetworks' },
        ],
      }),
    ).toEqual([{ ok: true }, { ok: true }]);
    expect(
      await callFrom(client, {
        target,
        tls: certs.operator,
        token: 'not-the-token',
        calls: [{ service: 'alloc', method: 'ListAllocNetworks' }],
      }),
    ).toEqual([{ code: 'UNAUTHENTICATED', details: 'the bearer token is not valid' }]);
    await agent.waitForLine(
      () => agent.lines().filter((l) => l.message === 'call refused').length >= 3,
    );
  });

  it('answers health to any client TLS accepted', async () => {
    expect(
      await callFrom(client, { target, tls: certs.scheduler, calls: [{ service: 'health' }] }),
    ).toEqual([{ ok: true, status: 'SERVING' }]);
  });

  it('does not complete TLS with a client that has no certificate, or one from another CA', async () => {
    for (const tls of [certs.anonymous, certs.rogue]) {
      const [result] = await callFrom(client, {
        target,
        tls,
        calls: [{ service: 'alloc', method: 'ListAllocNetworks' }],
      });
      expect(result).toMatchObject({ code: 'UNAVAILABLE' });
    }
  });

  it("answers the CLI's client (node:http2) as grpc-js's, role by role; a rogue certificate gets no call through", async () => {
    const calls: Call[] = [
      { service: 'alloc', method: 'ListAllocNetworks' },
      { service: 'operator', method: 'GetAgentInfo' },
    ];
    for (const input of [
      { target, tls: certs.operator, calls },
      { target, tls: certs.scheduler, calls },
      { target, tls: certs.norole, calls },
      { target, tls: certs.norole, token: TOKEN, calls },
      { target, tls: certs.operator, token: 'not-the-token', calls },
    ]) {
      const theirs = await callFrom(client, input);
      expect({ input, answers: await callFrom(client, { ...input, h2: true }) }).toEqual({
        input,
        answers: theirs,
      });
    }
    // A refused handshake in the h2 client's own words, with grpc's code. TLS 1.3 ends the
    // handshake before the agent checks the certificate: a missing one comes back as the agent's
    // alert; one from another CA as the connection closed, with no reason or a reset, depending
    // on which end Node sees first.
    const refused = async (tls: { ca: string }) =>
      (await callFrom(client, { target, tls, h2: true, calls: calls.slice(0, 1) }))[0];
    expect(await refused(certs.anonymous)).toMatchObject({
      code: 'UNAVAILABLE',
      details: expect.stringContaining('certificate required') as unknown,
    });
    expect(await refused(certs.rogue)).toMatchObject({
      code: 'UNAVAILABLE',
      details: expect.stringMatching(
        /^(the connection closed before an answer|.*ECONNRESET)$/,
      ) as unknown,
    });
  });
});

describe('TCP without TLS', () => {
  let host: AgentHost;

  beforeEach(async () => {
    host = await createAgentHost();
  });

  afterEach(async () => {
    await host.dispose();
  });

  it('is refused on an address that is not loopback: the agent does not start', async () => {
    expect(await host.startFailing({ args: ['--tcp-address', `${NODE_IP}:0`] })).toEqual({
      code: 1,
      stderr: `allocnet agent: config: tcp.tls is missing: a TCP listener on ${NODE_IP}:0, which is not a loopback address, needs TLS with client certificates (flag --tcp-address)\n`,
    });
    expect(await host.startFailing({ env: { ALLOCNET_TCP_ADDRESS: '0.0.0.0:0' } })).toEqual({
      code: 1,
      stderr:
        'allocnet agent: config: tcp.tls is missing: a TCP listener on 0.0.0.0:0, which is not a loopback address, needs TLS with client certificates (env ALLOCNET_TCP_ADDRESS)\n',
    });
    expect(await host.namespaces()).toEqual([]);
  });

  it('on loopback, still needs an identity: UNAUTHENTICATED without the token, the operator with it', async () => {
    const agent = await host.start({
      args: ['--tcp-address', '127.0.0.1:0'],
      env: { ALLOCNET_OPERATOR_TOKEN_FILE: await tokenFile(host.dir) },
    });
    const target = agent.ready.tcp ?? '';
    expect(target).toMatch(/^127\.0\.0\.1:[1-9][0-9]*$/);
    // The node's loopback: the client runs inside the node namespace.
    expect(
      await callFrom(host.node, {
        target,
        calls: [
          { service: 'alloc', method: 'ListAllocNetworks' },
          { service: 'operator', method: 'GetAgentInfo' },
        ],
      }),
    ).toEqual([
      {
        code: 'UNAUTHENTICATED',
        details:
          'allocnet.v1.AllocNetworkService over TCP needs a client certificate with an allocnet role (OU "scheduler" or "operator") or an operator bearer token',
      },
      {
        code: 'UNAUTHENTICATED',
        details:
          'allocnet.v1.OperatorService over TCP needs a client certificate with an allocnet role (OU "scheduler" or "operator") or an operator bearer token',
      },
    ]);
    expect(
      await callFrom(host.node, {
        target,
        token: TOKEN,
        calls: [{ service: 'operator', method: 'GetAgentInfo' }],
      }),
    ).toEqual([{ ok: true }]);
  });
});
