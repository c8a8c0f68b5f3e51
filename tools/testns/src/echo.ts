import { execa } from 'execa';

/**
 * A TCP and UDP echo server inside a namespace, for tests that send traffic through mapped ports:
 * it answers `<protocol>:<message>` on both protocols, IPv4 and IPv6, and prints `ready` once
 * bound. Runs as `node -e <script> <port>` in the namespace (an argv, no shell).
 */
const SERVER = `
const net = require('node:net'), dgram = require('node:dgram');
const port = Number(process.argv[1]);
let bound = 0;
const ready = () => { if (++bound === 3) process.stdout.write('ready\\n'); };
net.createServer((s) => s.once('data', (d) => s.end('tcp:' + d))).listen(port, '::', ready);
for (const type of ['udp4', 'udp6']) {
  const u = dgram.createSocket({ type, ipv6Only: type === 'udp6' });
  u.on('message', (m, r) => u.send('udp:' + m, r.port, r.address));
  u.bind(port, type === 'udp4' ? '0.0.0.0' : '::', ready);
}
`;

/** Sends one message and prints the answer; exits 1 after the timeout. */
const CLIENT = `
const net = require('node:net'), dgram = require('node:dgram');
const [protocol, host, port, message, ms] = process.argv.slice(1);
setTimeout(() => { process.stderr.write('no answer within ' + ms + ' ms\\n'); process.exit(1); }, Number(ms)).unref();
if (protocol === 'tcp') {
  const s = net.connect(Number(port), host, () => s.write(message));
  let got = '';
  s.on('data', (d) => (got += d)).on('end', () => { process.stdout.write(got); process.exit(0); });
  s.on('error', (e) => { process.stderr.write(e.message + '\\n'); process.exit(1); });
} else {
  const u = dgram.createSocket(host.includes(':') ? 'udp6' : 'udp4');
  u.on('message', (m) => { process.stdout.write(String(m)); process.exit(0); });
  const send = () => u.send(message, Number(port), host);
  send();
  setInterval(send, 200).unref();
}
`;

export interface EchoServer {
  stop(): Promise<void>;
}

/** Starts the echo server in namespace `netns` (a name under /run/netns) on `port`. */
export async function startEchoServer(netns: string, port: number): Promise<EchoServer> {
  const child = execa(
    'ip',
    ['netns', 'exec', netns, process.execPath, '-e', SERVER, String(port)],
    { reject: false, stdin: 'ignore' },
  );
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('ready')) resolve();
    });
    void child.then((r) => {
      reject(new Error(`echo server in ${netns} exited before it was ready: ${r.stderr}`));
    });
  });
  return {
    async stop() {
      child.kill('SIGKILL');
      await child;
    },
  };
}

/** Sends `message` from namespace `netns` to host:port over `protocol`; resolves the answer. */
export async function echo(
  netns: string,
  protocol: 'tcp' | 'udp',
  host: string,
  port: number,
  message: string,
  timeoutMs = 5000,
): Promise<string> {
  const r = await execa(
    'ip',
    [
      'netns',
      'exec',
      netns,
      process.execPath,
      '-e',
      CLIENT,
      protocol,
      host,
      String(port),
      message,
      String(timeoutMs),
    ],
    { reject: false, stdin: 'ignore' },
  );
  if (r.exitCode !== 0)
    throw new Error(`${protocol} to ${host}:${port} from ${netns} failed: ${r.stderr.trim()}`);
  return r.stdout;
}
